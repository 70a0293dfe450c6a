#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// A write that returned survives a crash of the server whatever its `synchronous_commit`: on a
  /// server, database and role that commit asynchronously, the last commits are only in the
  /// server's memory when their statements return, and a crash loses them unless Liaison commits
  /// its own writes synchronously.
  @Suite("PostgreSQL: writes that returned survive a crash under synchronous_commit = off")
  struct AsynchronousCommitTests {
    struct Note: Codable, Sendable, Equatable {
      let text: String
    }

    /// Each kind of write is made last before the server's processes are killed at once, as a
    /// crash of its machine would end them: a send, an acknowledgement and a defaults write, each
    /// alone and with a timeout (in a transaction of Liaison's), and a defaults transaction. After
    /// the recovery, each is there. The log writer is made lazy (`wal_writer_delay` 10 s), so that
    /// an asynchronous commit stays in the server's memory until the crash, as it may under load:
    /// without Liaison's synchronous commits, every one of these writes was lost (the code before
    /// it lost each, every run). Each write is the last one: a later synchronous commit (a
    /// receiver's claim, say) would put the earlier ones on disk too.
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func everyWriteThatReturnedSurvivesACrash() async throws {
      // On a thread of its own: its blocking calls (psql, the server's start and stop, a child's
      // end) never hold a thread of the cooperative pool that the suites beside it need.
      try await withTaskExecutorPreference(OwnThreadExecutor()) {
        let server = try PostgresTestServer.start()
        defer { server.remove() }
        try server.psql("ALTER SYSTEM SET synchronous_commit = off")
        try server.psql("ALTER SYSTEM SET wal_writer_delay = '10s'")
        try server.psql("ALTER SYSTEM SET wal_writer_flush_after = '1GB'")
        try server.psql("ALTER ROLE liaison SET synchronous_commit = off")
        try server.psql("SELECT pg_reload_conf()")
        try await waitUntilOffThePool("a new session commits asynchronously", timeout: 60) {
          try server.psql("SHOW synchronous_commit") == "off" && server.psql("SHOW wal_writer_delay") == "10s"
        }
        /// Makes `write` the last write, crashes the server, starts it again and returns what
        /// `read` reads then.
        func crash<Read>(
          after write: (PostgresContainer) async throws -> Void, read: (PostgresContainer) async throws -> Read
        ) async throws -> Read {
          let writer = try await PostgresContainer(url: BackendPlace.url(server), namespace: "crash")
          try await write(writer)
          server.kill()
          try server.startAgain()
          await writer.close()
          let reader = try await PostgresContainer(url: BackendPlace.url(server), namespace: "crash")
          let result = try await read(reader)
          await reader.close()
          return result
        }
        let ids = { (place: PostgresContainer) in try await place.mailbox("inbox").peek().map(\.id) }
        let theme = DefaultsKey<String>("theme")
        let launches = DefaultsKey<Int>("launches")
        let lastSync = DefaultsKey<String>("lastSync")

        let sent = try await crash(
          after: { place in
            let inbox = try await place.mailbox("inbox")
            for index in 0..<3 { try await inbox.send(Note(text: "\(index)"), id: "m\(index)") }
          }, read: ids)
        #expect(sent == ["m0", "m1", "m2"], "sends")

        let sentWithATimeout = try await crash(
          after: { try await $0.mailbox("inbox").send(Note(text: "3"), id: "m3", timeout: .seconds(30)) }, read: ids)
        #expect(sentWithATimeout == ["m0", "m1", "m2", "m3"], "a send with a timeout")

        let acknowledged = try await crash(
          after: { place in
            let receiver = try await place.mailbox("inbox").receiver()
            try await receiver.acknowledge(receiver.receive(Note.self, limit: 2))
          }, read: ids)
        #expect(acknowledged == ["m2", "m3"], "an acknowledgement")

        let written = try await crash(
          after: { try await $0.defaults("settings").set("dark", for: theme) },
          read: { try await $0.defaults("settings").get(theme) })
        #expect(written == "dark", "a defaults write")

        let writtenWithATimeout = try await crash(
          after: { try await $0.defaults("settings").set(3, for: launches, timeout: .seconds(30)) },
          read: { try await $0.defaults("settings").get(launches) })
        #expect(writtenWithATimeout == 3, "a defaults write with a timeout")

        let inATransaction = try await crash(
          after: { place in
            try await place.defaults("settings").transaction { try await $0.set("2026-11-27", for: lastSync) }
          }, read: { try await $0.defaults("settings").get(lastSync) })
        #expect(inATransaction == "2026-11-27", "a defaults transaction")
      }
    }
  }
#endif
