#if Postgres
  import Foundation
  import Liaison
  import LiaisonTestSupport
  import Testing

  @testable import LiaisonPostgres

  /// Schema versions across a fleet: hosts running different versions of Liaison share one
  /// database during a rolling deploy. An older program never rewrites a newer schema: it uses one
  /// that says it can, and refuses another, naming both versions; hosts that set the schema up at
  /// once all succeed. Each test has a database of its own.
  @Suite("PostgreSQL: schema versions across a fleet")
  struct SchemaVersionTests {
    /// A new database on the shared server, and its URL.
    private func newDatabase() throws -> (server: PostgresTestServer, name: String, url: String) {
      let server = try PostgresTestServer.shared.get()
      let name = "schema_\(UInt32.random(in: 0...UInt32.max))"
      try server.psql("CREATE DATABASE \(name)")
      let url = BackendPlace.url(server).replacingOccurrences(of: "/\(server.database)?", with: "/\(name)?")
      return (server, name, url)
    }

    /// How many advisory locks are waited for in `database` alone: the suites beside this one
    /// wait for theirs on the same server (counted over the whole server, two of these tests
    /// running at once each saw "2" and waited for the other's waiter, until their bound).
    private func waitingAdvisoryLocks(_ server: PostgresTestServer, _ database: String) throws -> String {
      try server.psql(
        """
        SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        """, database: database)
    }

    /// What a setup would change: the schema's comment, its tables' columns and its functions'
    /// definitions.
    private func fingerprint(_ server: PostgresTestServer, _ database: String) throws -> String {
      try server.psql(
        """
        SELECT obj_description('liaison'::regnamespace, 'pg_namespace'),
          (SELECT md5(string_agg(table_name || '.' || column_name, ',' ORDER BY table_name, column_name))
            FROM information_schema.columns WHERE table_schema = 'liaison'),
          (SELECT md5(string_agg(pg_get_functiondef(oid), '' ORDER BY oid))
            FROM pg_proc WHERE pronamespace = 'liaison'::regnamespace)
        """, database: database)
    }

    /// Makes the schema look as a later version of Liaison would leave it: `comment`, a table of
    /// its own, and one function's definition changed.
    private func upgrade(_ server: PostgresTestServer, _ database: String, comment: String) throws {
      try server.psql(
        """
        CREATE TABLE liaison.later_version (n integer);
        DO $$ DECLARE definition text; BEGIN
          SELECT pg_get_functiondef(oid) INTO definition FROM pg_proc
            WHERE pronamespace = 'liaison'::regnamespace ORDER BY proname LIMIT 1;
          EXECUTE regexp_replace(definition, '\\$function\\$', '$function$ -- as a later version has it' || chr(10));
        END $$;
        COMMENT ON SCHEMA liaison IS '\(comment)';
        """, database: database)
    }

    @Test func theCommentIsReadAsAVersionAndTheOldestThatCanUseIt() {
      // 4 added the leases, which code of version 3 would not respect: not usable from 3. 5 keeps
      // a mailbox's removals apart from its sends, which code of version 4 would miscount. 6 adds an
      // index, which code of version 5 does without: usable from 5.
      #expect(Schema.comment == "Liaison schema 6; usable from 5")
      #expect(Schema.verdict(nil) == .setUp)
      #expect(Schema.verdict("Liaison schema 1") == .setUp)
      #expect(Schema.verdict("Liaison schema \(Schema.version)") == .use)
      #expect(Schema.verdict("Liaison schema \(Schema.version + 1); usable from \(Schema.version)") == .use)
      #expect(
        Schema.verdict("Liaison schema \(Schema.version + 2); usable from \(Schema.version + 1)")
          == .refuse(version: Schema.version + 2, usableFrom: Schema.version + 1))
      #expect(
        Schema.verdict("Liaison schema \(Schema.version + 1)")
          == .refuse(version: Schema.version + 1, usableFrom: Schema.version + 1))
      // A later version's comment may say more; what this version cannot read keeps it out.
      #expect(
        Schema.verdict("Liaison schema \(Schema.version + 1); usable from \(Schema.version); and more") == .use)
      #expect(
        Schema.verdict("Liaison schema \(Schema.version + 1), with something new")
          == .refuse(version: Schema.version + 1, usableFrom: Schema.version + 1))
      // A comment Liaison did not write: set up as a schema without one.
      #expect(Schema.verdict("my own schema") == .setUp)
      #expect(Schema.verdict("Liaison schema x") == .setUp)
    }

    /// A later version that older programs cannot use: this one refuses it with both versions
    /// named, and the schema is as it was (on the old code, the setup ran again: the comment went
    /// back and the function was replaced by this version's).
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func anOlderProgramRefusesANewerSchemaAndLeavesItAsItIs() async throws {
      let (server, database, url) = try newDatabase()
      await (try await PostgresContainer(url: url, namespace: "fleet")).close()
      let later = Schema.version + 1
      try upgrade(server, database, comment: "Liaison schema \(later)")
      let before = try fingerprint(server, database)
      let error = await #expect(throws: LiaisonError.self) {
        try await PostgresContainer(url: url, namespace: "fleet")
      }
      #expect(error?.code == .incompatibleSchema)
      #expect(error?.message.contains("version \(later)") == true, "\(String(describing: error))")
      #expect(error?.message.contains("knows version \(Schema.version)") == true, "\(String(describing: error))")
      #expect(try fingerprint(server, database) == before)
    }

    /// A later version that says older programs can use it (it only adds): this one uses it as it
    /// is, and leaves it so.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func anOlderProgramUsesANewerSchemaThatSaysItCan() async throws {
      let (server, database, url) = try newDatabase()
      await (try await PostgresContainer(url: url, namespace: "fleet")).close()
      try upgrade(server, database, comment: "Liaison schema \(Schema.version + 1); usable from \(Schema.version)")
      let before = try fingerprint(server, database)
      let place = try await PostgresContainer(url: url, namespace: "fleet")
      let held = try await place.lock("job").lock(.exclusive, timeout: nil)
      #expect(try await held.fencingToken() > 0)
      await held.unlock()
      await place.close()
      #expect(try fingerprint(server, database) == before)
    }

    /// A database that a program of version 4 used, with messages waiting, quarantined and
    /// acknowledged: this version upgrades it when it opens, and every mailbox keeps its counts,
    /// bytes and limits, which later sends and removals go on from. (Version 4 kept a mailbox's
    /// totals in its row alone; the database is made to look as it left it.)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func anUpgradeFromVersion4KeepsEveryMailboxsTotals() async throws {
      let (server, database, url) = try newDatabase()
      var place = try await PostgresContainer(url: url, namespace: "fleet")
      let inbox = try await place.mailbox("inbox")
      try await inbox.setLimits(MailboxLimits(maximumMessages: 4))
      try await inbox.sendAll(["a", "b", "c"])
      try await inbox.send(Data([0xFF]), id: "raw")
      let receiver = try await inbox.receiver()
      let received = try await receiver.receive(String.self, limit: 10)
      #expect(received.map(\.payload) == ["a", "b", "c"], "the raw bytes are quarantined")
      try await receiver.acknowledge(received[0])
      await receiver.close()
      try await place.mailbox("other").send("x")
      let before = try await place.mailboxes()
      #expect(before.map(\.waiting) == [2, 1] && before.map(\.quarantined) == [1, 0], "\(before)")
      await place.close()
      try server.psql(
        """
        UPDATE liaison.mailbox m SET messages = m.messages - r.removed_messages, bytes = m.bytes - r.removed_bytes,
          quarantined = r.quarantined
        FROM liaison.mailbox_receipt r WHERE r.namespace = m.namespace AND r.name = m.name;
        DROP TABLE liaison.mailbox_receipt;
        DROP FUNCTION liaison.mailbox_lock_receipt;
        COMMENT ON SCHEMA liaison IS 'Liaison schema 4';
        """, database: database)
      #expect(
        try server.psql("SELECT messages, quarantined FROM liaison.mailbox WHERE name = 'inbox'", database: database)
          == "3|1")
      place = try await PostgresContainer(url: url, namespace: "fleet")
      #expect(
        try server.psql("SELECT obj_description('liaison'::regnamespace, 'pg_namespace')", database: database)
          == Schema.comment)
      #expect(try await place.mailboxes() == before)
      // What a quarantine by a host still running version 4's code commits after the upgrade: the
      // message set aside, and the mailbox's own row counting it. The counts follow it.
      try server.psql(
        """
        UPDATE liaison.mailbox_message SET quarantine_reason = 'an old host'
        WHERE namespace = 'fleet' AND mailbox = 'other';
        UPDATE liaison.mailbox SET quarantined = quarantined + 1 WHERE namespace = 'fleet' AND name = 'other';
        """, database: database)
      let other = try await place.mailboxes().first { $0.name.rawValue == "other" }
      #expect(other?.waiting == 0 && other?.quarantined == 1, "\(String(describing: other))")
      let upgraded = try await place.mailbox("inbox")
      #expect(try await upgraded.count() == 2)
      #expect(try await upgraded.limits() == MailboxLimits(maximumMessages: 4))
      #expect(try await upgraded.send("d", id: "raw").isStored == false, "the quarantined message's id waits")
      try await upgraded.sendAll(["e"])
      let full = await #expect(throws: LiaisonError.self) { try await upgraded.sendAll(["f"]) }
      #expect(full?.code == .tooLarge, "4 messages, the quarantined one included")
      let next = try await upgraded.receiver()
      let rest = try await next.receive(String.self, limit: 10)
      #expect(rest.map(\.payload) == ["b", "c", "e"])
      try await next.acknowledge(rest)
      #expect(try await next.removeQuarantined() == 1)
      #expect(try await upgraded.count() == 0)
      #expect(try await place.mailboxes().map(\.name.rawValue) == ["other"])
      await next.close()
      await place.close()
    }

    /// A later host sets the schema up while this one waits for the setup's lock (this one saw
    /// no schema before it asked for the lock): under the lock, this one's setup checks the
    /// version again, and refuses the newer schema it now finds instead of rewriting it.
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aNewerSchemaSetUpWhileThisHostWaitsForTheLockIsRefused() async throws {
      // On a thread of its own, so that the later host commits well within the waiting setup's
      // reply bound, however busy the cooperative pool is.
      let thread = OwnThreadExecutor()
      try await withTaskExecutorPreference(thread) { try await newerSchemaWhileWaiting(thread) }
    }

    private func newerSchemaWhileWaiting(_ thread: OwnThreadExecutor) async throws {
      let (server, database, url) = try newDatabase()
      let command = server.psqlCommand(host: "127.0.0.1").map {
        $0.replacingOccurrences(of: "dbname=\(server.database) ", with: "dbname=\(database) ")
      }
      let later = try ChildProcess(command[0], Array(command.dropFirst()), errors: .pipe)
      later.write(
        """
        BEGIN;
        CREATE SCHEMA liaison;
        COMMENT ON SCHEMA liaison IS 'Liaison schema 99';
        SELECT 'held' FROM (SELECT pg_advisory_xact_lock(\(Schema.setupClass), 0)) AS taken;
        """)
      while try later.readLine() != "held" {}
      // A bound long enough that the wait for the lock is not taken for a dead server.
      let opening = Task(executorPreference: thread) {
        try await PostgresContainer(url: url, namespace: "fleet", configuration: .init(detectionBound: .seconds(60)))
      }
      // A bound for failure, long enough for a sanitizer's whole-suite run.
      try await waitUntilOffThePool("this host's setup waits for the later host's lock", timeout: 300) {
        try waitingAdvisoryLocks(server, database) == "1"
      }
      later.write("COMMIT;")
      let error = await #expect(throws: LiaisonError.self) { try await opening.value }
      #expect(error?.code == .incompatibleSchema)
      #expect(error?.message.contains("version 99") == true, "\(String(describing: error))")
      #expect(
        try server.psql("SELECT obj_description('liaison'::regnamespace, 'pg_namespace')", database: database)
          == "Liaison schema 99")
      later.write("\\q\n")
      _ = later.finish()
    }

    /// An upgrade from version 5 while an exclusive session waiter waits (its grant statement
    /// holds `liaison.lock` for its whole wait): the upgrade completes, and a lock on another name
    /// is granted and released meanwhile. (Before, the upgrade's `ALTER TABLE` queued behind the
    /// waiter, and every grant, renewal and release of the fleet queued behind the `ALTER`.)
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func anUpgradeWhileAnExclusiveWaiterWaitsCompletesAndOtherLocksGoOn() async throws {
      // On a thread of its own: its blocking calls (psql, the server's start and stop, a child's
      // end) never hold a thread of the cooperative pool that the suites beside it need.
      // Its tasks too, explicitly (an unstructured task does not take the preference): under
      // Thread Sanitizer, the pool's threads stayed blocked by the synchronous suites for 300 s.
      let thread = OwnThreadExecutor()
      try await withTaskExecutorPreference(thread) {
        let (server, database, url) = try newDatabase()
        let holder = try await PostgresContainer(url: url, namespace: "fleet")
        let held = try #require(try await holder.lock("job").tryLock())
        let waiter = try await PostgresContainer(url: url, namespace: "fleet")
        let waiting = Task(executorPreference: thread) { try await waiter.lock("job").lock() }
        try await waitUntilOffThePool("the waiter waits", timeout: 300) {
          try waitingAdvisoryLocks(server, database) == "1"
        }
        // What version 5 left: no index of remembered ids by age.
        try server.psql(
          "DROP INDEX liaison.mailbox_acknowledged_by_age; COMMENT ON SCHEMA liaison IS 'Liaison schema 5'",
          database: database)
        // Counted when each ends, whether it succeeded or threw: its error shows below. Their
        // bound is long enough that a sanitizer's slow run is not taken for a dead server.
        let ended = Locked(0)
        let upgrade = Task(executorPreference: thread) {
          defer { ended.withLock { $0 += 1 } }
          return try await PostgresContainer(
            url: url, namespace: "fleet", configuration: .init(detectionBound: .seconds(60)))
        }
        let other = Task(executorPreference: thread) {
          defer { ended.withLock { $0 += 1 } }
          let place = try await PostgresContainer(
            url: url, namespace: "other", configuration: .init(detectionBound: .seconds(60)))
          let lock = try #require(try await place.lock("job").tryLock())
          await lock.unlock()
          return place
        }
        // A bound for failure: before the fix, neither ever ended.
        try await waitUntilOffThePool("the upgrade and the other lock end", timeout: 300) {
          ended.withLock { $0 } == 2
        }
        let upgraded = try await upgrade.value
        let otherPlace = try await other.value
        #expect(
          try server.psql(
            "SELECT obj_description('liaison'::regnamespace, 'pg_namespace'), "
              + "to_regclass('liaison.mailbox_acknowledged_by_age') IS NOT NULL", database: database)
            == "\(Schema.comment)|t")
        await held.unlock()
        let next = try await waiting.value
        await next.unlock()
        for place in [holder, waiter, upgraded, otherPlace] { await place.close() }
      }
    }

    /// Eight hosts start at once on a database without the schema: every one opens, and the
    /// schema is set up once, in this version.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func hostsThatStartAtOnceAllSetTheSchemaUp() async throws {
      let (server, database, url) = try newDatabase()
      try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<8 {
          group.addTask { await (try await PostgresContainer(url: url, namespace: "fleet")).close() }
        }
        try await group.waitForAll()
      }
      #expect(
        try server.psql("SELECT obj_description('liaison'::regnamespace, 'pg_namespace')", database: database)
          == Schema.comment)
    }
  }
#endif
