#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// What a server's own settings do to Liaison's statements, and how Liaison says so.
  @Suite("PostgreSQL: the server's settings")
  struct ServerSettingsTests {
    /// A role whose `statement_timeout` is shorter than a lock's wait: the server cancels the
    /// wait, and the error says that the server's setting did, and what to set (before, it said
    /// that the server was unavailable and to check that it runs).
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aStatementTimeoutOfTheServerIsNamed() async throws {
      // On a thread of its own: its blocking calls (psql, the server's start and stop, a child's
      // end) never hold a thread of the cooperative pool that the suites beside it need.
      try await withTaskExecutorPreference(OwnThreadExecutor()) {
        let server = try PostgresTestServer.start()
        defer { server.remove() }
        try server.psql("ALTER ROLE liaison SET statement_timeout = '300ms'")
        let holder = try await PostgresContainer(url: BackendPlace.url(server), namespace: "settings")
        let held = try #require(try await holder.lock("job").tryLock())
        let waiter = try await PostgresContainer(url: BackendPlace.url(server), namespace: "settings")
        let error = await #expect(throws: LiaisonError.self) {
          try await waiter.lock("job").lock(timeout: .seconds(60))
        }
        #expect(error?.code == .timedOut, "\(String(describing: error))")
        #expect(error?.message.contains("statement_timeout passed") == true, "\(String(describing: error))")
        #expect(error?.message.contains("ALTER ROLE") == true)
        await held.unlock()
        await waiter.close()
        await holder.close()
      }
    }
  }
#endif
