#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A held claim on a ``Presence``: the presence is active until ``release()`` is called, the
/// claim is deallocated, or the process dies.
public final class PresenceClaim: Sendable {
  private struct State {
    /// Open from the first acquisition until release: while held, and while suspended.
    var descriptor: CInt?
    var held = false
    var released = false
    var end = LossState()
  }

  /// The presence claimed.
  public let presence: Presence
  private let info: String?
  /// Guards the state and every file operation on the descriptor, so that a release, a suspend
  /// and a resume on different threads never act on a descriptor another has closed.
  private let state = Locked(State())

  init(presence: Presence, info: String?) {
    self.presence = presence
    self.info = info
  }

  deinit { release() }

  /// Whether the claim is held: `false` after ``release()``, while the container is suspended,
  /// and when ``SharedContainer/resume()`` could not take it back.
  public var isHeld: Bool { state.withLock { $0.held } }

  /// Why the claim was lost, once it was: ``SharedContainer/suspend()`` gave it up (code
  /// ``LiaisonError/Code/lost``) and ``SharedContainer/resume()`` has not taken it back. `nil`
  /// while held and after ``release()``.
  public var loss: LiaisonError? { state.withLock { $0.end.loss } }

  /// Waits until the claim is lost and returns why (see ``loss``); returns `nil` once it is
  /// released instead.
  ///
  /// - Throws: ``LiaisonError/Code/cancelled`` when the task is cancelled first.
  public func waitForLoss() async throws(LiaisonError) -> LiaisonError? {
    try await state.waitForLoss(\.end, what: "waiting for the loss of a claim on '\(presence.name)'")
  }

  /// Gives the presence up. Calling it again does nothing.
  public func release() {
    let (wasLive, waiters) = state.withLock { state -> (Bool, [CheckedContinuation<LiaisonError?, Never>]) in
      guard !state.released else { return (false, []) }
      state.released = true
      if let fd = state.descriptor.take() {
        // The record is ours to clear only while we hold the lock; once suspended, it may be
        // another holder's.
        if state.held {
          try? presence.writeRecord(fd, nil)
          // Unlock explicitly: a child being spawned by another thread may hold a copy of this
          // open file until it execs, and the lock would outlive `close` for that long.
          #if os(Linux) && !DarwinModel
            Syscall.unmarkClaimed(fd)
          #endif
          Syscall.unlock(fd)
        }
        Syscall.close(fd)
      }
      state.held = false
      state.end.restart()  // a claim released while suspended is released, not lost
      return (true, state.end.end(nil))
    }
    waiters.resumeAll(nil)
    if wasLive { presence.container.lifecycle.leave(self) }
  }

  /// Takes the lock and writes this process's record. Does nothing once released.
  func acquire() throws(LiaisonError) {
    try state.withLock { state throws(LiaisonError) in
      guard !state.released, !state.held else { return }
      let fd: CInt
      if let open = state.descriptor { fd = open } else { fd = try presence.openFileForWriting() }
      state.descriptor = fd
      do throws(LiaisonError) {
        let found: PresenceRecord.Decoded
        do throws(LiaisonError) {
          found = try presence.lockRecord(fd)
        } catch let error where error.code == .claimInProgress {
          throw LiaisonError(.alreadyClaimed, error.message, path: error.path)  // held: by a claim being made
        }
        if case .holder(let holder) = found, holder.isLiveLease(now: presence.container.clock.now.nanoseconds) {
          throw presence.alreadyClaimed(by: holder)
        }
        #if os(Linux) && !DarwinModel
          // Before the record: a look that reads the record finds the mark (see `Presence.look`).
          if case .failure(let error) = Syscall.markClaimed(fd) {
            throw LiaisonError.system(error, "mark as claimed", path: presence.path)
          }
        #endif
        try presence.writeRecord(
          fd,
          PresenceHolder(
            kind: .claim, processID: Syscall.processID,
            since: Date(timeIntervalSince1970: presence.container.clock.wallSeconds), info: info))
        state.held = true
        state.end.restart()
      } catch {
        state.descriptor = nil
        #if os(Linux) && !DarwinModel
          Syscall.unmarkClaimed(fd)
        #endif
        Syscall.unlock(fd)  // if `lockRecord` took it
        Syscall.close(fd)
        throw error
      }
    }
  }
}

extension PresenceClaim {
  /// Lets the next program this process executes (`execve`) hold the claim: its record names this
  /// process id, which the program keeps, and the descriptor that holds the lock stays open across
  /// the exec. The `liaison presence claim` command runs its command so.
  package func passToExecutedProgram() throws(LiaisonError) {
    guard let fd = state.withLock({ $0.held ? $0.descriptor : nil }) else { return }
    if case .failure(let error) = Syscall.keepOpenAcrossExec(fd) {
      throw LiaisonError.system(error, "keep open", path: presence.path)
    }
  }
}

extension PresenceClaim: SuspensionParticipant {
  func suspend() {
    let loss = LiaisonError(
      .lost, "The claim on the presence '\(presence.name)' was given up by SharedContainer.suspend() until resume().")
    let waiters = state.withLock { state -> [CheckedContinuation<LiaisonError?, Never>] in
      guard state.held, let fd = state.descriptor else { return [] }
      try? presence.writeRecord(fd, nil)
      #if os(Linux) && !DarwinModel
        Syscall.unmarkClaimed(fd)
      #endif
      Syscall.unlock(fd)
      state.held = false
      return state.end.end(loss)
    }
    waiters.resumeAll(loss)
  }

  func resume() throws(LiaisonError) {
    let wasSuspended = state.withLock { !$0.released && !$0.held && $0.descriptor != nil }
    guard wasSuspended else { return }
    do throws(LiaisonError) {
      try acquire()
    } catch {
      presence.container.lifecycle.leave(self)
      throw error
    }
  }
}
