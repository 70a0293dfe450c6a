import Dispatch

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A lease on a ``Presence``: valid for a stated time, renewed by a heartbeat, holding no lock
/// between renewals. See ``Presence/lease(for:info:)``.
///
/// The heartbeat renews every third of the duration, on a strict timer (Dispatch's `.strict`
/// flag: the system does its best to keep to a 1 ms leeway even where it would coalesce timers,
/// as App Nap does) at user-initiated quality of service. So the lease lapses only if the process
/// does not run for two thirds of the duration: when it is suspended (iOS), stopped, or throttled
/// for that long. A macOS process that must keep its lease while in the background keeps App Nap
/// away with `ProcessInfo.beginActivity(options:reason:)`.
///
/// ``SharedContainer/suspend()`` waits for a renewal in progress to end, and none starts until
/// ``SharedContainer/resume()``, which renews at once: a suspended process takes no lock for its
/// leases, which may lapse meanwhile.
public final class PresenceLease: Sendable {
  private struct State: Sendable {
    var descriptor: CInt?
    var held = false
    var expiry: UInt64 = 0
    /// The heartbeat's timer, on the container's clock (a strict Dispatch timer on the system's).
    var heartbeat: (any LiaisonClockTimer)?
    var suspended = false
  }

  /// The presence leased.
  public let presence: Presence
  /// How long the lease stays valid without renewal.
  public let duration: Duration
  private let token = UInt64.random(in: 1...UInt64.max)
  private let record: PresenceHolder
  private let state = Locked(State())
  private var clock: LiaisonClock { presence.container.clock }

  init(presence: Presence, duration: Duration, info: String?) {
    self.presence = presence
    self.duration = duration
    self.record = PresenceHolder(
      kind: .lease, processID: Syscall.processID,
      since: Date(timeIntervalSince1970: presence.container.clock.wallSeconds), info: info, leaseToken: token)
  }

  deinit { release() }

  /// Whether the lease is held and has not expired: `false` once released, once lost to another
  /// holder, and while it has lapsed for want of renewal.
  public var isHeld: Bool {
    state.withLock { $0.held && $0.expiry > clock.now.nanoseconds }
  }

  /// Renews the lease now, for another ``duration``. The heartbeat does this by itself; call it
  /// when you know the process is about to go quiet.
  ///
  /// - Throws: ``LiaisonError/Code/leaseLost`` when the lease was released, or when another
  ///   holder took the presence after this lease lapsed; ``LiaisonError/Code/claimInProgress``
  ///   when another process has the file locked without a record (a claim being made, which
  ///   fails while this lease is live: the lease is not lost); other errors when the file cannot
  ///   be read or written. After any of the latter the lease stays as it was and may lapse.
  /// - Throws: ``LiaisonError/Code/suspended`` while the container is suspended.
  public func renew() throws(LiaisonError) {
    // The whole renewal runs under the state lock, which suspend() takes: it waits for a renewal
    // in progress, and a renewal that starts after it sees the flag.
    try state.withLock { state throws(LiaisonError) in
      guard let fd = state.descriptor else {
        throw LiaisonError(.leaseLost, "The lease on '\(presence.name)' was released; lease the presence again.")
      }
      if state.suspended {
        throw LiaisonError(
          .suspended,
          "The container is suspended, so the lease on '\(presence.name)' is not renewed. Call resume() first.")
      }
      let found: PresenceRecord.Decoded
      do throws(LiaisonError) {
        found = try presence.lockRecord(fd)
      } catch let error where error.code == .alreadyClaimed {
        state.held = false
        throw lost(error.message)
      }
      defer { Syscall.unlock(fd) }
      if case .holder(let holder) = found, holder.leaseToken != token,
        holder.isLiveLease(now: clock.now.nanoseconds)
      {
        state.held = false
        throw lost("It is held by \(holder).")
      }
      let (sum, overflow) = clock.now.nanoseconds.addingReportingOverflow(duration.clampedNanoseconds)
      let expiry = overflow ? .max : sum
      try presence.writeRecord(fd, record.renewed(until: expiry))
      state.expiry = expiry
      state.held = true
    }
  }

  /// Gives the lease up at once (it does not wait to lapse). Calling it again does nothing.
  /// While the container is suspended it only stops the heartbeat, taking no lock: the lease then
  /// lapses at its expiry.
  public func release() {
    let timer = state.withLock { state -> (any LiaisonClockTimer)? in
      state.held = false
      if let fd = state.descriptor.take() {
        if !state.suspended, case .holder(let holder) = try? presence.lockRecord(fd), holder.leaseToken == token {
          try? presence.writeRecord(fd, nil)
        }
        Syscall.unlock(fd)  // explicitly: see PresenceClaim.release()
        Syscall.close(fd)
      }
      return state.heartbeat.take()
    }
    timer?.cancel()
    presence.container.lifecycle.leave(self)
  }

  /// Takes the lease and starts the heartbeat.
  func start() throws(LiaisonError) {
    guard presence.container.lifecycle.join(self) else {
      throw LiaisonError(
        .suspended,
        "The container is suspended, so the presence '\(presence.name)' cannot be leased. Call resume() first.")
    }
    let fd: CInt
    do throws(LiaisonError) {
      fd = try presence.openFileForWriting()
    } catch {
      presence.container.lifecycle.leave(self)
      throw error
    }
    state.withLock { $0.descriptor = fd }
    do throws(LiaisonError) {
      try renew()
    } catch {
      release()
      // A first renewal that finds another holder means the presence is taken.
      if error.code == .leaseLost || error.code == .claimInProgress {
        throw LiaisonError(.alreadyClaimed, error.message, path: presence.path)
      }
      throw error
    }
    state.withLock { state in
      state.heartbeat = clock.repeating(every: duration / 3) { [weak self] in self?.heartbeat() }
    }
  }

  private func heartbeat() {
    do throws(LiaisonError) {
      try renew()
    } catch let error where error.code == .leaseLost {
      state.withLock { $0.heartbeat.take() }?.cancel()
    } catch {
      // Suspended, or a passing failure (the disk, a busy file): the next beat tries again; the
      // lease may lapse.
    }
  }

  private func lost(_ reason: String) -> LiaisonError {
    LiaisonError(
      .leaseLost,
      "The lease on '\(presence.name)' lapsed and another holder took the presence. \(reason)",
      path: presence.path)
  }
}

extension PresenceLease: SuspensionParticipant {
  /// Waits for a renewal in progress (it holds the state lock) and lets no other start.
  func suspend() {
    state.withLock { $0.suspended = true }
  }

  /// Lets renewals run again, and renews now: the lease may have lapsed while suspended. A lease
  /// lost meanwhile is reported by ``isHeld`` and by the next ``renew()``, not here.
  func resume() throws(LiaisonError) {
    state.withLock { $0.suspended = false }
    try? renew()
  }
}

extension PresenceHolder {
  func renewed(until expiry: UInt64) -> PresenceHolder {
    PresenceHolder(
      kind: kind, processID: processID, since: since, info: info, leaseExpiry: expiry, leaseToken: leaseToken)
  }
}
