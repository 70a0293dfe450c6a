import Foundation
import LiaisonTestSupport
import Testing

@testable import Liaison

/// Fencing tokens and lost holds on the local backend.
@Suite("Fencing tokens and lost locks (local)")
struct FencingTokenTests {
  let directory = TemporaryDirectory()

  /// Each exclusive grant that reads its token gets a larger one than every earlier grant's, in
  /// whichever process; reading it twice gives the same number; a grant that never reads one
  /// leaves the counter as it is.
  @Test func tokensGrowAcrossProcessesAndOnlyWhenRead() throws {
    let lock = try SharedContainer(directory: directory.path).lock("report")
    let peer = try Peer(container: directory.path)
    var tokens: [UInt64] = []
    for round in 0..<3 {
      let held = try lock.lock(timeout: .seconds(60))
      tokens.append(try held.fencingToken())
      #expect(try held.fencingToken() == tokens.last)
      held.unlock()
      _ = try lock.lock(timeout: .seconds(60))  // unread: no token used (released at once)
      try #require(try peer.send(.lock, "report") == "locked")
      tokens.append(try #require(UInt64(try peer.send(.token, "report")), "round \(round)"))
      try peer.send(.unlock, "report")
    }
    #expect(tokens == Array(1...6))
  }

  @Test func aSharedHoldHasNoTokenAndAnUnlockedOneCannotReadOne() throws {
    let lock = try SharedContainer(directory: directory.path).lock("report")
    let shared = try #require(try lock.tryLock(.shared))
    let error = #expect(throws: LiaisonError.self) { try shared.fencingToken() }
    #expect(error?.code == .invalidArgument)
    shared.unlock()
    let held = try #require(try lock.tryLock())
    held.unlock()
    #expect(throws: LiaisonError.self) { try held.fencingToken() }
  }

  /// A counter file that is not a token counter is a clear error, not a token that restarts.
  @Test func aDamagedCounterIsAClearError() throws {
    let container = try SharedContainer(directory: directory.path)
    let lock = try container.lock("report")
    let first = try #require(try lock.tryLock())
    #expect(try first.fencingToken() == 1)
    first.unlock()
    let counter = directory.path + "/.liaison/locks/.fencing-tokens/report"
    try Data("not a number\n".utf8).write(to: URL(fileURLWithPath: counter))
    let held = try #require(try lock.tryLock())
    let error = #expect(throws: LiaisonError.self) { try held.fencingToken() }
    #expect(error?.code == .corruptFile)
    #expect(error?.path == counter)
  }

  /// The lock's file is another tool's to write (`flock(1)` puts `pid=…` in it): its content never
  /// stops a token, and is left as it is.
  @Test func whatAnotherToolWritesInTheLockFileIsIgnored() throws {
    let container = try SharedContainer(directory: directory.path)
    let lock = try container.lock("report")
    try Data("pid=4242\n".utf8).write(to: URL(fileURLWithPath: lock.path))
    for expected: UInt64 in 1...3 {
      let held = try #require(try lock.tryLock())
      #expect(try held.fencingToken() == expected)
      held.unlock()
    }
    #expect(try Data(contentsOf: URL(fileURLWithPath: lock.path)) == Data("pid=4242\n".utf8))
  }

  /// A lock file of an earlier version holds its counter: the first token read after the upgrade
  /// is larger, and the counter lives in its own file from then on.
  @Test func aCounterLeftInTheLockFileIsCountedFrom() throws {
    let container = try SharedContainer(directory: directory.path)
    let lock = try container.lock("report")
    try Data("41\n".utf8).write(to: URL(fileURLWithPath: lock.path))
    let first = try #require(try lock.tryLock())
    #expect(try first.fencingToken() == 42)
    first.unlock()
    try Data("7\n".utf8).write(to: URL(fileURLWithPath: lock.path))  // read once only
    let second = try #require(try lock.tryLock())
    #expect(try second.fencingToken() == 43)
  }

  /// `suspend()` takes held locks and claims away: their holders learn it through `loss` and
  /// `waitForLoss()`, and the protocols' `withLock` cancels its body.
  @Test func suspendingLosesHoldsAndCancelsWithLock() async throws {
    let container = try SharedContainer(directory: directory.path)
    let held = try #require(try container.lock("a").tryLock())
    let claim = try container.presence("p").claim()
    let lossOfLock = Task { try await held.waitForLoss() }
    let lossOfClaim = Task { try await claim.waitForLoss() }
    let started = AsyncStream.makeStream(of: Void.self)
    let guarded = Task {
      try await withLockLosingOnSuspension(container.lock("b"), started: started.continuation)
    }
    var startedIterator = started.stream.makeAsyncIterator()
    await startedIterator.next()
    container.suspend()
    #expect(try await lossOfLock.value?.code == .lost)
    #expect(try await lossOfClaim.value?.code == .lost)
    #expect(held.loss?.code == .lost && !held.isHeld)
    let error = await #expect(throws: LiaisonError.self) { try await guarded.value }
    #expect(error?.code == .lost)
    try container.resume()
    #expect(claim.isHeld && claim.loss == nil)
    // A release is not a loss.
    let released = Task { try await claim.waitForLoss() }
    claim.release()
    #expect(try await released.value == nil)
  }
}

/// Generic code, as users write it against the protocols: the body waits until cancelled.
private func withLockLosingOnSuspension<Lock: CoordinationLock>(
  _ lock: Lock, started: AsyncStream<Void>.Continuation
) async throws {
  try await lock.withLock(.exclusive, timeout: nil) {
    started.yield()
    try? await Task.sleep(for: .seconds(3600))  // ends when cancelled
  }
}
