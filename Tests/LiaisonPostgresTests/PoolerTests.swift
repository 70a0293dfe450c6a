#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// Liaison behind a real PgBouncer (Debian's), as a managed service's pooled endpoint is: in
  /// session mode every part works; in transaction or statement mode, where a lock would belong
  /// to whichever client gets the session next, opening the place fails at once and says what to
  /// do, so that nothing is ever shared.
  @Suite("PostgreSQL behind PgBouncer")
  struct PoolerTests {
    static let message: Comment = "needs PostgreSQL and PgBouncer (apt-get install postgresql pgbouncer)"
    static var mustRun: Bool { PostgresTestServer.mustRun && PgBouncerTestServer.mustRun }

    private var namespace: String { "pooled-\(UInt32.random(in: 0...UInt32.max))" }

    /// Through a pooler in transaction or statement mode, opening the place throws
    /// `invalidArgument`, naming the pooler and what to do (before any lock is asked for); the
    /// test's own server has no Liaison schema afterwards: nothing was set up through the pooler.
    @Test(.enabled(if: Self.mustRun, Self.message), arguments: [PgBouncerTestServer.PoolMode.transaction, .statement])
    func aPoolerThatSharesSessionsIsRefusedAtOnce(_ mode: PgBouncerTestServer.PoolMode) async throws {
      let server = try PostgresTestServer.start()
      defer { server.remove() }
      let bouncer = try PgBouncerTestServer.start(in: server, mode: mode)
      defer { bouncer.remove() }
      let error = await #expect(throws: LiaisonError.self) {
        try await PostgresContainer(url: bouncer.url, namespace: namespace)
      }
      #expect(error?.code == .invalidArgument)
      #expect(
        error?.message.contains("pooler in transaction or statement mode") == true, "\(String(describing: error))")
      #expect(error?.message.contains("Connect to the server directly") == true)
      #expect(try server.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'liaison'") == "0")
    }

    /// Through a pooler in session mode, every part works as on a direct connection (the one
    /// test body of the protocol family), although PgBouncer refuses the server settings Liaison
    /// sends to a server.
    @Test(.enabled(if: Self.mustRun, Self.message))
    func everyPartWorksThroughASessionPooler() async throws {
      let server = try PostgresTestServer.start()
      defer { server.remove() }
      let bouncer = try PgBouncerTestServer.start(in: server, mode: .session)
      defer { bouncer.remove() }
      let place = try await PostgresContainer(url: bouncer.url, namespace: namespace)
      try await OneAPITests().exercise(place)
      await place.close()
    }

    /// A pooler that restarts ends its clients' sessions: a lock held through it is reported
    /// lost (its connection closed), another container then takes it with a larger fencing
    /// token, through the pooler back up.
    @Test(.enabled(if: Self.mustRun, Self.message))
    func aPoolerRestartLosesTheLockAndItIsTakenAgain() async throws {
      let server = try PostgresTestServer.start()
      defer { server.remove() }
      let bouncer = try PgBouncerTestServer.start(in: server, mode: .session)
      defer { bouncer.remove() }
      let namespace = namespace
      let holderPlace = try await PostgresContainer(url: bouncer.url, namespace: namespace)
      let held = try await holderPlace.lock("job").lock()
      let firstToken = try await held.fencingToken()
      try bouncer.restart()
      let loss = try await held.waitForLoss()
      #expect(loss?.code == .lost, "\(String(describing: loss))")
      let otherPlace = try await PostgresContainer(url: bouncer.url, namespace: namespace)
      let taken = try await otherPlace.lock("job").lock(timeout: .seconds(30))
      #expect(try await taken.fencingToken() > firstToken)
      await taken.unlock()
      await holderPlace.close()
      await otherPlace.close()
    }
  }
#endif
