#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Something this process holds or waits for in a container, which ``SharedContainer/suspend()``
/// must give up.
protocol SuspensionParticipant: AnyObject, Sendable {
  /// Gives up what is held or waited for, or starts to, without waiting for anything another
  /// participant gives up (a wait for a lock ends only when its own participant is suspended).
  /// Called outside the lifecycle's lock.
  func suspend()
  /// Waits until what ``suspend()`` started is over: called once every participant's `suspend()`
  /// has returned. Does nothing by default.
  func finishSuspending()
  /// Takes back what `suspend` gave up, if it is something that is taken back (a claim); throws
  /// when that is no longer possible.
  func resume() throws(LiaisonError)
}

extension SuspensionParticipant {
  func finishSuspending() {}
}

/// The suspend / resume state that every `SharedContainer` value on one folder shares in this
/// process, and the list of what that process holds or waits for there.
final class ContainerLifecycle: Sendable {
  private struct Identity: Hashable {
    let device: UInt64
    let inode: UInt64
  }

  /// A participant, held weakly (it leaves when it ends, or its entry goes empty) or, for one
  /// whose owner removes it in its own `deinit`, strongly.
  private struct Member {
    weak var participant: (any SuspensionParticipant)?
    var owned: (any SuspensionParticipant)?

    init(participant: any SuspensionParticipant) { self.participant = participant }
    init(owned: any SuspensionParticipant) { self.owned = owned }

    var current: (any SuspensionParticipant)? { owned ?? participant }
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
    let identity = Identity(device: deviceNumber(info.st_dev), inode: UInt64(info.st_ino))
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

  /// Adds `participant`, which holds nothing yet, also while the container is suspended, and
  /// keeps it until ``leave(_:)``: a participant whose owner checks ``isSuspended`` after each
  /// thing it lists there, and removes it in its `deinit` (a lock's ``LockDescriptors``).
  func add(owned participant: any SuspensionParticipant) {
    state.withLock { $0.members[ObjectIdentifier(participant)] = Member(owned: participant) }
  }

  /// Adds `participant` even while the container is suspended, and brings it to the container's
  /// state: suspended (both phases) if the container is. Runs under the transition lock, so that
  /// no suspend or resume interleaves.
  func admit(_ participant: any SuspensionParticipant) {
    transition.withLock { _ in
      let suspended = state.withLock { state in
        state.members[ObjectIdentifier(participant)] = Member(participant: participant)
        return state.suspended
      }
      if suspended {
        participant.suspend()
        participant.finishSuspending()
      }
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
      return state.members.values.compactMap(\.current)
    }
    for participant in participants { participant.suspend() }
    for participant in participants { participant.finishSuspending() }
  }

  private func resumeParticipants() throws(LiaisonError) {
    let participants = state.withLock { state -> [any SuspensionParticipant] in
      guard state.suspended else { return [] }
      state.suspended = false
      return state.members.values.compactMap(\.current)
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
  /// - waits for a lease renewal in progress (it holds the presence's lock for a moment) and
  ///   stops renewals until ``resume()``, which renews at once; a lease may lapse meanwhile;
  /// - in LiaisonStore, ends the store's and shared databases' accesses in progress and refuses
  ///   new ones, so that SQLite holds and waits for no lock in the container;
  /// - refuses new locks, claims and leases with ``LiaisonError/Code/suspended`` until
  ///   ``resume()``.
  ///
  /// When it returns, this process holds and waits for no lock in the container. It waits for the
  /// store accesses it interrupts, so do not call it from inside one (a defaults transaction's
  /// body), where it would wait for itself. Calling `suspend()` twice is harmless. It affects every `SharedContainer` value on the
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
  private let onFinish: @Sendable () -> Void
  private let onResume: @Sendable () -> Void
  private let lifecycle: ContainerLifecycle

  init(
    lifecycle: ContainerLifecycle, suspend: @escaping @Sendable () -> Void,
    finish: @escaping @Sendable () -> Void, resume: @escaping @Sendable () -> Void
  ) {
    self.lifecycle = lifecycle
    onSuspend = suspend
    onFinish = finish
    onResume = resume
  }

  deinit { lifecycle.leave(self) }

  func suspend() { onSuspend() }
  func finishSuspending() { onFinish() }
  func resume() throws(LiaisonError) { onResume() }
}

extension SharedContainer {
  /// Runs `suspend` on ``suspend()`` and `resume` on ``resume()`` for as long as the returned
  /// object lives; `finish`, after every part of the container has run its `suspend`, waits for
  /// what `suspend` started to end. If the container is suspended already, `suspend` and
  /// `finish` run at once.
  package func registerSuspensionHandlers(
    suspend: @escaping @Sendable () -> Void, finish: @escaping @Sendable () -> Void = {},
    resume: @escaping @Sendable () -> Void
  ) -> SuspensionHandlers {
    let handlers = SuspensionHandlers(lifecycle: lifecycle, suspend: suspend, finish: finish, resume: resume)
    lifecycle.admit(handlers)
    return handlers
  }
}
