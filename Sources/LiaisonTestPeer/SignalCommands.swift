// The peer's commands on signals: posts and observations.

import Dispatch
import Foundation
import Liaison

@MainActor private var observations: [String: SignalObservation] = [:]
/// Watches kept alive for as long as the peer runs (observe-many-times presence).
@MainActor private var keptWatches: [PresenceChanges] = []
/// Notifications received, oldest first, for `next`.
private let notifications = Inbox<SignalNotification>()

let signalCommands: [PeerCommandHandler] = [
  PeerCommandHandler(.post, "NAME [STATE]  → ok posted") { words in
    let signal = try container.signal(words[1])
    if words.count > 2 { try signal.post(state: UInt64(words[2])!) } else { try signal.post() }
    return "posted"
  },
  PeerCommandHandler(.burst, "NAME COUNT   posts states 1…COUNT → ok posted") { words in
    let signal = try container.signal(words[1])
    for state in 1...UInt64(words[2])! { try signal.post(state: state) }
    return "posted"
  },
  PeerCommandHandler(.observe, "NAME [ignore-own]   starts observing a signal → ok observing") { words in
    let ignoringOwn = words.count > 2 && words[2] == "ignore-own"
    observations[words[1]] = try container.signal(words[1]).observe(
      on: observerQueue, ignoringOwnPosts: ignoringOwn, notifications.put)
    return "observing"
  },
  PeerCommandHandler(.observeMany, "PREFIX COUNT   observes PREFIX-0…PREFIX-(COUNT-1) → ok observing") { words in
    for index in 0..<Int(words[2])! {
      let name = "\(words[1])-\(index)"
      observations[name] = try container.signal(name).observe(on: observerQueue, notifications.put)
    }
    return "observing"
  },
  PeerCommandHandler(
    .observeManyTimes,
    """
    signal|presence PREFIX NAMES OBSERVERS   observes the signals, or watches the presences' changes, \
    PREFIX-0…PREFIX-(NAMES-1), OBSERVERS times in all → ok DESCRIPTORS-BEFORE AFTER
    """
  ) { words in
    let names = (0..<Int(words[3])!).map { "\(words[2])-\($0)" }
    let signals = words[1] == "signal" ? try names.map { try container.signal($0) } : []
    let presences = words[1] == "presence" ? try names.map { try container.presence($0) } : []
    // The files exist, and each presence has its own descriptor for looks: not the watches'.
    for presence in presences {
      try presence.claim().release()
      _ = try presence.isActive
    }
    let before = counts().0
    for index in 0..<Int(words[4])! {
      if signals.isEmpty {
        keptWatches.append(try presences[index % presences.count].changes())
      } else {
        observations["\(words[2])#\(index)"] = try signals[index % signals.count].observe(
          on: observerQueue, notifications.put)
      }
    }
    return "\(before) \(counts().0)"
  },
  PeerCommandHandler(.unobserve, "NAME  → ok unobserved") { words in
    observations.removeValue(forKey: words[1])?.cancel()
    return "unobserved"
  },
  PeerCommandHandler(
    .next, "[MILLISECONDS]   the next notification received, oldest first → ok NAME STATE SEQUENCE | ok none"
  ) { words in
    guard let note = notifications.take(milliseconds: waitMilliseconds(words)) else { return "none" }
    return "\(note.name) \(note.state) \(note.sequence)"
  },
  PeerCommandHandler(
    .signalResidue,
    """
    NAME   an async sequence and a callback observation started and ended, with descriptor and \
    thread counts, and Liaison's threads left → ok FDS THREADS FDS THREADS liaison-threads=N
    """
  ) { words in
    signalResidue(try container.signal(words[1]))
  },
]

/// Starts and ends an async sequence (by cancelling its task while it waits) and a callback
/// observation on `signal`, and reports the descriptor and thread counts before and after.
private func signalResidue(_ signal: Signal) -> String {
  func cycle() {
    let ready = DispatchSemaphore(value: 0)
    let task = Task {
      guard let notes = try? signal.notifications() else { return }
      ready.signal()
      for await _ in notes {}
    }
    ready.wait()
    task.cancel()
    blocking { await task.value }
    let observation = try? signal.observe(on: observerQueue) { _ in }
    observation?.cancel()
  }
  // The threads that libdispatch's root queues start as work comes (the cooperative pool's, the
  // observer queue's: "com.apple.root.…-qos…", cut to 15 characters) grow up to their limits on
  // their own schedule, in the Darwin model too: not counted. Every other thread is.
  func threadsOutsideTheRootQueues() -> Int { threadNames().filter { !$0.contains("qos") }.count }
  // A Dispatch source closes its descriptor in its cancel handler, which runs on its queue after
  // `cancel()` returns (Apple's event loop, and the Darwin model's): counted once that is done, or
  // after 5 s (a leak stays).
  func descriptors(atMost limit: Int? = nil) -> Int {
    var count = counts().0
    let deadline = DispatchTime.now() + .seconds(5)
    while let limit, count > limit, DispatchTime.now() < deadline {
      EventLoopProbe.drain()
      _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .milliseconds(1))
      count = counts().0
    }
    return count
  }
  cycle()  // warm up the runtime's lazily started threads
  EventLoopProbe.drain()
  let opened = openDescriptors()
  let before = (descriptors(), threadsOutsideTheRootQueues())
  for _ in 0..<3 { cycle() }
  let after = (descriptors(atMost: before.0), threadsOutsideTheRootQueues())
  let liaisonThreads = threadNames().filter { $0.hasPrefix("liaison-") }.count
  // What a descriptor left open is, to tell a leak of Liaison's from the runtime's own.
  let left = openDescriptors().subtracting(opened).sorted().joined(separator: ",")
  return "\(before.0) \(before.1) \(after.0) \(after.1) liaison-threads=\(liaisonThreads) new=\(left)"
}

/// This process's open descriptors, each as its number and what it names (Linux: `/proc/self/fd`;
/// elsewhere, its number alone).
private func openDescriptors() -> Set<String> {
  let numbers = (try? FileManager.default.contentsOfDirectory(atPath: "/dev/fd")) ?? []
  return Set(
    numbers.map { number in
      let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + number)
      return number + "=" + (target ?? "?")
    })
}
