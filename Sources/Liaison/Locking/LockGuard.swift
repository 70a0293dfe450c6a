/// Proof that this process holds a ``ProcessLock``: the lock is held until ``unlock()`` is
/// called or the guard is released, and the kernel releases it if the process dies.
///
/// ```swift
/// if let held = try lock.tryLock() {
///   defer { held.unlock() }
///   // … only one process runs this at a time
/// }
/// ```
public final class LockGuard: Sendable {
  /// The mode the lock is held in.
  public let mode: LockMode
  private let lock: ProcessLock
  /// The descriptor holding the lock, or `nil` once released.
  private let descriptor: Locked<CInt?>

  init(lock: ProcessLock, fd: CInt, mode: LockMode) {
    self.lock = lock
    self.mode = mode
    self.descriptor = Locked(fd)
  }

  deinit { unlock() }

  /// The name of the lock held.
  public var name: LiaisonName { lock.name }

  /// Whether the lock is still held: `false` after ``unlock()``, and after
  /// ``SharedContainer/suspend()`` gave it up.
  public var isHeld: Bool { descriptor.withLock { $0 != nil } }

  /// Releases the lock. Calling it again does nothing.
  public func unlock() {
    guard let fd = descriptor.withLock({ $0.take() }) else { return }
    Syscall.unlock(fd)
    lock.returnDescriptor(fd)
    lock.container.lifecycle.leave(self)
  }
}

extension LockGuard {
  /// Lets the next program this process executes (`execve`) hold the lock: the descriptor that
  /// holds it stays open across the exec, so the lock lasts until that program, and every process
  /// it passes the descriptor on to, has ended. The `liaison lock` command runs its command so.
  package func passToExecutedProgram() throws(LiaisonError) {
    guard let fd = descriptor.withLock({ $0 }) else { return }
    if case .failure(let error) = Syscall.keepOpenAcrossExec(fd) {
      throw LiaisonError.system(error, "keep open", path: lock.path)
    }
  }
}

extension LockGuard: SuspensionParticipant {
  func suspend() { unlock() }
  func resume() throws(LiaisonError) {}
}
