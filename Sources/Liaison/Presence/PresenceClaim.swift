import Synchronization

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A held claim on a ``Presence``: the presence is active until ``release()`` is called, the
/// claim is deallocated, or the process dies.
public final class PresenceClaim: Sendable {
  private struct State {
    /// The descriptor holding the lock, while held or suspended.
    var descriptor: CInt?
    var held = false
  }

  /// The presence claimed.
  public let presence: Presence
  private let info: String?
  private let state = Mutex(State())

  init(presence: Presence, info: String?) {
    self.presence = presence
    self.info = info
  }

  deinit { release() }

  /// Whether the claim is held: `false` after ``release()``, while the container is suspended,
  /// and when ``SharedContainer/resume()`` could not take it back.
  public var isHeld: Bool { state.withLock { $0.held } }

  /// Gives the presence up. Calling it again does nothing.
  public func release() {
    let fd = state.withLock { state -> CInt? in
      state.held = false
      return state.descriptor.take()
    }
    guard let fd else { return }
    presence.container.lifecycle.leave(self)
    // Clear the record before unlocking, so that nobody reads a record of a finished holder.
    try? presence.writeRecord(fd, nil)
    Syscall.close(fd)  // closing the only descriptor of this open file releases its lock
  }

  /// Takes the lock and writes this process's record.
  func acquire() throws(LiaisonError) {
    let fd = try state.withLock { state throws(LiaisonError) -> CInt in
      if let fd = state.descriptor { return fd }
      let fd = try presence.openFile()
      state.descriptor = fd
      return fd
    }
    do throws(LiaisonError) {
      let found = try presence.lockRecord(fd)
      if case .holder(let holder) = found, holder.isLiveLease(now: SystemClock.bootNanoseconds()) {
        Syscall.unlock(fd)
        throw presence.alreadyClaimed(by: holder)
      }
      let record = PresenceHolder(
        kind: .claim, processID: Syscall.processID, since: Date(), info: info)
      do throws(LiaisonError) {
        try presence.writeRecord(fd, record)
      } catch {
        Syscall.unlock(fd)
        throw error
      }
      state.withLock { $0.held = true }
    } catch {
      state.withLock { state in
        if let fd = state.descriptor.take() { Syscall.close(fd) }
      }
      throw error
    }
  }
}

extension PresenceClaim: SuspensionParticipant {
  func suspend() {
    let fd = state.withLock { state -> CInt? in
      guard state.held else { return nil }
      state.held = false
      return state.descriptor
    }
    guard let fd else { return }
    try? presence.writeRecord(fd, nil)
    Syscall.unlock(fd)
  }

  func resume() throws(LiaisonError) {
    let wasSuspended = state.withLock { !$0.held && $0.descriptor != nil }
    guard wasSuspended else { return }
    do throws(LiaisonError) {
      try acquire()
    } catch {
      presence.container.lifecycle.leave(self)
      throw error
    }
  }
}
