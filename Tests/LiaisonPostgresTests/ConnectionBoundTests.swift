#if Postgres
  import Foundation
  import Liaison
  import LiaisonTestSupport
  import NIOPosix
  import Testing

  @testable import LiaisonPostgres

  /// How many connections a process opens: tasks waiting for one lock share the wait on the server
  /// (``WaitingTurns``), so that a crowd of waiters neither exhausts the server's
  /// `max_connections` nor slows the hand-over.
  @Suite("PostgreSQL: connections stay bounded while many tasks wait")
  struct ConnectionBoundTests {
    /// 200 tasks of one process wait for a lock that another container holds. While they wait,
    /// the process has at most two connections open (the one waiting on the server, and one idle
    /// one kept for short statements); once the holder lets go, every one of them holds it, one at
    /// a time. (On the old code, each waiter opened a connection of its own: 200, the test
    /// server's `max_connections`.) How soon the first waiter holds it is a latency, not a unit
    /// test's claim: a wall-clock bound here failed on a loaded machine, and proved nothing on an
    /// idle one.
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func twoHundredWaitersOnOneLockShareOneConnection() async throws {
      // On a thread of its own: 200 waiting tasks do not wait behind the cooperative pool's work.
      try await withTaskExecutorPreference(OwnThreadExecutor()) { try await twoHundredWaiters() }
    }

    private func twoHundredWaiters() async throws {
      let server = try PostgresTestServer.shared.get()
      let namespace = "bound-\(UInt32.random(in: 0...UInt32.max))"
      let holderPlace = try await PostgresContainer(url: BackendPlace.url(server), namespace: namespace)
      let waiterPlace = try await PostgresContainer(
        url: BackendPlace.url(server), namespace: namespace, configuration: .init(maximumIdleConnections: 1))
      let name = try LiaisonName("busy")
      let held = try await holderPlace.lock("busy").lock()
      let waiters = 200
      let inside = Locked(0)
      let mostConnections = Locked(0)
      try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<waiters {
          group.addTask {
            let guarded = try await waiterPlace.lock("busy").lock(timeout: .seconds(120))
            let overlapping = inside.withLock { inside -> Bool in
              inside += 1
              return inside > 1
            }
            #expect(!overlapping, "two tasks held the lock at once")
            mostConnections.withLock { $0 = max($0, waiterPlace.connector.openCount) }
            inside.withLock { $0 -= 1 }
            await guarded.unlock()
          }
        }
        try await waitUntilOffThePool("every task but one waits for its turn in the process") {
          waiterPlace.lockTurns.waitingCount(name) == waiters - 1
        }
        // One waits on the server: its lock request shows there.
        try await waitUntilOffThePool("one task waits for the lock on the server") {
          // This test's lock alone: the suites beside it wait for locks of their own on this server.
          try server.psql(
            """
            SELECT count(*) FROM pg_locks l JOIN liaison.lock k ON l.objid = k.id::oid
            WHERE l.locktype = 'advisory' AND NOT l.granted AND k.namespace = '\(namespace)'
            """) != "0"
        }
        mostConnections.withLock { $0 = max($0, waiterPlace.connector.openCount) }
        await held.unlock()
        try await group.waitForAll()
      }
      #expect(mostConnections.withLock { $0 } <= 2, "the waiting process had \(mostConnections.withLock { $0 }) open")
      await holderPlace.close()
      await waiterPlace.close()
    }

    /// A container runs its connections on the event loops it is given (the application's own
    /// group here), and every part works there.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func theConnectionsRunOnTheEventLoopsTheContainerIsGiven() async throws {
      let server = try PostgresTestServer.shared.get()
      let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
      let loop = group.next()
      let place = try await PostgresContainer(
        url: BackendPlace.url(server), namespace: "loops-\(UInt32.random(in: 0...UInt32.max))",
        configuration: .init(eventLoopGroup: group))
      let connection = try await place.connector.take()
      #expect(connection.eventLoop === loop)
      place.connector.giveBack(connection)
      try await OneAPITests().exercise(place)
      await place.close()
      try await group.shutdownGracefully()
    }
  }
#endif
