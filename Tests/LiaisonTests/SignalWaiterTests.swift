import Foundation
import LiaisonTestSupport
import Testing

@testable import Liaison

/// The waiter that mailbox receivers keep: no post lost between a look and a wait, and every way
/// of ending a wait (cancellation before or during it, close before or during it).
@Suite("SignalWaiter")
struct SignalWaiterTests {
  let directory = TemporaryDirectory()

  @Test func aPostMadeBeforeTheWaitStartsIsRemembered() async throws {
    let signal = try SharedContainer(directory: directory.path).signal("ring")
    let waiter = try SignalWaiter(signal)
    try signal.post()  // between a look and the wait
    #expect(await ended(within: 10) { await waiter.wait() } == true)
  }

  @Test func aPostWhileWaitingWakesTheWait() async throws {
    let signal = try SharedContainer(directory: directory.path).signal("ring")
    let waiter = try SignalWaiter(signal)
    let waiting = Task { await waiter.wait() }
    // Not synchronisation: the test passes whether the wait is suspended yet or not (a ring left
    // by the signal's creation may end a first wait at once, so waiting for a suspended wait is
    // not certain either); the pause makes the waiting case the usual one.
    try await Task.sleep(for: .milliseconds(50))
    try signal.post()
    #expect(await ended(within: 10) { await waiting.value } == true)
  }

  @Test(arguments: [false, true])
  func cancellingEndsTheWaitWithFalse(waitingFirst: Bool) async throws {
    let waiter = try SignalWaiter(try SharedContainer(directory: directory.path).signal("ring"))
    let waiting = Task { await waiter.wait() }
    if waitingFirst { try await Task.sleep(for: .milliseconds(50)) }  // the waiting case is the usual one
    waiting.cancel()
    #expect(await ended(within: 10) { await waiting.value } == false)
  }

  @Test(arguments: [false, true])
  func closingEndsTheWaitWithFalseAndLaterWaitsAtOnce(waitingFirst: Bool) async throws {
    let waiter = try SignalWaiter(try SharedContainer(directory: directory.path).signal("ring"))
    let waiting = Task { await waiter.wait() }
    if waitingFirst { try await Task.sleep(for: .milliseconds(50)) }  // the waiting case is the usual one
    waiter.close()
    #expect(await ended(within: 10) { await waiting.value } == false)
    #expect(await ended(within: 10) { await waiter.wait() } == false)
  }
}

/// `body`'s result, or `nil` when it has not ended within `seconds` (a test that fails then fails
/// instead of hanging; `body` is left running).
private func ended<T: Sendable>(within seconds: Double, _ body: @escaping @Sendable () async -> T) async -> T? {
  await withCheckedContinuation { continuation in
    let finished = Locked(false)
    let finish: @Sendable (T?) -> Void = { value in
      let first = finished.withLock { finished in
        defer { finished = true }
        return !finished
      }
      if first { continuation.resume(returning: value) }
    }
    Task { finish(await body()) }
    Task {
      try? await Task.sleep(for: .seconds(seconds))
      finish(nil)
    }
  }
}
