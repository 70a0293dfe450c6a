import Foundation
import LiaisonTestSupport
import Testing

@testable import Liaison

@Suite("ProcessLock across processes")
struct ProcessLockTests {
  let directory = TemporaryDirectory()

  @Test(.enabled(if: readsProc, "reads /proc (Linux)"), arguments: ["sync", "async"])
  func aKilledHoldersLockGoesToAWaiterAsleepInTheKernel(_ form: String) throws {
    let holder = try Peer(container: directory.path)
    try #require(try holder.send(.lock, "token-refresh") == "locked")
    let waiter = try Peer(container: directory.path)
    waiter.start(.waitlock, "token-refresh", form)
    // The kernel lists a blocked flock waiter in /proc/locks with "->": wait for that state.
    try waitUntil("the waiter blocks on the lock") { try KernelLocks.hasBlockedWaiter(pid: waiter.pid) }
    let killedAt = monotonicNanoseconds()
    holder.kill()
    let answer = try waiter.child.readLine()
    let takenAt = try #require(UInt64(answer.split(separator: " ").last ?? ""), "\(answer)")
    // Asleep in the kernel before the kill, holding after it: woken by the death (how soon is the
    // benchmark's lock.handoff.kill).
    #expect(takenAt > killedAt, "the waiter held the lock before its holder was killed")
  }

  /// A host program may handle Liaison's interrupt signal itself with `SA_RESTART` (the Go runtime
  /// handles SIGURG and every real-time signal so): a wait blocked in `flock` would then be
  /// restarted after each signal, and no timeout, cancellation or `suspend()` could end it. The
  /// wait polls instead: it still times out, and still takes the lock once it is released.
  @Test func aHostHandlerWithSARestartForTheInterruptSignalNeitherHangsNorLosesTheLock() throws {
    let holder = try Peer(container: directory.path)
    try #require(try holder.send(.lock, "contested") == "locked")
    let waiter = try Peer(container: directory.path)
    try #require(try waiter.send(.hostHandler) == "installed")
    #expect(try waiter.send(.timedlock, "contested", "200", timeout: 20) == "timedOut")
    waiter.start(.timedlock, "contested", "60000")
    try holder.send(.unlock, "contested")
    #expect(try waiter.child.readLine(timeout: 20) == "ok locked")
  }

  /// The tests above see a waiter asleep in the kernel through its line in the kernel's lock
  /// table; on a machine that holds many locks that line comes after the first 4 KiB of the table.
  @Test(.enabled(if: readsProc, "reads /proc (Linux)")) func aBlockedWaiterIsSeenAmongHundredsOfOtherLocks() throws {
    let holder = try Peer(container: directory.path)
    try #require(try holder.send(.lock, "token-refresh") == "locked")
    // The crowd is held by the peer, not by this process: Foundation's Process.run reads past a
    // buffer (AddressSanitizer reports it) when the process that spawns has hundreds of
    // descriptors open, and other tests spawn peers meanwhile.
    for index in 0..<300 { try #require(try holder.send(.lock, "other-\(index)") == "locked") }
    #expect(try KernelLocks.lines().reduce(0) { $0 + $1.utf8.count + 1 } > 300 * 40)
    let waiter = try Peer(container: directory.path)
    waiter.start(.waitlock, "token-refresh", "sync")
    try waitUntil("the waiter blocks on the lock") { try KernelLocks.hasBlockedWaiter(pid: waiter.pid) }
    holder.kill()
    let answer = try waiter.child.readLine()
    #expect(answer.hasPrefix("ok locked "), "\(answer)")
  }

  @Test func eightProcessesIncrementingUnderTheLockCountExactlyAndNeverOverlap() throws {
    let counter = directory.path + "/counter"
    let peers = try (0..<8).map { _ in try Peer(container: directory.path) }
    for (index, peer) in peers.enumerated() {
      peer.start(.increment, "counter", counter, "500", "\(directory.path)/log-\(index)")
    }
    for peer in peers {
      #expect(try peer.child.readLine(timeout: 300) == "ok done")
    }
    #expect(try String(contentsOfFile: counter, encoding: .utf8) == "4000")

    var intervals: [(enter: UInt64, exit: UInt64)] = []
    for index in peers.indices {
      let log = try String(contentsOfFile: "\(directory.path)/log-\(index)", encoding: .utf8)
      for line in log.split(separator: "\n") {
        let parts = line.split(separator: " ").compactMap { UInt64($0) }
        intervals.append((parts[0], parts[1]))
      }
    }
    #expect(intervals.count == 4000)
    intervals.sort { $0.enter < $1.enter }
    var overlaps = 0
    for (previous, next) in zip(intervals, intervals.dropFirst()) where next.enter < previous.exit {
      overlaps += 1
    }
    #expect(overlaps == 0)
  }

  @Test func sharedHoldersCoexistAndExclusiveExcludesThem() throws {
    let container = try SharedContainer(directory: directory.path)
    let lock = try container.lock("catalog")
    let reader = try Peer(container: directory.path)
    #expect(try reader.send(.lock, "catalog", "shared") == "locked")

    let mine = try #require(try lock.tryLock(.shared))
    #expect(try lock.tryLock(.exclusive) == nil)
    let secondReader = try Peer(container: directory.path)
    #expect(try secondReader.send(.trylock, "catalog", "shared") == "locked")
    #expect(try reader.send(.trylock, "other-lock") == "locked")
    #expect(try lock.probe() == (runsLinuxCode ? .shared : .unknown))  // Apple platforms: no lock table

    mine.unlock()
    try reader.send(.unlock, "catalog")
    try secondReader.send(.unlock, "catalog")
    let writer = try Peer(container: directory.path)
    #expect(try writer.send(.lock, "catalog") == "locked")
    #expect(try lock.tryLock(.shared) == nil)
    #expect(try lock.tryLock(.exclusive) == nil)
    #expect(try reader.send(.trylock, "catalog", "shared") == "busy")
    #expect(try lock.probe() == (runsLinuxCode ? .exclusive : .unknown))
    try writer.send(.unlock, "catalog")
    #expect(try lock.probe() == (runsLinuxCode ? .unlocked : .unknown))
  }

  @Test func twoAcquisitionsInOneProcessExcludeEachOther() throws {
    let container = try SharedContainer(directory: directory.path)
    let lock = try container.lock("same-process")
    let first = try #require(try lock.tryLock())
    #expect(try lock.tryLock() == nil)
    #expect(try container.lock("same-process").tryLock() == nil)
    first.unlock()
    #expect(!first.isHeld)
    #expect(try lock.tryLock() != nil)
  }

  @Test(.enabled(if: readsProc, "reads /proc (Linux)"))
  func timedOutAndCancelledWaitsThrowAndLeaveNoDescriptorOrThread() throws {
    let holder = try Peer(container: directory.path)
    try holder.send(.lock, "busy")
    let observer = try Peer(container: directory.path)
    let report = try observer.send(.residue, "busy").split(separator: " ").map(String.init)
    #expect(report[4] == "timedOut=timed-out")
    #expect(report[5] == "cancelled=cancelled")
    #expect(report[0] == report[2], "descriptors before \(report[0]), after \(report[2])")
    #expect(report[1] == report[3], "threads before \(report[1]), after \(report[3])")
  }

  @Test func waitsRefusedWhileSuspendedLeaveNothingRunning() throws {
    let holder = try Peer(container: directory.path)
    try holder.send(.lock, "busy")
    let peer = try Peer(container: directory.path)
    // 2,000 zero-timeout waits on a suspended container, then the CPU the peer uses while idle.
    let report = try peer.send(.suspendedWaits, "busy", "2000").split(separator: " ")
    #expect(report[0] == "suspended=2000")
    let idleCPU = try #require(Double(report[1].dropFirst("idle-cpu-ms=".count)))
    #expect(idleCPU < 100, "\(idleCPU) ms of CPU in 300 ms of idling")
  }

  @Test func concurrentListingsSeeEveryLock() throws {
    let container = try SharedContainer(directory: directory.path)
    for index in 0..<300 { _ = try container.lock("lock-\(index)").tryLock() }
    let counts = Locked<[Int]>([])
    DispatchQueue.concurrentPerform(iterations: 16) { _ in
      let count = (try? container.locks().count) ?? -1
      counts.withLock { $0.append(count) }
    }
    #expect(counts.withLock { $0 } == Array(repeating: 300, count: 16))
  }

  @Test func asyncTimeoutThrowsTimedOut() async throws {
    let container = try SharedContainer(directory: directory.path)
    let holder = try Peer(container: directory.path)
    try holder.send(.lock, "slow")
    await #expect {
      _ = try await container.lock("slow").lock(timeout: .milliseconds(20))
    } throws: { ($0 as? LiaisonError)?.code == .timedOut }
    await #expect {
      _ = try await container.lock("slow").lock(timeout: .seconds(-1))
    } throws: { ($0 as? LiaisonError)?.code == .invalidArgument }
  }

  @Test(.enabled(if: readsProc, "reads /proc (Linux)")) func suspendReleasesHeldLocksAndEndsWaits() throws {
    let container = try SharedContainer(directory: directory.path)
    let held = try #require(try container.lock("held-here").tryLock())
    let peer = try Peer(container: directory.path)
    try peer.send(.lock, "held-there")

    // The waiter has a thread of its own: a task could wait for a free thread of the
    // cooperative pool, which the suite's synchronous tests may all be using.
    let outcome = Locked<LiaisonError.Code?>(nil)
    let finished = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      do {
        _ = try container.lock("held-there").lock()
      } catch let error as LiaisonError {
        outcome.withLock { $0 = error.code }
      } catch {}
      finished.signal()
    }
    // Suspend once the wait is asleep in the kernel, so that the interruption itself is tested.
    try waitUntil("the waiter blocks on the lock") { try KernelLocks.hasBlockedWaiter(pid: getpid()) }
    container.suspend()
    #expect(container.isSuspended)
    #expect(finished.wait(timeout: .now() + 30) == .success)
    #expect(outcome.withLock { $0 } == .suspended)
    #expect(!held.isHeld)
    #expect(try peer.send(.trylock, "held-here") == "locked")
    #expect(throws: LiaisonError.self) { _ = try container.lock("free").tryLock() }

    try container.resume()
    #expect(try container.lock("free").tryLock() != nil)
  }
}
