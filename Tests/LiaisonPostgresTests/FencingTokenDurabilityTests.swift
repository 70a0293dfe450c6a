#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// What a fencing token survives: its grant's commit is synchronous whatever the server's
  /// default, so a token is on disk, and on the synchronous standbys the server names, before
  /// the grant returns; a crash or a failover to such a standby never gives it twice.
  @Suite("PostgreSQL: a fencing token's commit is synchronous")
  struct FencingTokenDurabilityTests {
    /// A server that names a synchronous standby (which never comes) in a database whose default
    /// is `synchronous_commit = local`: an ordinary write commits at once, as the default says,
    /// while an exclusive grant waits for the standby (`SyncRep` in `pg_stat_activity`) and
    /// returns its token once the server stops naming it. (On the old code the grant committed
    /// locally, and a failover could lose its token.)
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func anExclusiveGrantWaitsForTheSynchronousStandby() async throws {
      // On a thread of its own, so that the standby is named off again well within the reply
      // bound, however busy the cooperative pool is.
      let thread = OwnThreadExecutor()
      try await withTaskExecutorPreference(thread) { try await grantWaitsForTheStandby(thread) }
    }

    private func grantWaitsForTheStandby(_ thread: OwnThreadExecutor) async throws {
      let server = try PostgresTestServer.start()
      defer { server.remove() }
      try server.psql("ALTER SYSTEM SET synchronous_standby_names = 'standby'")
      try server.psql("ALTER DATABASE \(server.database) SET synchronous_commit = local")
      try server.psql("SELECT pg_reload_conf()")
      // The reload is a signal: sessions see the setting once the postmaster has read it.
      try await waitUntilOffThePool("a new session sees the synchronous standby's name", timeout: 60) {
        try server.psql("SHOW synchronous_standby_names") == "standby"
      }
      // A bound long enough that the wait for the standby is not taken for a dead server.
      let place = try await PostgresContainer(
        url: BackendPlace.url(server), namespace: "durable", configuration: .init(detectionBound: .seconds(120)))
      try await place.signal("ordinary").post(state: 1)
      let grant = Task(executorPreference: thread) { try await place.lock("job").tryLock() }
      // A bound for failure, long enough for a sanitizer's whole-suite run.
      try await waitUntilOffThePool("the grant's commit waits for the synchronous standby", timeout: 300) {
        try server.psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'") == "1"
      }
      try server.psql("ALTER SYSTEM RESET synchronous_standby_names")
      try server.psql("SELECT pg_reload_conf()")
      let held = try #require(try await grant.value)
      #expect(try await held.fencingToken() > 0)
      await held.unlock()
      await place.close()
    }

    /// A grant whose session is terminated while its commit waits for the synchronous standby:
    /// the server then sends the grant's `CommandComplete` (with a warning that the commit may not
    /// be on the standby) before the connection ends, and postgres-nio ends the statement there.
    /// The grant may return, but its token never reaches the caller: `fencingToken()` confirms
    /// the commit in the session first, and finds the lock lost. (Without that confirmation, the
    /// token of a commit that a failover would lose was returned.)
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aTokenWhoseCommitNeverReachedTheStandbyIsNeverGiven() async throws {
      let thread = OwnThreadExecutor()
      try await withTaskExecutorPreference(thread) { try await terminatedWhileWaiting(thread) }
    }

    private func terminatedWhileWaiting(_ thread: OwnThreadExecutor) async throws {
      let server = try PostgresTestServer.start()
      defer { server.remove() }
      let place = try await PostgresContainer(
        url: BackendPlace.url(server), namespace: "durable", configuration: .init(detectionBound: .seconds(120)))
      let lock = try place.lock("job")
      // The lock's row, registered first in this process: only the grant's commit waits for the
      // standby (a registration's `nextval` would too).
      if let shared = try await lock.tryLock(.shared) { await shared.unlock() }
      try server.psql("ALTER SYSTEM SET synchronous_standby_names = 'standby'")
      try server.psql("SELECT pg_reload_conf()")
      // The reload is a signal: once a new session sees the setting, the postmaster has read it
      // and signalled every session, so the idle one that takes the lock reads it before its next
      // statement.
      try await waitUntilOffThePool("a new session sees the synchronous standby's name", timeout: 60) {
        try server.psql("SHOW synchronous_standby_names") == "standby"
      }
      let grant = Task(executorPreference: thread) { try await lock.tryLock() }
      try await waitUntilOffThePool("the grant's commit waits for the synchronous standby", timeout: 300) {
        try server.psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'") == "1"
      }
      #expect(
        try server.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
          == "t")
      try server.psql("ALTER SYSTEM RESET synchronous_standby_names")
      try server.psql("SELECT pg_reload_conf()")
      // Committed on the primary only, as the server's warning said: a failover would lose it.
      #expect(try server.psql("SELECT fencing_token FROM liaison.lock WHERE name = 'job'") == "1")
      switch await grant.result {
      case .success(let held):
        let held = try #require(held)
        let error = await #expect(throws: LiaisonError.self) { try await held.fencingToken() }
        #expect(error?.code == .lost, "\(String(describing: error))")
        #expect(!held.isHeld)
      case .failure(let error):
        // The connection's end was seen first: the grant failed, which gives no token either.
        #expect((error as? LiaisonError)?.code == .unavailable, "\(error)")
      }
      // The next grant's token is larger.
      let next = try #require(try await lock.tryLock())
      #expect(try await next.fencingToken() == 2)
      await next.unlock()
      await place.close()
    }

    /// The token is confirmed once, by `fencingToken()` or by a later statement of the lock's
    /// session: asked for after the unlock (whose statement confirmed the grant's commit), it is
    /// the grant's; asked for again, the same.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func theTokenIsGivenAfterTheUnlockAndAgain() async throws {
      let server = try PostgresTestServer.shared.get()
      let place = try await PostgresContainer(
        url: BackendPlace.url(server), namespace: "token-\(UInt32.random(in: 0...UInt32.max))")
      let lock = try place.lock("job")
      let first = try #require(try await lock.tryLock())
      let token = try await first.fencingToken()
      #expect(try await first.fencingToken() == token)
      await first.unlock()
      #expect(try await first.fencingToken() == token)
      let second = try #require(try await lock.tryLock())
      await second.unlock()
      #expect(try await second.fencingToken() == token + 1)
      await place.close()
    }
  }
#endif
