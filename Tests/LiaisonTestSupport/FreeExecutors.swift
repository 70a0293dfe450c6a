import Dispatch
import Foundation

/// Whether a job queued on the main actor runs while `peer` holds `lock`, which a main-actor task
/// started before is waiting for: `false` when the main actor stays blocked for 20 s, after which
/// `peer` is told to release the lock (`unlock LOCK`), so that the test ends.
@MainActor public func mainActorRuns(while peer: Peer, holds lock: String) async -> Bool {
  await runs(while: peer, holds: lock) { ran in await Task { @MainActor in _ = ran.signal() }.value }
}

/// How many threads of this process are called `name` (Linux: read from `/proc`).
public func threadsNamed(_ name: String) -> Int {
  let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
  return tasks.filter {
    (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?
      .trimmingCharacters(in: .whitespacesAndNewlines) == name
  }.count
}

/// ``waitUntil(_:timeout:_:)`` on a thread of its own, so that an `async` test does not block a
/// thread of the cooperative pool, which the tasks it waits for (and other tests) need.
public func waitUntilOffThePool(
  _ what: String, timeout: Double = 60, _ condition: @escaping @Sendable () throws -> Bool
) async throws {
  try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
    Thread {
      continuation.resume(with: Result { try waitUntil(what, timeout: timeout, condition) })
    }.start()
  }
}

private func runs(
  while peer: Peer, holds lock: String, _ job: @Sendable (DispatchSemaphore) async -> Void
) async -> Bool {
  let ran = DispatchSemaphore(value: 0)
  // The watchdog is a thread of its own: it must not need the executor it watches.
  let verdict = DispatchSemaphore(value: 0)
  let free = LockedFlag()
  DispatchQueue.global().async {
    // A bound for failure, not a synchronisation: a free executor runs the job at once.
    if ran.wait(timeout: .now() + 20) == .timedOut {
      _ = try? peer.send(.unlock, lock)
    } else {
      free.set()
    }
    verdict.signal()
  }
  await job(ran)
  await withCheckedContinuation { continuation in
    DispatchQueue.global().async {
      verdict.wait()
      continuation.resume()
    }
  }
  return free.value
}

private final class LockedFlag: @unchecked Sendable {
  private let queue = DispatchQueue(label: "LockedFlag")
  private var flag = false
  func set() { queue.sync { flag = true } }
  var value: Bool { queue.sync { flag } }
}

/// A task executor with a thread of its own (a serial queue), for an `async` test that measures
/// how long something takes: its jobs never wait behind the cooperative pool's, which the
/// synchronous tests running beside it may keep busy for a minute (they block their threads
/// waiting for peers). Use it with `withTaskExecutorPreference(OwnThreadExecutor()) { … }`; a
/// test may also keep its thread busy (``keepBusy(_:)``), as a loaded process's would be.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // TaskExecutor
public final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
  private let queue = DispatchQueue(label: "OwnThreadExecutor")

  public init() {}

  public func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    let executor = asUnownedTaskExecutor()
    queue.async { job.runSynchronously(on: executor) }
  }

  /// Keeps the thread busy with `work` (which blocks until a condition of the test's holds),
  /// after the jobs enqueued before: the jobs of the tasks that prefer it wait meanwhile, as they
  /// would behind other work on a loaded machine.
  public func keepBusy(_ work: @escaping @Sendable () -> Void) {
    queue.async(execute: work)
  }
}
