import LiaisonTestSupport
import Testing

@testable import Liaison

/// The blocking and `async` forms of a wait share one signature: in `async` code `lock()` is the
/// form that waits off the cooperative pool, and the blocking form takes a timeout too.
@Suite("ProcessLock's blocking and async forms")
struct LockWaitFormTests {
  let directory = TemporaryDirectory()

  @Test @MainActor func lockWithoutArgumentsInAsyncCodeLeavesTheMainActorFree() async throws {
    let lock = try SharedContainer(directory: directory.path).lock("token-refresh")
    let peer = try Peer(container: directory.path)
    try peer.send(.lock, "token-refresh")
    let waiter = Task { @MainActor in try await lock.lock() }
    #expect(await mainActorRuns(while: peer, holds: "token-refresh"))
    try peer.send(.unlock, "token-refresh")
    let held = try await waiter.value
    #expect(held.isHeld)
    held.unlock()
  }

  @Test func theBlockingFormTimesOut() throws {
    let lock = try SharedContainer(directory: directory.path).lock("token-refresh")
    let peer = try Peer(container: directory.path)
    try peer.send(.lock, "token-refresh")
    let error = #expect(throws: LiaisonError.self) { try lock.lock(timeout: .milliseconds(50)) }
    #expect(error?.code == .timedOut)
    try peer.send(.unlock, "token-refresh")
    let held = try lock.lock(timeout: .seconds(60))
    #expect(held.isHeld)
    #expect(throws: LiaisonError.self) { try lock.lock(timeout: .milliseconds(-1)) }
  }
}

@Suite("Durations")
struct DurationTests {
  @Test(arguments: [Duration.milliseconds(-1), .nanoseconds(-1), .seconds(-1), .milliseconds(-1500)])
  func aNegativeDurationClampsToZero(_ duration: Duration) {
    #expect(duration.clampedNanoseconds == 0)
  }

  @Test func aPositiveDurationIsItsNanoseconds() {
    #expect(Duration.milliseconds(1500).clampedNanoseconds == 1_500_000_000)
  }
}
