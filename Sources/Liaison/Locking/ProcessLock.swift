import Dispatch
import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Whether a lock is held alone or together with other shared holders.
public enum LockMode: Sendable, Hashable, CustomStringConvertible {
  /// One holder at a time, excluding every other holder, shared or exclusive.
  case exclusive
  /// Any number of shared holders at once, excluding exclusive ones.
  case shared

  var operation: CInt { self == .exclusive ? LOCK_EX : LOCK_SH }

  public var description: String { self == .exclusive ? "exclusive" : "shared" }
}

/// A lock that processes sharing a container take in turn: "only one process refreshes the
/// token".
///
/// ```swift
/// let refresh = try container.lock("token-refresh")
/// try await refresh.withLock(timeout: .seconds(5)) {
///   try await refreshTheToken()
/// }
/// ```
///
/// The lock is a `flock(2)` lock on a file in the container's private folder, so the kernel
/// enforces it and releases it when the holder's process dies, however it dies: the next waiter
/// is woken at once, with no polling and no staleness timeout. The file is never deleted
/// (deleting a lock file that others hold or wait on would split the lock in two).
///
/// **Within one process**, every acquisition uses its own open file description, so holders in
/// one process exclude each other exactly as holders in different processes do — whether they use
/// one `ProcessLock` value or several. A lock is not re-entrant: taking it again while holding it
/// waits for yourself (deadlock with the blocking forms, a timeout with the `async` form).
///
/// **Waiting** never blocks a thread of Swift's cooperative pool: the `async` forms wait on a
/// thread of their own, woken by the kernel when the lock comes free, and stop at once on
/// cancellation, timeout or ``SharedContainer/suspend()``.
public final class ProcessLock: Sendable {
  /// The lock's name.
  public let name: LiaisonName
  let container: SharedContainer
  /// The folder holding the lock file: the container's `locks`, or a module's own.
  let folder: PrivateFolder

  /// This lock's open descriptors and grants in this process.
  let descriptors: LockDescriptors

  convenience init(name: LiaisonName, container: SharedContainer) {
    self.init(name: name, folder: container.lockFolder, container: container)
  }

  /// A lock whose file lives in `folder`, for modules of this package that keep their locks apart
  /// from the user's (the store's write locks).
  package init(name: LiaisonName, folder: PrivateFolder, container: SharedContainer) {
    self.name = name
    self.folder = folder
    self.container = container
    descriptors = LockDescriptors(name: name)
    container.lifecycle.add(owned: descriptors)
  }

  deinit {
    container.lifecycle.leave(descriptors)
    descriptors.closeIdle()
  }

  /// The path of the lock file, for messages.
  var path: String { folder.path(of: name.rawValue) }

  /// Takes the lock if no other holder prevents it, without waiting.
  ///
  /// - Returns: the guard that holds the lock, or `nil` when another holder has it.
  /// - Throws: ``LiaisonError`` when the lock file cannot be opened or is unsafe, or
  ///   ``LiaisonError/Code/suspended`` while the container is suspended.
  public func tryLock(_ mode: LockMode = .exclusive) throws(LiaisonError) -> LockGuard? {
    // Checked before locking too, so that a suspended process never takes a lock even briefly.
    if container.lifecycle.isSuspended { throw Self.suspendedError(name) }
    let fd = try takeDescriptor()
    switch Syscall.lock(fd, mode.operation | LOCK_NB) {
    case .success(true):
      return try makeGuard(fd: fd, mode: mode)
    case .success(false):
      returnDescriptor(fd)
      return nil
    case .failure(let error):
      returnDescriptor(fd)
      throw LiaisonError.system(error, "lock", path: path)
    }
  }

  /// Takes the lock, blocking the calling thread until it is free or `timeout` has passed.
  ///
  /// Use this from threads of your own; from `async` code the same call, `try await
  /// lock.lock()`, waits without blocking a thread of the cooperative pool.
  ///
  /// - Parameters:
  ///   - mode: exclusive (the default) or shared.
  ///   - timeout: how long to wait at most; `nil` waits as long as it takes.
  /// - Throws: ``LiaisonError/Code/timedOut`` when the timeout passes first;
  ///   ``LiaisonError/Code/suspended`` if the container is suspended before or while waiting;
  ///   ``LiaisonError`` when the lock file cannot be opened or is unsafe.
  @available(*, noasync, message: "Use `try await lock(_:timeout:)`, which does not block the cooperative pool.")
  public func lock(_ mode: LockMode = .exclusive, timeout: Duration? = nil) throws(LiaisonError) -> LockGuard {
    try Self.check(timeout)
    if let held = try tryLock(mode) { return held }
    let fd = try takeDescriptor()
    let wait = InterruptibleWait()
    let deadline = Self.deadline(timeout, for: wait)
    let outcome = waitInterruptibly(wait, fd: fd, mode: mode) {
      wait.run { Self.blockingLock(fd: fd, mode: mode, wait: wait) }
    }
    deadline?.cancel()
    return try finish(outcome, fd: fd, mode: mode, timeout: timeout)
  }

  /// Takes the lock, waiting without blocking any thread of Swift's cooperative pool.
  ///
  /// - Parameters:
  ///   - mode: exclusive (the default) or shared.
  ///   - timeout: how long to wait at most; `nil` waits as long as it takes.
  /// - Returns: the guard that holds the lock.
  /// - Throws: ``LiaisonError/Code/timedOut`` when the timeout passes first,
  ///   ``LiaisonError/Code/cancelled`` when the task is cancelled while waiting,
  ///   ``LiaisonError/Code/suspended`` when the container is suspended, and ``LiaisonError``
  ///   when the lock file cannot be opened or is unsafe. Whatever is thrown, the lock is not
  ///   held and the wait's thread has ended.
  public func lock(_ mode: LockMode = .exclusive, timeout: Duration? = nil) async throws(LiaisonError) -> LockGuard {
    try Self.check(timeout)
    if let held = try tryLock(mode) { return held }
    if Task.isCancelled { throw .cancelled("waiting for the lock '\(name)'") }
    let fd = try takeDescriptor()
    let wait = InterruptibleWait()
    let deadline = Self.deadline(timeout, for: wait)
    let lifecycle = container.lifecycle
    let outcome = await withTaskCancellationHandler {
      await waitInterruptibly(wait, fd: fd, mode: mode) { participant in
        // Settled on the wait's own thread, so that `suspend()` never waits for this task to be
        // scheduled again.
        await wait.spawn(
          {
            participant.settle(
              Self.blockingLock(fd: fd, mode: mode, wait: wait), fd: fd, suspended: lifecycle.isSuspended)
          }, unstarted: { .failed($0) })
      }
    } onCancel: {
      wait.interrupt(.cancelled)
    }
    deadline?.cancel()
    wait.join()
    if case .interrupted(.cancelled) = outcome {
      returnDescriptor(fd)
      throw .cancelled("waiting for the lock '\(name)'")
    }
    return try finish(outcome, fd: fd, mode: mode, timeout: timeout)
  }

  /// Refuses a negative timeout.
  package static func check(_ timeout: Duration?) throws(LiaisonError) {
    if let timeout, timeout < .zero {
      throw LiaisonError(
        .invalidArgument, "The timeout \(timeout) is negative; give zero or more, or nil to wait as long as it takes.")
    }
  }

  /// Interrupts `wait` with ``InterruptibleWait/Reason/timedOut`` once `timeout` has passed.
  /// A Dispatch timer on the system's clock, not the container's: it interrupts a thread blocked
  /// in the kernel (`flock`), which no manual clock could wake.
  private static func deadline(_ timeout: Duration?, for wait: InterruptibleWait) -> DispatchWorkItem? {
    timeout.map { timeout in
      let item = DispatchWorkItem { wait.interrupt(.timedOut) }
      DispatchQueue.global().asyncAfter(
        deadline: .now() + .nanoseconds(Int(clamping: timeout.clampedNanoseconds)), execute: item)
      return item
    }
  }

  // MARK: - Descriptors

  private func takeDescriptor() throws(LiaisonError) -> CInt {
    if let fd = descriptors.takeIdle() { return fd }
    // `create: true` never returns nil.
    return try folder.openFile(name.rawValue, create: true)!
  }

  func returnDescriptor(_ fd: CInt) {
    descriptors.giveBack(fd, endingGrant: nil)
  }

  /// Makes the guard of a grant just taken on `fd`, or gives the grant up if the container is
  /// suspended. The grant is listed before the suspension is checked: a `suspend()` that starts
  /// after the check finds it (the lock is a member of the lifecycle from its making), and one
  /// that started before is seen by the check.
  private func makeGuard(fd: CInt, mode: LockMode) throws(LiaisonError) -> LockGuard {
    let held = LockGuard(lock: self, fd: fd, mode: mode)
    descriptors.add(held.grant)
    if container.lifecycle.isSuspended {
      held.unlock()
      throw Self.suspendedError(name)
    }
    return held
  }

  // MARK: - Waiting

  enum WaitOutcome: Sendable {
    case acquired
    case interrupted(InterruptibleWait.Reason)
    case failed(Errno)
  }

  /// Registers `wait` with the container so that `suspend()` interrupts it, runs `body`. A lock
  /// taken as a suspension began is given back before the wait settles, which that `suspend()`
  /// waits for (``WaitParticipant/finishSuspending()``).
  private func waitInterruptibly(
    _ wait: InterruptibleWait, fd: CInt, mode: LockMode, _ body: () -> WaitOutcome
  ) -> WaitOutcome {
    let participant = WaitParticipant(wait)
    guard container.lifecycle.join(participant) else { return .interrupted(.suspended) }
    defer { container.lifecycle.leave(participant) }
    return participant.settle(body(), fd: fd, suspended: container.lifecycle.isSuspended)
  }

  /// Like the blocking form; `body` settles the wait itself (``WaitParticipant/settle(_:fd:suspended:)``).
  private func waitInterruptibly(
    _ wait: InterruptibleWait, fd: CInt, mode: LockMode, _ body: (WaitParticipant) async -> WaitOutcome
  ) async -> WaitOutcome {
    let participant = WaitParticipant(wait)
    guard container.lifecycle.join(participant) else { return .interrupted(.suspended) }
    defer { container.lifecycle.leave(participant) }
    return await body(participant)
  }

  /// The waiting loop: blocks in `flock` until the lock is taken or the wait is interrupted.
  ///
  /// Where the interrupt signal cannot be used (``InterruptibleWait/canBlock``), it polls with
  /// `LOCK_NB` instead, pausing between attempts: a release is then seen within the pause (at
  /// most 5 ms) rather than at once, and an interruption likewise.
  static func blockingLock(fd: CInt, mode: LockMode, wait: InterruptibleWait) -> WaitOutcome {
    let operation = wait.canBlock ? mode.operation : mode.operation | LOCK_NB
    var pause: UInt32 = 50
    while true {
      if let reason = wait.interruption { return .interrupted(reason) }
      switch Syscall.lock(fd, operation) {
      case .success(false):
        pause = InterruptibleWait.pause(pause)
      case .success:
        if let reason = wait.interruption {
          Syscall.unlock(fd)
          return .interrupted(reason)
        }
        return .acquired
      case .failure(.interrupted):
        continue
      case .failure(let error):
        return .failed(error)
      }
    }
  }

  private func finish(_ outcome: WaitOutcome, fd: CInt, mode: LockMode, timeout: Duration?) throws(LiaisonError)
    -> LockGuard
  {
    switch outcome {
    case .acquired:
      return try makeGuard(fd: fd, mode: mode)
    case .interrupted(let reason):
      returnDescriptor(fd)
      switch reason {
      case .timedOut:
        throw LiaisonError(
          .timedOut,
          "Timed out after \(timeout.map { "\($0)" } ?? "waiting") for the lock '\(name)'; another holder still has it. "
            + "Try again later, or wait longer.",
          path: path)
      case .suspended, .cancelled:
        throw Self.suspendedError(name)
      }
    case .failed(let error):
      returnDescriptor(fd)
      throw LiaisonError.system(error, "lock", path: path)
    }
  }

  static func suspendedError(_ name: LiaisonName) -> LiaisonError {
    LiaisonError(
      .suspended,
      "The container is suspended, so the lock or claim '\(name)' was given up or refused. Call resume() first.")
  }
}

/// Lets `suspend()` interrupt a wait.
final class WaitParticipant: SuspensionParticipant {
  let wait: InterruptibleWait
  init(_ wait: InterruptibleWait) { self.wait = wait }
  private let settled = Locked(false)

  func suspend() { wait.interrupt(.suspended) }

  /// Returns once the wait has left the kernel and given back a lock it took as the suspension
  /// began (``settle(_:fd:suspended:)``).
  func finishSuspending() {
    wait.waitUntilFinished()
    while !settled.withLock({ $0 }) && wait.hasStarted { sched_yield() }
  }

  /// The wait's outcome, once a lock it took while the container was being suspended is given
  /// back (`suspended` is read after the wait ended): then ``finishSuspending()`` returns.
  func settle(_ outcome: ProcessLock.WaitOutcome, fd: CInt, suspended: Bool) -> ProcessLock.WaitOutcome {
    defer { settled.withLock { $0 = true } }
    guard case .acquired = outcome, suspended else { return outcome }
    Syscall.unlock(fd)
    return .interrupted(.suspended)
  }
  func resume() throws(LiaisonError) {}
}

/// What a probe of a lock found.
public enum LockState: Sendable, Hashable, CustomStringConvertible {
  /// Nobody holds the lock.
  case unlocked
  /// One or more shared holders have it.
  case shared
  /// One exclusive holder has it.
  case exclusive
  /// Not known: the system has no table of locks to read (Apple platforms), and a probe never
  /// takes the lock to find out.
  case unknown

  public var description: String {
    switch self {
    case .unlocked: "unlocked"
    case .shared: "held shared"
    case .exclusive: "held exclusive"
    case .unknown: "unknown (no lock table to read on this system)"
    }
  }
}

extension ProcessLock {
  /// Who holds the lock right now, read from the kernel's table of locks (`/proc/locks`) without
  /// taking the lock: looking never makes another process's ``tryLock(_:)`` fail or its wait
  /// longer. Meant for inspection (`liaison status`), not for deciding whether to lock: take the
  /// lock with ``tryLock(_:)`` instead.
  ///
  /// ``LockState/unknown`` where there is no such table (Apple platforms, a Linux without
  /// `/proc`), for a lock that was ever taken (one never taken has no file: unlocked). In a
  /// container's pid namespace (Docker) the kernel lists only the locks it can name a taker of
  /// there: a holder in another container reads ``LockState/unlocked``.
  ///
  /// - Throws: ``LiaisonError/Code/unsafeFile`` when something other than Liaison's file stands
  ///   at the lock's name.
  public func probe() throws(LiaisonError) -> LockState {
    guard let table = FileLockTable.read() else {
      // No table to read (Apple platforms): the file is still checked, as everywhere.
      return try folder.inspectFile(name.rawValue) == nil ? .unlocked : .unknown
    }
    return try probe(in: table)
  }

  /// The lock's state as `table` lists it: for listings, which read the table once.
  package func probe(in table: FileLockTable) throws(LiaisonError) -> LockState {
    guard let info = try folder.inspectFile(name.rawValue) else { return .unlocked }
    return table.state(of: FileKey(device: deviceNumber(info.st_dev), inode: UInt64(info.st_ino))) ?? .unlocked
  }
}

extension SharedContainer {
  /// Every lock in the container that has ever been taken, by name.
  public func locks() throws(LiaisonError) -> [ProcessLock] {
    try lockFolder.names().map { ProcessLock(name: $0, container: self) }
  }
}
