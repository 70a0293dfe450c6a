import Dispatch

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A lease on a ``Presence``: valid for a stated time, renewed by a heartbeat, holding no lock
/// between renewals. See ``Presence/lease(for:info:)``.
public final class PresenceLease: Sendable {
  private struct State {
    var descriptor: CInt?
    var held = false
    var expiry: UInt64 = 0
    var heartbeat: DispatchSourceTimer?
  }

  /// The presence leased.
  public let presence: Presence
  /// How long the lease stays valid without renewal.
  public let duration: Duration
  private let token = UInt64.random(in: 1...UInt64.max)
  private let record: PresenceHolder
  private let state = Locked(State())

  init(presence: Presence, duration: Duration, info: String?) {
    self.presence = presence
    self.duration = duration
    self.record = PresenceHolder(
      kind: .lease, processID: Syscall.processID, since: Date(), info: info, leaseToken: token)
  }

  deinit { release() }

  /// Whether the lease is held and has not expired: `false` once released, once lost to another
  /// holder, and while it has lapsed for want of renewal.
  public var isHeld: Bool {
    state.withLock { $0.held && $0.expiry > SystemClock.bootNanoseconds() }
  }

  /// Renews the lease now, for another ``duration``. The heartbeat does this by itself; call it
  /// when you know the process is about to go quiet.
  ///
  /// - Throws: ``LiaisonError/Code/leaseLost`` when the lease was released, or when another
  ///   holder took the presence after this lease lapsed; other errors when the file cannot be
  ///   read or written (the lease stays as it was and may lapse).
  public func renew() throws(LiaisonError) {
    try state.withLock { state throws(LiaisonError) in
      guard let fd = state.descriptor else {
        throw LiaisonError(.leaseLost, "The lease on '\(presence.name)' was released; lease the presence again.")
      }
      let found: PresenceRecord.Decoded
      do throws(LiaisonError) {
        found = try presence.lockRecord(fd)
      } catch  where error.code == .alreadyClaimed {
        state.held = false
        throw lost(error.message)
      }
      defer { Syscall.unlock(fd) }
      if case .holder(let holder) = found, holder.leaseToken != token,
        holder.isLiveLease(now: SystemClock.bootNanoseconds())
      {
        state.held = false
        throw lost("It is held by \(holder).")
      }
      let (sum, overflow) = SystemClock.bootNanoseconds().addingReportingOverflow(duration.clampedNanoseconds)
      let expiry = overflow ? .max : sum
      try presence.writeRecord(fd, record.renewed(until: expiry))
      state.expiry = expiry
      state.held = true
    }
  }

  /// Gives the lease up at once (it does not wait to lapse). Calling it again does nothing.
  public func release() {
    let timer = state.withLock { state -> DispatchSourceTimer? in
      state.held = false
      if let fd = state.descriptor.take() {
        if case .holder(let holder) = try? presence.lockRecord(fd), holder.leaseToken == token {
          try? presence.writeRecord(fd, nil)
        }
        Syscall.unlock(fd)  // explicitly: see PresenceClaim.release()
        Syscall.close(fd)
      }
      return state.heartbeat.take()
    }
    timer?.cancel()
  }

  /// Takes the lease and starts the heartbeat.
  func start() throws(LiaisonError) {
    let fd = try presence.openFile()
    state.withLock { $0.descriptor = fd }
    do throws(LiaisonError) {
      try renew()
    } catch {
      release()
      // A first renewal that finds another holder means the presence is taken.
      if error.code == .leaseLost { throw LiaisonError(.alreadyClaimed, error.message, path: presence.path) }
      throw error
    }
    let interval = DispatchTimeInterval.nanoseconds(Int(clamping: duration.clampedNanoseconds / 3))
    state.withLock { state in
      let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global())
      timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(1))
      timer.setEventHandler { [weak self] in self?.heartbeat() }
      timer.resume()
      state.heartbeat = timer
    }
  }

  private func heartbeat() {
    // A suspended process takes no lock, not even for a moment.
    guard !presence.container.isSuspended else { return }
    do throws(LiaisonError) {
      try renew()
    } catch  where error.code == .leaseLost {
      state.withLock { $0.heartbeat.take() }?.cancel()
    } catch {
      // A passing failure (the disk, a busy file): the next beat tries again; the lease may lapse.
    }
  }

  private func lost(_ reason: String) -> LiaisonError {
    LiaisonError(
      .leaseLost,
      "The lease on '\(presence.name)' lapsed and another holder took the presence. \(reason)",
      path: presence.path)
  }
}

extension PresenceHolder {
  func renewed(until expiry: UInt64) -> PresenceHolder {
    PresenceHolder(
      kind: kind, processID: processID, since: since, info: info, leaseExpiry: expiry, leaseToken: leaseToken)
  }
}
