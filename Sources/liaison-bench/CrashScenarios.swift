import Dispatch
import Foundation
import KernelLockTable
import Liaison

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What a crash hands on: a holder killed with SIGKILL, and how soon the process waiting for what
/// it held goes on. The tests check that the waiter goes on because of the death (asleep in the
/// kernel before it, holding after it); these scenarios time it, each against a floor.
enum CrashScenarios {
  /// `lock.handoff.kill`: a holder in another process killed with SIGKILL → a thread here, asleep
  /// in `lock()`, holds the lock; against `floor.flock-kill-handoff`, the same with a bare `flock`.
  /// A sample is one holder process: it takes the lock, the waiter here blocks (seen in the kernel's
  /// lock table), then the holder is killed.
  static func lockHandoff(_ container: SharedContainer) throws -> ScenarioResult {
    let lock = try container.lock("bench-kill-handoff")
    let floorPath = container.directory + "/floor-kill-handoff"
    let samples = try interleave(
      samples: 60,
      [
        {
          try killedHolderHandsOver(role: "lock-keeper", [container.directory, "bench-kill-handoff"]) {
            let held = try lock.lock()
            defer { held.unlock() }
            return now()
          }
        },
        {
          try killedHolderHandsOver(role: "flock-keeper", [floorPath]) {
            let fd = open(floorPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            precondition(fd >= 0 && flock(fd, LOCK_EX) == 0, "cannot lock \(floorPath)")
            let acquiredAt = now()
            close(fd)
            return acquiredAt
          }
        },
      ])
    return ScenarioResult(
      measurement: Measurement("lock.handoff.kill", samples[0]), unit: "ns",
      baselines: [Measurement("floor.flock-kill-handoff", samples[1])],
      target: "(informational: the tests require the handoff, not its time; was < 100 ms in ProcessLockTests)")
  }

  /// Starts `role`, waits for its hold, runs `waitForLock` on a thread of its own, kills the holder
  /// once that thread is asleep in the kernel, and returns the nanoseconds from the kill to the
  /// time `waitForLock` returns.
  private static func killedHolderHandsOver(
    role: String, _ arguments: [String], _ waitForLock: @escaping @Sendable () throws -> UInt64
  ) throws -> Double {
    let holder = try BenchPeer(role, arguments)
    let acquired = Locked<Result<UInt64, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      let result = Result { try waitForLock() }
      acquired.withLock { $0 = result }
      done.signal()
    }
    waitForBlockedWaiters()
    let (killedAt, endedByItself) = holder.kill()
    if let endedByItself { throw BenchError(endedByItself) }
    done.wait()
    let acquiredAt = try acquired.withLock { $0! }.get()
    return Double(Int64(bitPattern: acquiredAt &- killedAt))
  }

  /// `presence.release.kill`: a claimant in another process killed with SIGKILL → the `changes()`
  /// of an observer here yield `released`; against `lock.handoff.kill`'s floor measured in the
  /// same run, `floor.flock-kill-handoff` (a claim's end is seen by its lock's release).
  static func presenceRelease(_ container: SharedContainer) throws -> ScenarioResult {
    let floorPath = container.directory + "/floor-kill-release"
    let samples = try interleave(
      samples: 60,
      [
        {
          let name = "bench-kill-release"
          nonisolated(unsafe) let claimant = try BenchPeer("claimer", [container.directory, name])
          let seen = try blocking { () async throws -> UInt64 in
            var changes = try container.presence(name).changes().makeAsyncIterator()
            guard case .claimed = try await changes.next() else { throw BenchError("the claim was not seen") }
            let (killedAt, endedByItself) = claimant.kill()
            if let endedByItself { throw BenchError(endedByItself) }
            guard case .released = try await changes.next() else { throw BenchError("the release was not seen") }
            return now() &- killedAt
          }
          return Double(seen)
        },
        {
          try killedHolderHandsOver(role: "flock-keeper", [floorPath]) {
            let fd = open(floorPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            precondition(fd >= 0 && flock(fd, LOCK_EX) == 0, "cannot lock \(floorPath)")
            let acquiredAt = now()
            close(fd)
            return acquiredAt
          }
        },
      ])
    return ScenarioResult(
      measurement: Measurement("presence.release.kill", samples[0]), unit: "ns",
      baselines: [Measurement("floor.flock-kill-handoff", samples[1])],
      target: "(informational: the tests require the release to be seen, not its time; was < 100 ms in SignalTests)")
  }

  /// The lock keeper peer: takes the lock, answers `r`, and holds it until it is killed.
  static func keepLock(container: String, name: String, input: CInt, output: CInt) throws -> Never {
    let held = try SharedContainer(directory: container, createIfMissing: true).lock(name).lock()
    writeBytes(output, [UInt8(ascii: "r")])
    _ = readBytes(input, 1)  // ends the process when the input closes
    held.unlock()
    fatalError("unreachable")
  }

  /// The floor's keeper: an exclusive `flock` on `path`, then `r`, held until it is killed.
  static func keepFlock(path: String, input: CInt, output: CInt) -> Never {
    let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    precondition(fd >= 0 && flock(fd, LOCK_EX) == 0, "cannot lock \(path)")
    serveUntilInputCloses(input: input, output: output)
  }
}
