// The peer's commands on any backend: the same locks, presences and signals on a folder or on
// PostgreSQL, through the coordination protocols. The peer's argument chooses the backend: a
// folder, or `postgres://USER@HOST:PORT/DATABASE?sslmode=disable#NAMESPACE` (built with the
// package trait `Postgres`; $LIAISON_TEST_DETECTION_BOUND, in seconds, sets the detection bound).

import Dispatch
import Foundation
import Liaison
import LiaisonStore
import LiaisonTestSupport

#if Postgres
  import LiaisonPostgres
#endif

/// The place the peer works in, opened before the peer says `ready`.
let place: any CoordinationStore = {
  let argument = CommandLine.arguments.count == 2 ? CommandLine.arguments[1] : ""
  guard argument.hasPrefix("postgres") else { return container }
  #if Postgres
    let parts = argument.split(separator: "#", maxSplits: 1).map(String.init)
    let bound = ProcessInfo.processInfo.environment["LIAISON_TEST_DETECTION_BOUND"].flatMap(Double.init) ?? 10
    let opened = blocking { () -> Result<PostgresContainer, any Error> in
      do {
        return .success(
          try await PostgresContainer(
            url: parts[0], namespace: parts.count > 1 ? parts[1] : "test",
            configuration: .init(detectionBound: .seconds(bound))))
      } catch {
        return .failure(error)
      }
    }
    switch opened {
    case .success(let place): return place
    case .failure(let error):
      say("error \(error)")
      exit(1)
    }
  #else
    say("error this peer was built without the package trait Postgres")
    exit(2)
  #endif
}()

@MainActor private var placeGuards: [String: any HeldLock] = [:]
@MainActor private var placeClaims: [String: any HeldClaim] = [:]
@MainActor private var placeWatches: [String: Task<Void, Never>] = [:]
private let placeChanges = Inbox<(change: PresenceChange, receivedAt: UInt64)>()
private let placeNotifications = Inbox<(notification: SignalNotification, receivedAt: UInt64)>()

/// Runs `body` on the cooperative pool and waits for it on this thread, passing its error on.
func awaiting<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
  try blocking { () -> Result<T, any Error> in
    do {
      return .success(try await body())
    } catch {
      return .failure(error)
    }
  }.get()
}

let placeCommands: [PeerCommandHandler] = [
  PeerCommandHandler(
    .placeLock,
    "NAME [shared] [TIMEOUT-MS]   waits → ok locked TOKEN MONOTONIC-NS-WHEN-TAKEN (TOKEN 0 when shared)"
  ) { words in
    let lock = try place.lock(words[1])
    let mode: LockMode = words.contains("shared") ? .shared : .exclusive
    let timeout = words.count > 2 ? Int(words.last!).map { Duration.milliseconds($0) } : nil
    let held = try awaiting { try await lock.lock(mode, timeout: timeout) as any HeldLock }
    let takenAt = monotonicNanoseconds()
    placeGuards[words[1]] = held
    let token = mode == .exclusive ? try awaiting { try await held.fencingToken() } : 0
    return "locked \(token) \(takenAt)"
  },
  PeerCommandHandler(.placeTrylock, "NAME [shared]  → ok locked TOKEN | ok busy") { words in
    let lock = try place.lock(words[1])
    let mode: LockMode = words.contains("shared") ? .shared : .exclusive
    guard let held = try awaiting({ try await lock.tryLock(mode) as (any HeldLock)? }) else { return "busy" }
    placeGuards[words[1]] = held
    return "locked \(mode == .exclusive ? try awaiting { try await held.fencingToken() } : 0)"
  },
  PeerCommandHandler(.placeUnlock, "NAME  → ok unlocked") { words in
    if let held = placeGuards.removeValue(forKey: words[1]) { awaitingUnlock(held) }
    return "unlocked"
  },
  PeerCommandHandler(.placeIsheld, "NAME   reads the held lock's isHeld at once → ok held | ok not-held") { words in
    placeGuards[words[1]]?.isHeld == true ? "held" : "not-held"
  },
  PeerCommandHandler(.placeLost, "NAME   waits until the held lock is lost → ok lost MONOTONIC-NS | ok unlocked") {
    words in
    guard let held = placeGuards[words[1]] else { return "unlocked" }
    let loss = blocking { try? await held.waitForLoss() } ?? nil
    let at = monotonicNanoseconds()
    return loss == nil ? "unlocked" : "lost \(at)"
  },
  PeerCommandHandler(.placeClaim, "NAME [INFO…]  → ok claimed") { words in
    let presence = try place.presence(words[1])
    let info = words.count > 2 ? words[2...].joined(separator: " ") : nil
    placeClaims[words[1]] = try awaiting { try await presence.claim(info: info) as any HeldClaim }
    return "claimed"
  },
  PeerCommandHandler(.placeRelease, "NAME  → ok released") { words in
    if let claim = placeClaims.removeValue(forKey: words[1]) { blocking { await claim.release() } }
    return "released"
  },
  PeerCommandHandler(.placeHolder, "NAME  → ok none | ok PID INFO") { words in
    let presence = try place.presence(words[1])
    guard let holder = try awaiting({ try await presence.holder }) else { return "none" }
    return "\(holder.processID) \(holder.info ?? "")"
  },
  PeerCommandHandler(.placeWatch, "NAME   starts collecting the presence's changes → ok watching") { words in
    let presence = try place.presence(words[1])
    let ready = DispatchSemaphore(value: 0)
    placeWatches[words[1]]?.cancel()
    placeWatches[words[1]] = Task.detached { await collectChanges(of: presence, ready: ready) }
    ready.wait()
    return "watching"
  },
  PeerCommandHandler(.placeNextchange, "[MS]  → ok released MONOTONIC-NS | ok claimed PID MONOTONIC-NS | ok none") {
    words in
    guard let (change, at) = placeChanges.take(milliseconds: waitMilliseconds(words)) else { return "none" }
    switch change {
    case .released: return "released \(at)"
    case .claimed(let holder): return "claimed \(holder.processID) \(at)"
    }
  },
  PeerCommandHandler(.placePost, "NAME STATE  → ok posted") { words in
    let signal = try place.signal(words[1])
    let state = UInt64(words[2])!
    try awaiting { try await signal.post(state: state) }
    return "posted"
  },
  PeerCommandHandler(.placeState, "NAME  → ok STATE") { words in
    let signal = try place.signal(words[1])
    return "\(try awaiting { try await signal.state })"
  },
  PeerCommandHandler(
    .placeObserve, "NAME [own]   collects notifications (ignoring own posts unless 'own') → ok observing"
  ) {
    words in
    let signal = try place.signal(words[1])
    let ready = DispatchSemaphore(value: 0)
    let ignoringOwn = !words.contains("own")
    placeWatches["signal " + words[1]]?.cancel()
    placeWatches["signal " + words[1]] = Task.detached {
      await collectNotifications(of: signal, ignoringOwn, ready: ready)
    }
    ready.wait()
    return "observing"
  },
  PeerCommandHandler(.placeNextnotification, "[MS]  → ok STATE SEQUENCE MONOTONIC-NS | ok none") { words in
    guard let (notification, at) = placeNotifications.take(milliseconds: waitMilliseconds(words)) else {
      return "none"
    }
    return "\(notification.state) \(notification.sequence) \(at)"
  },
]

@MainActor private func awaitingUnlock(_ held: any HeldLock) {
  blocking { await held.unlock() }
}

private func collectChanges(of presence: some CoordinationPresence, ready: DispatchSemaphore) async {
  do {
    let changes = try await presence.changes()
    ready.signal()
    for try await change in changes { placeChanges.put((change, monotonicNanoseconds())) }
  } catch {
    ready.signal()
  }
}

private func collectNotifications(
  of signal: some CoordinationSignal, _ ignoringOwn: Bool, ready: DispatchSemaphore
) async {
  do {
    let notifications = try await signal.notifications(ignoringOwnPosts: ignoringOwn)
    ready.signal()
    for try await notification in notifications { placeNotifications.put((notification, monotonicNanoseconds())) }
  } catch {
    ready.signal()
  }
}
