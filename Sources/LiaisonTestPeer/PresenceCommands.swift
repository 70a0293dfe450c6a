// The peer's commands on presences: claims, leases, probes and watches.

import Dispatch
import Liaison
import LiaisonTestSupport

@MainActor private var claims: [String: PresenceClaim] = [:]
@MainActor private var leases: [String: PresenceLease] = [:]
/// The tasks that feed `presenceChanges` and `defaultsValues`, by what they watch.
@MainActor var watches: [String: Task<Void, Never>] = [:]
/// Presence changes received, with the monotonic ns at which each was received.
private let presenceChanges = Inbox<(change: PresenceChange, receivedAt: UInt64)>()

let presenceCommands: [PeerCommandHandler] = [
  PeerCommandHandler(.claim, "NAME [INFO…]  → ok claimed") { words in
    let info = words.count > 2 ? words[2...].joined(separator: " ") : nil
    claims[words[1]] = try container.presence(words[1]).claim(info: info)
    return "claimed"
  },
  PeerCommandHandler(.release, "NAME   ends a claim or a lease → ok released") { words in
    claims.removeValue(forKey: words[1])?.release()
    leases.removeValue(forKey: words[1])?.release()
    return "released"
  },
  PeerCommandHandler(.lease, "NAME MILLISECONDS [INFO…]  → ok leased") { words in
    let info = words.count > 3 ? words[3...].joined(separator: " ") : nil
    leases[words[1]] = try container.presence(words[1]).lease(for: .milliseconds(Int(words[2])!), info: info)
    return "leased"
  },
  PeerCommandHandler(.active, "NAME  → ok true | ok false") { words in
    String(try container.presence(words[1]).isActive)
  },
  PeerCommandHandler(.watchPresence, "NAME   starts observing presence changes → ok watching") { words in
    let changes = try container.presence(words[1]).changes()
    // Detached: a task started here would run on the main actor, whose thread waits in readLine.
    watches[words[1]] = Task.detached {
      do {
        for try await change in changes { presenceChanges.put((change, monotonicNanoseconds())) }
      } catch {}
    }
    return "watching"
  },
  PeerCommandHandler(
    .nextChange,
    """
    [MILLISECONDS]  → ok claimed PID WHEN | ok released WHEN | ok none (WHEN: monotonic ns at which \
    the change was received)
    """
  ) { words in
    guard let (change, receivedAt) = presenceChanges.take(milliseconds: waitMilliseconds(words)) else { return "none" }
    switch change {
    case .claimed(let holder): return "claimed \(holder.processID) \(receivedAt)"
    case .released: return "released \(receivedAt)"
    }
  },
  PeerCommandHandler(
    .lapseResidue,
    """
    NAME   a presence watch that saw a lease lapse (a one-shot deadline fired), then ended \
    → ok liaison-threads=N
    """
  ) { words in
    try lapseResidue(try container.presence(words[1]))
  },
]

/// Watches `presence` while a short lease on it lapses (the watch's expiry deadline, a one-shot,
/// fires), ends the watch, and reports how many of Liaison's threads are left.
private func lapseResidue(_ presence: Presence) throws -> String {
  let watching = DispatchSemaphore(value: 0)
  let sawRelease = DispatchSemaphore(value: 0)
  // The sequence lives in the task only, so that it is released when the task ends.
  let task = Task.detached {
    guard let changes = try? presence.changes() else { return }
    watching.signal()
    var claimed = false
    for try await change in changes {
      if case .claimed = change { claimed = true }
      if case .released = change, claimed { break }
    }
    sawRelease.signal()
  }
  watching.wait()
  let lease = try presence.lease(for: .milliseconds(30))
  // Stop renewing without releasing: suspend stops the heartbeat's renewals.
  container.suspend()
  _ = sawRelease.wait(timeout: .now() + 10)
  try container.resume()
  lease.release()
  task.cancel()
  blocking { _ = await task.result }
  return "liaison-threads=\(threadNames().filter { $0.hasPrefix("liaison-") }.count)"
}
