#if Postgres
  import Dispatch
  import Foundation
  import LiaisonTestSupport
  import Testing

  @testable import LiaisonPostgres

  /// The reply bound measures the server, not this process's scheduling: a process whose threads
  /// are all busy for a while (a loaded machine, a cooperative pool kept busy by other work) must
  /// not take an answer that came in time for a dead server, and close the connection that got
  /// it, losing every lock its session held.
  @Suite("PostgreSQL: a reply bound that a busy process does not break")
  struct ReplyBoundTests {
    /// A statement with a 2 s reply bound, from a task whose only thread is kept busy from the
    /// moment the statement is written until the bound has run out on the connection's event loop
    /// (a timer of the same length, set after the bound's there, has fired): the server answers
    /// within milliseconds, the task resumes after the bound. The answer counts: the statement
    /// returns its row, and its connection stays open. (With the bound kept by a timer task, the timer woke first and
    /// closed the connection that had answered.) The bound is generous for the server's sake: the
    /// suite runs beside every other under Thread Sanitizer on two cores, where a 100 ms bound
    /// once passed before the server answered `SELECT 7`.
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func anAnswerReadInTimeCountsHoweverLateItsTaskResumes() async throws {
      let server = try PostgresTestServer.shared.get()
      let container = try await PostgresContainer(
        url: BackendPlace.url(server), namespace: "reply-\(UInt32.random(in: 0...UInt32.max))")
      let connector = container.connector
      let connection = try await connector.take()
      let thread = OwnThreadExecutor()
      let rows = try await withTaskExecutorPreference(thread) {
        // Runs on the executor's thread once this task suspends on the statement below, whose
        // bound's timer is set by then: the event loop runs timers in the order of their deadlines.
        thread.keepBusy {
          let boundPassed = DispatchSemaphore(value: 0)
          connection.eventLoop.scheduleTask(in: .seconds(2)) { boundPassed.signal() }
          boundPassed.wait()
        }
        return try await Connector.run(
          "SELECT 7", on: connection, within: .seconds(2), logger: connector.quietLogger)
      }
      #expect(try rows.first?.decode(Int.self) == 7)
      #expect(!connection.isClosed, "a connection that answered within its bound was closed")
      connector.close(connection)
      await container.close()
    }
  }
#endif
