#if Postgres
  import Liaison
  import PostgresNIO

  /// The tables of the schema `liaison`, shared by every namespace of a database, and the classes
  /// of Liaison's advisory locks (the first of their two 32-bit keys; the second is a row id).
  enum Schema {
    /// Held (for a transaction) while the schema is created.
    static let setupClass: Int32 = 0x4C49_5343  // "LISC"
    /// The advisory locks of ``PostgresLock``s.
    static let lockClass: Int32 = 0x4C49_4C4B  // "LILK"
    /// The claims of ``PostgresPresence``s.
    static let claimClass: Int32 = 0x4C49_5043  // "LIPC"
    /// Held by a presence's holder too; observers wait for it, shared, to learn of its end.
    static let watchClass: Int32 = 0x4C49_5057  // "LIPW"

    /// The version of the schema this code sets up, kept in the schema's comment
    /// (``comment``). A database set up by an older version gains the newer tables and
    /// functions at the next start.
    ///
    /// 4 added the lease columns (``HeldLease``); 5 the mailboxes' receipts
    /// (`liaison.mailbox_receipt`, ``MailboxSchema``), so that sends and removals do not wait for
    /// each other; 6 an index of remembered ids by their acknowledgement's time, so that they are
    /// forgotten in small batches (``PostgresMailboxReceiver``).
    static let version = 6
    /// The oldest version of this code that can use this version of the schema: a later schema
    /// that only adds to this one says so in its comment, and this code then uses it as it is.
    /// 4 is not usable from 3: code of version 3 knows nothing of leases, and would grant a
    /// session's lock or claim that a lease holds. 5 is not usable from 4: code of version 4
    /// would read a mailbox's totals from its row alone, which counts what was ever sent. 6 is
    /// usable from 5, which only does not use its index.
    static let usableFrom = 5

    /// The schema's comment: `Liaison schema N`, and `; usable from M` when code of an older
    /// version M can use it.
    static let comment = "Liaison schema \(version)" + (usableFrom < version ? "; usable from \(usableFrom)" : "")

    /// The SQLSTATE of the setup's refusal of a newer schema (class `LQ`, Liaison's own).
    static let newerSchemaState = "LQ001"

    /// The channel of every notification; the payload says which namespace and name.
    static let channel = "liaison"

    /// What this code makes of a schema whose comment is `found`.
    enum Verdict: Equatable {
      /// The schema is this version, or a later one this code can use: use it as it is.
      case use
      /// No schema, or an older one: set it up (the setup checks again, under its lock).
      case setUp
      /// A later version that this code cannot use; its version and the oldest it names.
      case refuse(version: Int, usableFrom: Int)
    }

    /// What this code makes of a schema whose comment is `found` (`nil`: no schema, or one with
    /// no comment).
    static func verdict(_ found: String?) -> Verdict {
      guard let found, let parsed = parse(found) else { return .setUp }
      if parsed.version < version { return .setUp }
      if parsed.version == version || parsed.usableFrom <= version { return .use }
      return .refuse(version: parsed.version, usableFrom: parsed.usableFrom)
    }

    /// The version and the oldest version that can use it, in a comment that starts as
    /// ``comment`` does (`Liaison schema N`). A later version's comment may say more: what this
    /// code cannot read says that no older code can use it (`usableFrom` is N).
    static func parse(_ comment: String) -> (version: Int, usableFrom: Int)? {
      let prefix = "Liaison schema "
      guard comment.hasPrefix(prefix) else { return nil }
      let rest = comment.dropFirst(prefix.count)
      let digits = rest.prefix { $0.isASCII && $0.isNumber }
      guard let version = Int(digits), version > 0 else { return nil }
      let usable = "; usable from "
      guard rest.dropFirst(digits.count).hasPrefix(usable) else { return (version, version) }
      let from = rest.dropFirst(digits.count + usable.count).prefix { $0.isASCII && $0.isNumber }
      return (version, Int(from).map { min($0, version) } ?? version)
    }

    /// The error for a schema that a later version of Liaison set up, which this one cannot use.
    static func newer(version found: Int, usableFrom: Int) -> LiaisonError {
      LiaisonError(
        .incompatibleSchema,
        "The database's Liaison schema is version \(found), set up by a later version of Liaison; this program "
          + "knows version \(version), and the schema needs code of version \(usableFrom) or later. Nothing was "
          + "changed. Update this program to the version the other hosts run.")
    }

    /// Creates the schema, its tables and functions, unless they are there in this ``version``
    /// or a later one this code can use; refuses a later one it cannot use (``newer(version:usableFrom:)``),
    /// and never rewrites it. One statement, under a lock, which checks the version again: hosts
    /// that start at once set it up once, and an older host that starts during an upgrade finds
    /// the newer schema. Every statement in it may run again (`IF NOT EXISTS`, `OR REPLACE`).
    ///
    /// An upgrade never queues the fleet's locks behind it: it changes a table only when the
    /// change is missing (an `ALTER TABLE … IF NOT EXISTS` takes the table's strongest lock even
    /// when there is nothing to add), and waits at most ``tableLockWait`` for a table's lock. An
    /// exclusive waiter holds `liaison.lock` for its whole wait: a change that queued behind it
    /// would make every grant, renewal and release queue behind the change. When the wait passes,
    /// the setup changes nothing and is tried again, ``setUpAttempts`` times in all.
    static func create(_ connector: Connector) async throws {
      let current = try await connector.query(
        "SELECT obj_description(to_regnamespace('liaison'), 'pg_namespace')", doing: "look for Liaison's tables")
      switch verdict(try current.first?.decode(String?.self) ?? nil) {
      case .use: return
      case .refuse(let found, let usableFrom): throw newer(version: found, usableFrom: usableFrom)
      case .setUp: break
      }
      let setup = PostgresQuery(
        unsafeSQL: """
          DO $liaison$ DECLARE
            found text[];
          BEGIN
            PERFORM pg_advisory_xact_lock(\(setupClass), 0);
            found := regexp_match(
              obj_description(to_regnamespace('liaison'), 'pg_namespace'),
              '^Liaison schema ([0-9]+)(?:; usable from ([0-9]+))?');
            IF found IS NOT NULL AND found[1]::bigint >= \(version) THEN
              IF found[1]::bigint > \(version) AND coalesce(found[2], found[1])::bigint > \(version) THEN
                RAISE EXCEPTION USING ERRCODE = '\(newerSchemaState)',
                  MESSAGE = found[1] || ' ' || coalesce(found[2], found[1]);
              END IF;
              RETURN;  -- set up meanwhile, by this version or a later one this code can use
            END IF;
            PERFORM set_config('lock_timeout', '\(Connector.lockTimeoutSetting(tableLockWait))', true);
            CREATE SCHEMA IF NOT EXISTS liaison;
            CREATE TABLE IF NOT EXISTS liaison.lock (
              id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
              namespace text NOT NULL,
              name text NOT NULL,
              fencing_token bigint NOT NULL DEFAULT 0,
              UNIQUE (namespace, name));
            CREATE TABLE IF NOT EXISTS liaison.presence (
              id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
              namespace text NOT NULL,
              name text NOT NULL,
              host text,
              pid integer,
              info text,
              since timestamptz,
              backend_pid integer,
              UNIQUE (namespace, name));
            CREATE TABLE IF NOT EXISTS liaison.signal (
              namespace text NOT NULL,
              name text NOT NULL,
              state bigint NOT NULL DEFAULT 0,
              posts bigint NOT NULL DEFAULT 0,
              PRIMARY KEY (namespace, name));
            CREATE TABLE IF NOT EXISTS liaison.defaults_domain (
              namespace text NOT NULL,
              domain text NOT NULL,
              generation bigint NOT NULL DEFAULT 0,
              PRIMARY KEY (namespace, domain));
            CREATE TABLE IF NOT EXISTS liaison.defaults_entry (
              namespace text NOT NULL,
              domain text NOT NULL,
              key text NOT NULL,
              kind smallint NOT NULL,
              value bytea NOT NULL,
              PRIMARY KEY (namespace, domain, key));
            -- Leases (pool_mode=transaction): a lock's exclusive lease, and its shared ones (holder
            -- to end, in milliseconds since 1970 by the server's clock); a claim's lease.
            IF NOT \(hasColumn("lock", "shared_leases")) THEN
              ALTER TABLE liaison.lock ADD COLUMN IF NOT EXISTS lease_holder uuid,
                ADD COLUMN IF NOT EXISTS lease_end timestamptz,
                ADD COLUMN IF NOT EXISTS shared_leases jsonb NOT NULL DEFAULT '{}';
            END IF;
            IF NOT \(hasColumn("presence", "lease_end")) THEN
              ALTER TABLE liaison.presence ADD COLUMN IF NOT EXISTS lease_holder uuid,
                ADD COLUMN IF NOT EXISTS lease_end timestamptz;
            END IF;
            \(MailboxSchema.tablesAndFunctions)
            COMMENT ON SCHEMA liaison IS '\(comment)';
          END $liaison$
          """)
      for attempt in 1...setUpAttempts {
        do {
          // No reply bound: building an index on a large table takes its time (a dead server is
          // still noticed within the detection bound).
          _ = try await connector.write(setup, doing: "create Liaison's tables in the schema 'liaison'", timeout: nil)
          return
        } catch {
          // The setup found, under its lock, a newer schema that another host set up meanwhile.
          if let refusal = error.cause as? PSQLError, refusal.serverInfo?[.sqlState] == newerSchemaState,
            let numbers = refusal.serverInfo?[.message]?.split(separator: " ").compactMap({ Int($0) }),
            numbers.count == 2
          {
            throw newer(version: numbers[0], usableFrom: numbers[1])
          }
          guard PostgresErrors.sqlState(error.cause) == PostgresErrors.lockNotAvailable else { throw error }
          guard attempt < setUpAttempts else {
            throw LiaisonError(
              .timedOut,
              "Could not set up Liaison's schema version \(version): another transaction held one of its tables "
                + "through \(setUpAttempts) tries of \(tableLockWait) each, and nothing was changed. Open the container "
                + "again once that transaction ends (pg_locks names it).", cause: error.cause)
          }
        }
      }
    }

    /// How long the setup waits for a table's lock, at most, before it changes nothing and is
    /// tried again.
    static let tableLockWait = Duration.seconds(1)
    /// How many times the setup is tried when a table's lock is busy.
    static let setUpAttempts = 10

    /// Whether the table `liaison.table` has the column `column`: SQL, for the setup.
    private static func hasColumn(_ table: String, _ column: String) -> String {
      """
      EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'liaison.\(table)'::regclass
        AND attname = '\(column)' AND NOT attisdropped)
      """
    }
  }
#endif
