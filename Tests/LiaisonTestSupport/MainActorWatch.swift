import Dispatch

/// Whether a job queued on the main actor runs while `peer` holds `lock`, which a main-actor task
/// started before is waiting for: `false` when the main actor stays blocked for 20 s, after which
/// `peer` is told to release the lock (`unlock LOCK`), so that the test ends.
@MainActor public func mainActorRuns(while peer: Peer, holds lock: String) async -> Bool {
  let ran = DispatchSemaphore(value: 0)
  let watchdog = Task.detached { () -> Bool in
    // A bound for failure, not a synchronisation: a free main actor runs the job at once.
    guard ran.wait(timeout: .now() + 20) == .timedOut else { return true }
    _ = try? peer.send("unlock \(lock)")
    return false
  }
  await Task { @MainActor in _ = ran.signal() }.value
  return await watchdog.value
}
