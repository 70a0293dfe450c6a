#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Something this process holds or waits for in a container, which ``SharedContainer/suspend()``
/// must give up.
protocol SuspensionParticipant: AnyObject, Sendable {
  /// Gives up what is held or waited for. Called outside the lifecycle's lock.
  func suspend()
  /// Takes back what `suspend` gave up, if it is something that is taken back (a claim); throws
  /// when that is no longer possible.
  func resume() throws(LiaisonError)
}

/// The suspend / resume state that every `SharedContainer` value on one folder shares in this
/// process, and the list of what that process holds or waits for there.
final class ContainerLifecycle: Sendable {
  private struct Identity: Hashable {
    let device: UInt64
    let inode: UInt64
  }

  private struct Member {
    weak var participant: (any SuspensionParticipant)?
  }

  private struct State {
    var suspended = false
    var members: [ObjectIdentifier: Member] = [:]
  }

  /// Each lifecycle with the folder it was made for: a folder deleted and made again can reuse
  /// the inode, hence the key, and must not inherit the old one's state (a suspension).
  private static let registry = Locked<[Identity: (folder: PrivateFolder, lifecycle: ContainerLifecycle)]>([:])
  private let state = Locked(State())
  /// Held for the whole of a `suspend()` or `resume()`, so that the two never interleave
  /// (participants take `state` to leave, so it cannot be that lock).
  private let transition = Locked(())

  /// The lifecycle of the container whose private folder is `folder`.
  static func shared(for folder: PrivateFolder) throws(LiaisonError) -> ContainerLifecycle {
    let info: stat
    switch Syscall.status(folder.descriptor) {
    case .success(let status): info = status
    case .failure(let error): throw LiaisonError.system(error, "inspect", path: folder.path)
    }
    let identity = Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    return registry.withLock { lifecycles in
      if let existing = lifecycles[identity], !existing.folder.isDeleted { return existing.lifecycle }
      let created = ContainerLifecycle()
      lifecycles[identity] = (folder, created)
      return created
    }
  }

  var isSuspended: Bool { state.withLock { $0.suspended } }

  /// Adds `participant` unless the container is suspended.
  ///
  /// - Returns: `false` when the container is suspended; the caller gives up what it took.
  func join(_ participant: any SuspensionParticipant) -> Bool {
    state.withLock { state in
      if state.suspended { return false }
      state.members[ObjectIdentifier(participant)] = Member(participant: participant)
      return true
    }
  }

  func leave(_ participant: any SuspensionParticipant) {
    _ = state.withLock { $0.members.removeValue(forKey: ObjectIdentifier(participant)) }
  }

  func suspend() {
    transition.withLock { _ in suspendParticipants() }
  }

  func resume() throws(LiaisonError) {
    try transition.withLock { _ throws(LiaisonError) in try resumeParticipants() }
  }

  private func suspendParticipants() {
    let participants = state.withLock { state -> [any SuspensionParticipant] in
      if state.suspended { return [] }
      state.suspended = true
      return state.members.values.compactMap(\.participant)
    }
    for participant in participants { participant.suspend() }
  }

  private func resumeParticipants() throws(LiaisonError) {
    let participants = state.withLock { state -> [any SuspensionParticipant] in
      guard state.suspended else { return [] }
      state.suspended = false
      return state.members.values.compactMap(\.participant)
    }
    var failures: [LiaisonError] = []
    for participant in participants {
      do throws(LiaisonError) {
        try participant.resume()
      } catch {
        failures.append(error)
      }
    }
    if failures.count == 1 { throw failures[0] }
    if failures.count > 1 {
      throw LiaisonError(failures[0].code, failures.map(\.message).joined(separator: " "))
    }
  }
}

extension SharedContainer {
  /// Gives up everything this process holds or waits for in the container, before the system
  /// suspends it.
  ///
  /// On iOS the system terminates a suspended process that holds a file lock in a shared
  /// container (exception `0xdead10cc`), and one that is merely waiting for such a lock. Call
  /// `suspend()` when the app is about to be suspended (for example from
  /// `sceneDidEnterBackground` or a background task's expiration handler). It:
  ///
  /// - releases every lock held through this container: their ``LockGuard``s report
  ///   ``LockGuard/isHeld`` `false` from then on, and code still running under them no longer has
  ///   mutual exclusion, so finish such work before suspending;
  /// - ends every wait for a lock, which throws ``LiaisonError/Code/suspended``;
  /// - releases every presence claim, remembering it so that ``resume()`` takes it back;
  /// - refuses new locks and claims with ``LiaisonError/Code/suspended`` until ``resume()``.
  ///
  /// Leases hold no lock and need no suspending: they lapse by themselves if not renewed.
  /// Calling `suspend()` twice is harmless. It affects every `SharedContainer` value on the
  /// same folder in this process, and nothing in other processes.
  public func suspend() {
    lifecycle.suspend()
  }

  /// Undoes ``suspend()``: allows locks and claims again and takes back the claims that
  /// `suspend()` released.
  ///
  /// - Throws: ``LiaisonError/Code/alreadyClaimed`` when another process claimed a presence
  ///   meanwhile; the other claims are taken back all the same, and the lost ones report
  ///   ``PresenceClaim/isHeld`` `false`.
  public func resume() throws(LiaisonError) {
    try lifecycle.resume()
  }

  /// Whether ``suspend()`` was called without a ``resume()`` since, in this process.
  public var isSuspended: Bool { lifecycle.isSuspended }
}

/// Work that modules of this package do when the container is suspended and resumed (a shared
/// database posts GRDB's suspension notifications). Registered while this object lives.
package final class SuspensionHandlers: SuspensionParticipant {
  private let onSuspend: @Sendable () -> Void
  private let onResume: @Sendable () -> Void
  private let lifecycle: ContainerLifecycle

  init(lifecycle: ContainerLifecycle, suspend: @escaping @Sendable () -> Void, resume: @escaping @Sendable () -> Void) {
    self.lifecycle = lifecycle
    onSuspend = suspend
    onResume = resume
  }

  deinit { lifecycle.leave(self) }

  func suspend() { onSuspend() }
  func resume() throws(LiaisonError) { onResume() }
}

extension SharedContainer {
  /// Runs `suspend` on ``suspend()`` and `resume` on ``resume()`` for as long as the returned
  /// object lives.
  package func registerSuspensionHandlers(
    suspend: @escaping @Sendable () -> Void, resume: @escaping @Sendable () -> Void
  ) -> SuspensionHandlers {
    let handlers = SuspensionHandlers(lifecycle: lifecycle, suspend: suspend, resume: resume)
    _ = lifecycle.join(handlers)
    return handlers
  }
}
