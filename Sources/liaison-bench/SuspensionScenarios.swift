import Dispatch
import Foundation
import KernelLockTable
import Liaison

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

enum SuspensionScenarios {
  /// `suspend.interrupting`: `suspend()` while a post waits in the kernel for a signal's lock that
  /// another holder keeps (an open file description of its own, as another process's would be),
  /// until it returns, the post interrupted; against `suspend.idle`, `suspend()` with nothing in
  /// flight. The bound the *Apple Platforms* article gives: suspend() waits for this process's
  /// own operations, never for the other holder.
  static func interrupting(_ container: SharedContainer) throws -> ScenarioResult {
    let signal = try container.signal("bench-suspend")
    let path = container.directory + "/.liaison/signals/bench-suspend"
    let holder = open(path, O_RDWR | O_CLOEXEC)
    precondition(holder >= 0 && flock(holder, LOCK_EX) == 0, "cannot hold \(path)")
    defer { close(holder) }
    let samples = try interleave(
      samples: 50,
      [
        {
          let ended = DispatchSemaphore(value: 0)
          Thread.detachNewThread {
            _ = try? signal.post()  // waits for `holder`, until suspend() interrupts it
            ended.signal()
          }
          waitForKernelWait()
          let start = now()
          container.suspend()
          let took = Double(now() - start)
          ended.wait()
          try container.resume()
          return took
        },
        {
          let start = now()
          container.suspend()
          let took = Double(now() - start)
          try container.resume()
          return took
        },
      ])
    return ScenarioResult(
      measurement: Measurement("suspend.interrupting", samples[0]), unit: "ns",
      baselines: [Measurement("suspend.idle", samples[1])],
      target: "returns within milliseconds, whatever the other holder does")
  }

  /// Waits until a thread of this process waits in the kernel for a lock. Where there is no
  /// kernel lock table to read (macOS), waits a millisecond.
  private static func waitForKernelWait() {
    let pid = getpid()
    while (try? KernelLocks.hasBlockedWaiter(pid: pid)) == false { sched_yield() }
    if (try? KernelLocks.lines()) == nil { usleep(1_000) }
  }

}
