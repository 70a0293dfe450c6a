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
      // A bound long enough that the wait for the standby is not taken for a dead server.
      let place = try await PostgresContainer(
        url: BackendPlace.url(server), namespace: "durable", detectionBound: .seconds(120))
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
  }
#endif
