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
    let (waiting, returned) = startWaiting(waiter)
    // A ring left by the signal's creation may end a first wait at once: suspended, or ended.
    try await waitUntilAsync("the wait is suspended, or has ended") { waiter.waitingCount == 1 || returned.value }
    try signal.post()
    #expect(await ended(within: 10) { await waiting.value } == true)
  }

  @Test(arguments: [false, true])
  func cancellingEndsTheWaitWithFalse(waitingFirst: Bool) async throws {
    let waiter = try SignalWaiter(try SharedContainer(directory: directory.path).signal("ring"))
    let (waiting, returned) = startWaiting(waiter)
    if waitingFirst {
      try await waitUntilAsync("the wait is suspended, or has ended") { waiter.waitingCount == 1 || returned.value }
    }
    waiting.cancel()
    #expect(await ended(within: 10) { await waiting.value } == false)
  }

  @Test(arguments: [false, true])
  func closingEndsTheWaitWithFalseAndLaterWaitsAtOnce(waitingFirst: Bool) async throws {
    let waiter = try SignalWaiter(try SharedContainer(directory: directory.path).signal("ring"))
    let (waiting, returned) = startWaiting(waiter)
    if waitingFirst {
      try await waitUntilAsync("the wait is suspended, or has ended") { waiter.waitingCount == 1 || returned.value }
    }
    waiter.close()
    #expect(await ended(within: 10) { await waiting.value } == false)
    #expect(await ended(within: 10) { await waiter.wait() } == false)
  }
}

/// A task that waits on `waiter`, and a flag set once its wait has returned.
private func startWaiting(_ waiter: SignalWaiter) -> (Task<Bool, Never>, Locked<Bool>) {
  let returned = Locked(false)
  let waiting = Task {
    let posted = await waiter.wait()
    returned.withLock { $0 = true }
    return posted
  }
  return (waiting, returned)
}

extension Locked where Value == Bool {
  fileprivate var value: Bool { withLock { $0 } }
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
