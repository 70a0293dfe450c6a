#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  #if canImport(Glibc)
    import Glibc
  #elseif canImport(Darwin)
    import Darwin
  #endif

  /// What a server restart, a lost refresh lock and rows written by another program do to shared
  /// defaults on PostgreSQL. Each test that stops the server has a server of its own.
  @Suite("PostgreSQL: shared defaults through restarts and lost locks")
  struct DefaultsFailureTests {
    /// An observer whose listening connection was gone while another process wrote (the observer
    /// was paused with SIGSTOP across a server restart, so the notification cannot have reached
    /// it) still gets the change once it reconnects, and its `get` returns it, not the value its
    /// cache held.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func anObserverGetsTheChangesCommittedWhileItsListenerWasDown() throws {
      let server = try PostgresTestServer.start()
      let place = try BackendPlace(.postgres, server: server)
      let observer = try place.peer()
      let writer = try place.peer()
      try writer.send(.placeDset, "settings", "n", "1")
      try observer.send(.placeDwatch, "settings", "n")
      #expect(try observer.send(.placeDnext) == "1")
      try observer.send(.placeDobserve, "settings")
      #expect(try observer.send(.placeDget, "settings", "n") == "1")  // cached
      observer.child.kill(SIGSTOP)
      try server.restart()
      let late = try place.peer()  // the writer's connections ended with the restart
      try late.send(.placeDset, "settings", "n", "2")
      observer.child.kill(SIGCONT)
      #expect(try observer.send(.placeDnext) == "2")
      #expect(try observer.send(.placeDnextnotification) != "none")
      #expect(try observer.send(.placeDget, "settings", "n") == "2")
    }

    /// While the server is stopped, a `set` and a `get` throw `unavailable` well within the
    /// detection bound; once it is back, a `get` returns what another process committed after
    /// the restart, whether or not the listening connection has come back yet (until it has, the
    /// cache is not used).
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func duringAnOutageWritesFailAtOnceAndAfterItGetsReturnCommittedValues() throws {
      let server = try PostgresTestServer.start()
      let place = try BackendPlace(.postgres, server: server)
      let reader = try place.peer()
      try reader.send(.placeDset, "settings", "n", "1")
      #expect(try reader.send(.placeDget, "settings", "n") == "1")  // cached
      try server.stop()
      let set = try reader.ask(.placeDset, "settings", "n", "5")
      let get = try reader.ask(.placeDget, "settings", "n")
      #expect(set.hasPrefix("error unavailable:"), "\(set)")
      #expect(get.hasPrefix("error unavailable:"), "\(get)")
      try server.startAgain()
      let writer = try place.peer()
      try writer.send(.placeDset, "settings", "n", "3")
      #expect(try reader.send(.placeDget, "settings", "n") == "3")
    }

    /// A refresher whose lock is lost in the middle of its refresh (its session terminated, as a
    /// cut network would end it) cannot store its value: another process refreshes and stores,
    /// and the first one's store, attempted afterwards, fails and leaves the newer value.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aRefresherThatLostItsLockCannotOverwriteANewerValue() throws {
      let server = try PostgresTestServer.start()
      let place = try BackendPlace(.postgres, server: server)
      let folder = TemporaryDirectory()
      let countFile = folder.path + "/refreshes"
      let first = try place.peer()
      try first.send(.placeDsetstring, "auth", "token", "stale")
      first.start(.placeDrefresh, "auth", "token", countFile, "pause-first")
      try waitUntil("the first refresh has started") { FileManager.default.fileExists(atPath: countFile + ".started") }
      let terminated = try server.psql(
        """
        SELECT count(pg_terminate_backend(pid)) FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND classid = \(0x4C49_4C4B)::oid
        """)
      #expect(terminated.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
      let second = try place.peer()
      #expect(try second.send(.placeDrefresh, "auth", "token", countFile) == "fresh-from-\(second.pid)")
      #expect(FileManager.default.createFile(atPath: countFile + ".go", contents: nil))
      let answer = try first.child.readLine(timeout: 60)
      #expect(answer.hasPrefix("error lost:") || answer.hasPrefix("error unavailable:"), "\(answer)")
      let reader = try place.peer()
      #expect(try reader.send(.placeDgetstring, "auth", "token") == "fresh-from-\(second.pid)")
    }

    /// Rows that another program wrote (a kind Liaison never writes, a generation below zero)
    /// are `corruptFile` errors that name the key or domain, never crashes; the other keys of the
    /// domain still read.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func rowsWrittenByAnotherProgramAreCorruptErrorsNotCrashes() async throws {
      let place = try BackendPlace(.postgres)
      let peer = try place.peer()
      try peer.send(.placeDset, "hostile", "good", "1")
      try place.server!.psql(
        """
        INSERT INTO liaison.defaults_entry (namespace, domain, key, kind, value)
        VALUES ('\(place.namespace)', 'hostile', 'odd', 9, '\\x00')
        """)
      let odd = try peer.ask(.placeDget, "hostile", "odd")
      #expect(odd.hasPrefix("error corrupt file:") && odd.contains("'odd'"), "\(odd)")
      #expect(try peer.send(.placeDget, "hostile", "good") == "1")
      let opened = try await PostgresContainer(url: BackendPlace.url(place.server!), namespace: place.namespace)
      let rows = try await opened.defaults("hostile").rowsReadOneByOne()
      #expect(rows.map(\.key) == ["good", "odd"])
      #expect(throws: LiaisonError.self) { try rows[1].value.get() }
      await #expect(throws: LiaisonError.self) { try await opened.defaults("hostile").snapshot() }
      try place.server!.psql(
        """
        UPDATE liaison.defaults_domain SET generation = -5
        WHERE namespace = '\(place.namespace)' AND domain = 'hostile'
        """)
      let fresh = try place.peer()
      let negative = try fresh.ask(.placeDget, "hostile", "good")
      #expect(negative.hasPrefix("error corrupt file:"), "\(negative)")
    }

    /// A refresher whose host is cut off in the middle of its refresh (a network namespace whose
    /// link drops every packet): a waiter on another host refreshes within the detection bound
    /// (10 s), and the cut-off refresher, once its network is back, cannot store its value over
    /// the newer one.
    @Test(.enabled(if: PostgresTestServer.mustRun && NetworkNamespace.mustRun, "needs PostgreSQL and root (ip netns)"))
    func aCutOffRefresherIsReplacedWithinTheBoundAndCannotOverwrite() throws {
      let network = try NetworkNamespace.create()
      let server = try PostgresTestServer.start(listenAddresses: ["127.0.0.1", network.hostAddress])
      let local = try BackendPlace(.postgres, server: server)
      let remote = try BackendPlace(.postgres, server: server, host: network.hostAddress, namespace: local.namespace)
      let folder = TemporaryDirectory()
      let countFile = folder.path + "/refreshes"
      let refresher = try remote.peer(launcher: network.command)
      try refresher.send(.placeDsetstring, "auth", "token", "stale")
      refresher.start(.placeDrefresh, "auth", "token", countFile, "pause-first")
      try waitUntil("the first refresh has started") { FileManager.default.fileExists(atPath: countFile + ".started") }
      let waiter = try local.peer()
      waiter.start(.placeDrefresh, "auth", "token", countFile)
      try waitUntil("the waiter waits for the refresh lock") {
        let count = try server.psql(
          "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = \(0x4C49_4C4B)::oid")
        return count.trimmingCharacters(in: .whitespacesAndNewlines) == "1"
      }
      try network.cut()
      let answer = try waiter.child.readLine(timeout: 60)
      #expect(answer == "ok fresh-from-\(waiter.pid)")
      try network.restore()
      #expect(FileManager.default.createFile(atPath: countFile + ".go", contents: nil))
      let verdict = try refresher.child.readLine(timeout: 60)
      #expect(verdict.hasPrefix("error lost:") || verdict.hasPrefix("error unavailable:"), "\(verdict)")
      #expect(try waiter.send(.placeDgetstring, "auth", "token") == "fresh-from-\(waiter.pid)")
      let reader = try local.peer()
      #expect(try reader.send(.placeDgetstring, "auth", "token") == "fresh-from-\(waiter.pid)")
    }
  }
#endif
