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
    /// Brief accesses in progress (``briefly(_:)``): probes and posts, which `suspend()` waits out.
    var briefAccesses = 0
    /// What runs at the next ``resume()`` (``afterResume(_:)``).
    var afterResume: [@Sendable () -> Void] = []
  }

  /// Each lifecycle with the folder it was made for: a folder deleted and made again can reuse
  /// the inode, hence the key, and must not inherit the old one's state (a suspension).
  private static let registry = Locked<[Identity: (folder: PrivateFolder, lifecycle: ContainerLifecycle)]>([:])
  private let state = Locked(State())
  /// How many watches of the container (of signals, domains, mailboxes and presences) are in
  /// place in this process: ``SharedContainer/liveWatchCount``.
  let watches = Locked(0)
  /// Held for the whole of a `suspend()` or `resume()`, so that the two never interleave
  /// (participants take `state` to leave, so it cannot be that lock).
  private let transition = Locked(())

  /// The lifecycle of the container whose private folder is `folder`.
  static func shared(for folder: PrivateFolder) throws(LiaisonError) -> ContainerLifecycle {
    // A read-only container with no folder of Liaison's yet: nothing in it to hold or wait for
    // but signals, which each process's own lifecycle suspends; no identity to share it by.
    if !folder.exists { return ContainerLifecycle() }
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

  /// How many participants take part now (a wait for a lock joins as it begins): what a test
  /// waits for where it cannot see a wait in the kernel (macOS lists no lock table).
  var participantCount: Int { state.withLock { $0.members.count } }

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
    var owed: [@Sendable () -> Void] = []
    // The owed rings run after the transition lock is released: a ring may wait for another
    // poster, and a suspend() from another thread must be able to interrupt that wait.
    defer { for action in owed { action() } }
    try transition.withLock { _ throws(LiaisonError) in try resumeParticipants(owed: &owed) }
  }

  private func suspendParticipants() {
    let participants = state.withLock { state -> [any SuspensionParticipant] in
      if state.suspended { return [] }
      state.suspended = true
      return state.members.values.compactMap(\.current)
    }
    for participant in participants { participant.suspend() }
    for participant in participants { participant.finishSuspending() }
    // Brief accesses never wait for long: a probe does not wait at all, and a post's wait for
    // another poster joined the lifecycle as a participant, so it was just interrupted.
    while state.withLock({ $0.briefAccesses }) > 0 { sched_yield() }
  }

  /// Runs `body`, which takes a lock in the container for a moment (a presence's probe, a
  /// signal's post), as a brief access that ``suspend()`` waits out, unless the container is
  /// suspended.
  ///
  /// - Returns: what `body` returned, or `nil`, without running it, while the container is
  ///   suspended: the caller then does without the lock, or refuses.
  func briefly<T>(_ body: () throws(LiaisonError) -> T) throws(LiaisonError) -> T? {
    let admitted = state.withLock { state -> Bool in
      if state.suspended { return false }
      state.briefAccesses += 1
      return true
    }
    guard admitted else { return nil }
    defer { state.withLock { $0.briefAccesses -= 1 } }
    return try body()
  }

  /// Runs `action` at the next ``resume()``, or at once when the container is not suspended:
  /// how a ring that `suspend()` refused is made once the process runs again.
  func afterResume(_ action: @escaping @Sendable () -> Void) {
    // Under the state lock, which resume() holds while it clears the flag and takes the actions:
    // an action is either taken by that resume or run here, never lost. (Not the transition
    // lock: a write that a suspension waits for may ring from here.)
    let runNow = state.withLock { state -> Bool in
      if state.suspended { state.afterResume.append(action) }
      return !state.suspended
    }
    if runNow { action() }
  }

  /// How many actions wait for the next ``resume()``.
  var owedAtResume: Int { state.withLock { $0.afterResume.count } }

  /// Takes an exclusive `flock` on `fd`, a file of the container, for the brief `body`: waiting
  /// for another holder in the kernel, but never past a ``suspend()``, which interrupts the wait.
  ///
  /// - Throws: ``LiaisonError/Code/suspended`` while the container is suspended, or when a
  ///   suspension interrupts the wait; what `body` throws.
  func withBriefExclusiveLock<T>(
    _ fd: CInt, path: String, _ body: () throws(LiaisonError) -> T
  ) throws(LiaisonError) -> T {
    // Waiting, the lock is always taken: the inner `nil` never happens.
    guard let outcome = try withBriefExclusiveLock(fd, path: path, waiting: true, body) else {
      throw Self.suspendedError(path: path)
    }
    return outcome
  }

  /// Like ``withBriefExclusiveLock(_:path:_:)``; without `waiting`, returns `nil` at once, without
  /// running `body`, when another holder has the lock.
  func withBriefExclusiveLock<T>(
    _ fd: CInt, path: String, waiting: Bool, _ body: () throws(LiaisonError) -> T
  ) throws(LiaisonError) -> T? {
    let outcome = try briefly { () throws(LiaisonError) -> T? in
      guard try lockExclusively(fd, path: path, waiting: waiting) else { return nil }
      defer { Syscall.unlock(fd) }
      return try body()
    }
    guard let outcome else { throw Self.suspendedError(path: path) }
    return outcome
  }

  /// Takes the lock; returns `false` when it is held elsewhere and `waiting` is not set.
  private func lockExclusively(_ fd: CInt, path: String, waiting: Bool) throws(LiaisonError) -> Bool {
    switch Syscall.lock(fd, LOCK_EX | LOCK_NB) {
    case .success(true): return true
    case .success(false): if !waiting { return false }
    case .failure(let error): throw LiaisonError.system(error, "lock", path: path)
    }
    let wait = InterruptibleWait()
    let participant = WaitParticipant(wait)
    guard join(participant) else { throw Self.suspendedError(path: path) }
    defer { leave(participant) }
    // A lock taken as a suspension begins is this brief access's, which `suspend()` waits out:
    // settled as it is.
    let outcome = wait.run({ ProcessLock.blockingLock(fd: fd, mode: .exclusive, wait: wait) })
    switch participant.settle(outcome, fd: fd, suspended: false) {
    case .acquired: return true
    case .interrupted: throw Self.suspendedError(path: path)
    case .failed(let error): throw LiaisonError.system(error, "lock", path: path)
    }
  }

  static func suspendedError(path: String) -> LiaisonError {
    LiaisonError(
      .suspended,
      "The container is suspended, so '\(path)' is not locked or written (iOS terminates a suspended process that "
        + "holds or waits for a lock in the container). Call resume() first.",
      path: path)
  }

  private func resumeParticipants(owed: inout [@Sendable () -> Void]) throws(LiaisonError) {
    let (participants, actions) = state.withLock { state -> ([any SuspensionParticipant], [@Sendable () -> Void]) in
      guard state.suspended else { return ([], []) }
      state.suspended = false
      defer { state.afterResume = [] }
      return (state.members.values.compactMap(\.current), state.afterResume)
    }
    owed = actions
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
  /// - ends a signal's post waiting for another poster, and refuses posts (and `setState`) with
  ///   ``LiaisonError/Code/suspended``; the store's own rings are made at ``resume()`` instead;
  /// - waits for the presence probes in progress; later probes (`isActive`, `holder`, the
  ///   watches of ``Presence/changes()``) take no lock and read the record alone, a claim counting
  ///   while its process exists;
  /// - in LiaisonStore, ends the store's accesses in progress and refuses new ones, then closes
  ///   the store's pools (the first access after ``resume()`` opens them again); ends what runs
  ///   on each shared database's pool (its busy waits give up), waiting for the accesses that were
  ///   running; later writes of a pool are refused if its configuration observes GRDB's
  ///   suspension notifications, which this posts;
  /// - refuses new locks, claims and leases with ``LiaisonError/Code/suspended`` until
  ///   ``resume()``.
  ///
  /// When it returns, this process holds and waits for no lock in the container: no `flock`, and
  /// no SQLite lock, but on a shared database you keep open the two that SQLite keeps for as long
  /// as a connection in WAL mode is open (a shared lock on the database file's lock bytes and one
  /// on its `-shm`), which GRDB's suspension leaves as well, and the read mark of such a
  /// database's read that starts later: GRDB lets reads in WAL mode go on. Close your shared
  /// databases first (`SharedDatabase.close()`) to hold none (the *Apple Platforms* article). It does not wait for other
  /// processes, only for this one's operations that it interrupts or that were running (a read
  /// of a shared database included), so it returns as soon as they end: at once for a wait. Do not
  /// call it from inside one of them (a defaults transaction's body, a shared database's read or
  /// write), where it would wait for itself. Calling `suspend()` twice is harmless. It affects
  /// every `SharedContainer` value on the same folder in this process, and nothing in other
  /// processes.
  public func suspend() {
    lifecycle.suspend()
  }

  /// Undoes ``suspend()``: allows locks and claims again, takes back the claims that
  /// `suspend()` released, and makes the store's rings that `suspend()` refused.
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

  /// Stops taking part in the container's suspension, as when released.
  package func cancel() { lifecycle.leave(self) }

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

extension SharedContainer {
  /// Takes an exclusive `flock` on `fd`, a file of this container, for the brief `body`; the wait
  /// for another holder ends at ``suspend()``, and none starts while suspended.
  ///
  /// - Throws: ``LiaisonError/Code/suspended`` while the container is suspended or when a
  ///   suspension interrupts the wait; what `body` throws.
  package func withBriefExclusiveLock<T>(
    _ fd: CInt, path: String, _ body: () throws(LiaisonError) -> T
  ) throws(LiaisonError) -> T {
    try lifecycle.withBriefExclusiveLock(fd, path: path, body)
  }

  /// Runs `action` at the next ``resume()``, or at once when the container is not suspended.
  package func afterResume(_ action: @escaping @Sendable () -> Void) {
    lifecycle.afterResume(action)
  }

  /// How many actions wait for the next ``resume()`` (``afterResume(_:)``): what the tests read to
  /// know that a ring or a relay was deferred.
  package var actionsOwedAtResume: Int { lifecycle.owedAtResume }
}
