#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// A `PostgresContainer`'s explicit lifetime and configuration, and the write timeouts: across
  /// two containers (each with connections of its own), as two processes would be.
  @Suite("PostgreSQL: close(), write timeouts, configuration")
  struct PostgresLifetimeTests {
    private func open(
      _ namespace: String = "lifetime-\(UInt32.random(in: 0...UInt32.max))",
      encoder: @escaping @Sendable () -> JSONEncoder = { JSONEncoder() },
      decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) async throws -> PostgresContainer {
      let server = try PostgresTestServer.shared.get()
      return try await PostgresContainer(
        url: BackendPlace.url(server), namespace: namespace, configuration: .init(encoder: encoder, decoder: decoder))
    }

    /// A transaction in one container holds the domain's write lock (the row of its generation)
    /// until it is told to end; meanwhile the other container's writes with a timeout give up
    /// with `timedOut`, and once the holder commits, only its value is there: nothing of the
    /// timed-out writes was written. Covers the single-statement write (`set`), the transaction
    /// (`removeAll`), and a refresh's final write (its `timeout` bounds it too).
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aWriteWithATimeoutGivesUpWhileAnotherConnectionHoldsTheDomain() async throws {
      let holderPlace = try await open()
      let writerPlace = try await open(holderPlace.namespace.rawValue)
      let key = DefaultsKey<Int>("count")
      let (holding, holdingNow) = AsyncStream.makeStream(of: Void.self)
      let (release, releaseNow) = AsyncStream.makeStream(of: Void.self)
      let holderDefaults = try await holderPlace.defaults("shared")
      let writerDefaults = try await writerPlace.defaults("shared")
      try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
          try await holderDefaults.transaction { transaction in
            try await transaction.set(1, for: key)
            holdingNow.yield()  // the generation's row is locked from the transaction's start
            for await _ in release { break }
          }
        }
        for await _ in holding { break }
        await #expect {
          try await writerDefaults.set(2, for: key, timeout: .milliseconds(200))
        } throws: { ($0 as? LiaisonError)?.code == .timedOut }
        await #expect {
          try await writerDefaults.removeAll(timeout: .milliseconds(200))
        } throws: { ($0 as? LiaisonError)?.code == .timedOut }
        await #expect {
          try await writerDefaults.refresh(
            DefaultsKey<String>("token"), timeout: .milliseconds(200), isFresh: { _ in false }, using: { "fresh" })
        } throws: { ($0 as? LiaisonError)?.code == .timedOut }
        releaseNow.yield()
        try await group.waitForAll()
      }
      #expect(try await writerDefaults.get(key) == 1)
      #expect(try await writerDefaults.get(DefaultsKey<String>("token")) == nil)
      // Without the holder, the same write with a timeout goes through.
      try await writerDefaults.set(3, for: key, timeout: .milliseconds(200))
      #expect(try await writerDefaults.get(key) == 3)
      await holderPlace.close()
      await writerPlace.close()
    }

    /// `close()` ends the container's background work (the listener, the heartbeat of a held
    /// lock) and every connection, and waits for them: none is left once it returns. A held
    /// lock is lost and released on the server (another container takes it), and every later
    /// operation throws `closed`.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func closeEndsEveryBackgroundTaskAndConnectionAndLaterCallsThrowClosed() async throws {
      let place = try await open()
      let other = try await open(place.namespace.rawValue)
      let held = try await place.lock("job").lock()
      let ticks = try await place.signal("ticks").notifications()  // starts the listener
      _ = try await place.lock("dropped").tryLock()  // dropped at once: released in the background
      #expect(place.activity.backgroundTasks > 0)
      #expect(place.activity.connections > 0)
      await place.close()
      #expect(place.activity.backgroundTasks == 0)
      #expect(place.activity.connections == 0)
      #expect(held.loss?.code == .lost)
      for await _ in ticks { Issue.record("a notification after close()") }  // the sequence has ended
      #expect(try await other.lock("job").lock(timeout: .seconds(30)).isHeld)
      #expect(try await other.lock("dropped").lock(timeout: .seconds(30)).isHeld)
      await #expect { try await place.lock("job").tryLock() } throws: { ($0 as? LiaisonError)?.code == .closed }
      await #expect { try await place.defaults("d") } throws: { ($0 as? LiaisonError)?.code == .closed }
      await #expect { try await place.signal("ticks").post(state: 1) } throws: {
        ($0 as? LiaisonError)?.code == .closed
      }
      await place.close()  // again: nothing
      await other.close()
    }

    /// A child this process starts while a connection is open (here with `posix_spawn`, which
    /// passes on every descriptor not marked close-on-exec) does not inherit the connection's
    /// socket: once the container closes, its sessions end on the server, and another container
    /// takes the lock at once, while the child still runs. (NIO's own sockets are inheritable on
    /// Linux; a child holding one kept the session, and its lock, alive until it exited.)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aChildStartedWhileALockIsHeldInheritsNoConnection() async throws {
      let place = try await open()
      let other = try await open(place.namespace.rawValue)
      let held = try await place.lock("job").lock()
      var child: pid_t = 0
      let arguments = ["sleep", "300"]
      var argv = arguments.map { strdup($0) } + [nil]
      defer { for argument in argv { free(argument) } }
      try #require(posix_spawn(&child, "/bin/sleep", nil, nil, &argv, environ) == 0)
      defer {
        kill(child, SIGKILL)
        var status: CInt = 0
        waitpid(child, &status, 0)
      }
      #if os(Linux)
        // The lock's socket, as the kernel names it ("socket:[inode]"), is not among the child's
        // descriptors (other tests of this process may have sockets of their own).
        let socket = try #require(held.sessionSocket)
        let name = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(socket)")
        let inherited = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child)/fd").compactMap {
          try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(child)/fd/\($0)")
        }
        #expect(name.hasPrefix("socket:"))
        #expect(!inherited.contains(name))
      #endif
      await place.close()
      #expect(held.loss?.code == .lost)
      // The server ends the holder's session as soon as it reads the socket's end, not when the
      // child exits (in 300 s): the wait is bounded well below that, and its failure is a timeout.
      let taken = try await other.lock("job").lock(timeout: .seconds(60))
      #expect(kill(child, 0) == 0)  // the child still runs
      await taken.unlock()
      await other.close()
    }

    /// `defaults(_:)` returns the container's one handle of a domain, so that its cache and its
    /// subscription are shared, as the docs say.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func everyCallForADomainReturnsTheSameHandle() async throws {
      let place = try await open()
      let first = try await place.defaults("settings")
      #expect(try await place.defaults("settings") === first)
      #expect(try await place.defaults("other") !== first)
      await place.close()
    }

    /// A cancelled `waitForLoss()` throws `cancelled`, not `nil` (which means released), and the
    /// lock stays held.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aCancelledWaitForLossThrowsCancelledAndTheLockStaysHeld() async throws {
      let place = try await open()
      let held = try await place.lock("job").lock()
      let wait = Task { try await held.waitForLoss() }
      wait.cancel()
      await #expect { try await wait.value } throws: { ($0 as? LiaisonError)?.code == .cancelled }
      #expect(held.isHeld)
      await held.unlock()
      #expect(try await held.waitForLoss() == nil)
      await place.close()
    }
  }
#endif
