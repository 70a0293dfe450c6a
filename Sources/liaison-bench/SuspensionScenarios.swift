import Dispatch
import Foundation
import GRDB
import KernelLockTable
import Liaison
import LiaisonStore

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

  /// `suspend.reopening`: what closing the store's connections at `suspend()` costs, one whole
  /// round: `suspend()` (which closes the store's pool), `resume()`, and the first `set`, which
  /// opens the pool again, checks the store and prepares its statements. Against `defaults.set`
  /// with the pool open (the same write, without the round), and `grdb.suspension`: the round
  /// GRDB offers, which keeps its connections open (its suspension and resumption notifications
  /// around a write of a GRDB pool in WAL mode, whose connections stay open, locks included).
  static func reopening(_ container: SharedContainer) throws -> ScenarioResult {
    let defaults = try container.defaults("bench-reopen")
    let key = DefaultsKey<Int>("counter")
    try defaults.set(0, for: key)
    var configuration = Configuration()
    configuration.observesSuspensionNotifications = true
    let pool = try DatabasePool(path: container.directory + "/grdb-suspension.sqlite", configuration: configuration)
    try pool.write { db in try db.execute(sql: "CREATE TABLE IF NOT EXISTS entry (key TEXT PRIMARY KEY, value)") }
    var value = 0
    func next() -> Int {
      value += 1
      return value
    }
    let samples = try interleave(
      samples: 60,
      [
        {
          let start = now()
          container.suspend()
          try container.resume()
          try defaults.set(next(), for: key)
          return Double(now() - start)
        },
        {
          let start = now()
          try defaults.set(next(), for: key)
          return Double(now() - start)
        },
        {
          let start = now()
          NotificationCenter.default.post(name: Database.suspendNotification, object: nil)
          NotificationCenter.default.post(name: Database.resumeNotification, object: nil)
          try pool.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO entry VALUES ('counter', ?)", arguments: [next()])
          }
          return Double(now() - start)
        },
      ])
    return ScenarioResult(
      measurement: Measurement("suspend.reopening", samples[0]), unit: "ns",
      baselines: [Measurement("defaults.set.open", samples[1]), Measurement("grdb.suspension", samples[2])],
      target: "well under a frame (16 ms): a suspension is a move to the background, not a hot path")
  }

  /// Waits until a thread of this process waits in the kernel for a lock. Where there is no
  /// kernel lock table to read (macOS), waits a millisecond.
  private static func waitForKernelWait() {
    let pid = getpid()
    while (try? KernelLocks.hasBlockedWaiter(pid: pid)) == false { sched_yield() }
    if (try? KernelLocks.lines()) == nil { usleep(1_000) }
  }

}
