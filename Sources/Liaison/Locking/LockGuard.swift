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
  /// What a grant of the lock is: its descriptor and how it ended.
  struct GrantState: Sendable {
    /// The descriptor holding the lock, or `nil` once released.
    var descriptor: CInt?
    /// This grant's fencing token, once read.
    var fencingToken: UInt64?
    var end = LossState()
  }

  /// The grant's state, which the guard shares with its lock's list of grants: a
  /// ``SharedContainer/suspend()`` ends the grant through the lock, and the guard sees it ended.
  typealias Grant = Locked<GrantState>

  /// The mode the lock is held in.
  public let mode: LockMode
  private let lock: ProcessLock
  let grant: Grant

  init(lock: ProcessLock, fd: CInt, mode: LockMode) {
    self.lock = lock
    self.mode = mode
    self.grant = Locked(GrantState(descriptor: fd))
  }

  deinit { unlock() }

  /// The name of the lock held.
  public var name: LiaisonName { lock.name }

  /// Whether the lock is still held: `false` after ``unlock()``, and after
  /// ``SharedContainer/suspend()`` gave it up.
  public var isHeld: Bool { grant.withLock { $0.descriptor != nil } }

  /// Why the lock was lost, once it was: ``SharedContainer/suspend()`` gave it up (code
  /// ``LiaisonError/Code/lost``). `nil` while held and after ``unlock()``. A local lock is lost in
  /// no other way: the kernel keeps it for as long as this process lives.
  public var loss: LiaisonError? { grant.withLock { $0.end.loss } }

  /// Waits until the lock is lost, and returns why (see ``loss``); returns `nil` once it is
  /// unlocked instead.
  ///
  /// - Throws: ``LiaisonError/Code/cancelled`` when the task is cancelled first.
  public func waitForLoss() async throws(LiaisonError) -> LiaisonError? {
    try await grant.waitForLoss(\.end, what: "waiting for the loss of the lock '\(name)'")
  }

  /// Releases the lock. Calling it again does nothing.
  public func unlock() {
    grant.release(of: lock.descriptors, lost: nil)
  }

  /// This grant's **fencing token**: a number larger than every token an earlier holder of this
  /// lock read, so that a resource that remembers the largest token it has seen can refuse a
  /// holder whose lock ended without its knowing (a process paused by a debugger or `SIGSTOP`
  /// past a `suspend()`, or on PostgreSQL, past the end of its connection).
  ///
  /// It costs nothing until it is read: the first read adds one to the lock's counter, a file of
  /// Liaison's own beside the lock's (never the lock's file, which other tools sharing the lock,
  /// such as `flock(1)`, may write), under the lock; later reads return the same number. Tokens
  /// are 1, 2, 3, … per lock name, for as long as the counter's file exists.
  ///
  /// ```swift
  /// let held = try await lock.lock()
  /// let token = try held.fencingToken()
  /// // UPDATE report SET body = ?, token = ? WHERE id = ? AND token <= ?
  /// ```
  ///
  /// - Throws: ``LiaisonError/Code/invalidArgument`` for a shared lock (several holders at once
  ///   have no order); ``LiaisonError/Code/lost`` once the lock is no longer held;
  ///   ``LiaisonError/Code/corruptFile`` when the counter's file holds something other than a
  ///   token (remove that file while nobody uses the lock).
  public func fencingToken() throws(LiaisonError) -> UInt64 {
    guard mode == .exclusive else {
      throw LiaisonError(
        .invalidArgument,
        "The lock '\(name)' is held shared: only an exclusive lock has a fencing token. Take it exclusive to "
          + "guard a write with a token.")
    }
    return try grant.withLock { state throws(LiaisonError) -> UInt64 in
      if let token = state.fencingToken { return token }
      guard let fd = state.descriptor else {
        throw state.end.loss
          ?? LiaisonError(.lost, "The lock '\(name)' was unlocked: a fencing token is read while the lock is held.")
      }
      let token = try FencingCounter.next(lock, lockDescriptor: fd)
      state.fencingToken = token
      return token
    }
  }
}

extension LockGuard {
  /// Lets the next program this process executes (`execve`) hold the lock: the descriptor that
  /// holds it stays open across the exec, so the lock lasts until that program, and every process
  /// it passes the descriptor on to, has ended. The `liaison lock` command runs its command so.
  package func passToExecutedProgram() throws(LiaisonError) {
    guard let fd = grant.withLock({ $0.descriptor }) else { return }
    if case .failure(let error) = Syscall.keepOpenAcrossExec(fd) {
      throw LiaisonError.system(error, "keep open", path: lock.path)
    }
  }
}

extension Locked where Value == LockGuard.GrantState {
  /// Ends the grant, once: releases its `flock`, gives its descriptor back to its lock's
  /// `descriptors`, and tells those waiting for its loss (`loss` is `nil` for an unlock).
  func release(of descriptors: LockDescriptors, lost loss: LiaisonError?) {
    let (fd, waiters) = withLock { state in (state.descriptor.take(), state.end.end(loss)) }
    waiters.resumeAll(loss)
    guard let fd else { return }
    Syscall.unlock(fd)
    descriptors.giveBack(fd, endingGrant: self)
  }
}

/// The fencing-token counter of a lock: a file of Liaison's own, `.fencing-tokens/NAME` in the
/// lock's folder, holding the last token given as decimal digits and a newline. It is read and
/// written only by the holder of the exclusive lock, so it needs no lock of its own; the lock's
/// file is left to the lock alone, whose content other tools sharing it (`flock(1)` writes
/// `pid=…` into its file) may write as they like.
///
/// A missing or empty counter counts from the counter that versions before it kept in the lock's
/// file, read once, if that file holds one (decimal digits and a newline), else from 0: tokens
/// keep growing across the upgrade.
package enum FencingCounter {
  /// The folder of counters, inside a lock's folder: its leading dot keeps it out of the listing
  /// of locks.
  package static let folderName = ".fencing-tokens"
  static let maximumLength = 21

  /// Adds one to the counter of `lock`, whose exclusive lock the caller holds on `lockDescriptor`,
  /// and returns the new value.
  static func next(_ lock: ProcessLock, lockDescriptor: CInt) throws(LiaisonError) -> UInt64 {
    let counters = try lock.folder.subfolder(folderName)
    let path = counters.path(of: lock.name.rawValue)
    // `create: true` never returns nil.
    let fd = try counters.openFile(lock.name.rawValue, create: true)!
    defer { Syscall.close(fd) }
    let last: UInt64
    switch try read(fd, path: path) {
    case .counter(let value):
      last = value
    case .empty:
      // Before the counter had a file of its own, the lock's file held it. Anything else there is
      // another tool's, and ignored.
      if case .counter(let value) = try? read(lockDescriptor, path: lock.path) { last = value } else { last = 0 }
    case .other:
      throw LiaisonError(
        .corruptFile,
        "The fencing-token counter '\(path)' holds something other than a token, so no token larger than every "
          + "earlier one can be given. Remove the file while no process uses the lock '\(lock.name)' (tokens then "
          + "start again at 1, so reset what checks them too).", path: path)
    }
    let token = last + 1
    if case .failure(let error) = Syscall.write(fd, Array("\(token)\n".utf8), at: 0) {
      throw LiaisonError.system(error, "write", path: path)
    }
    return token
  }

  /// What a counter's file holds.
  private enum Stored {
    case empty
    /// A counter below `UInt64.max`, which can grow.
    case counter(UInt64)
    case other
  }

  private static func read(_ fd: CInt, path: String) throws(LiaisonError) -> Stored {
    let bytes: [UInt8]
    switch Syscall.read(fd, count: maximumLength + 1) {
    case .success(let read): bytes = read
    case .failure(let error): throw LiaisonError.system(error, "read", path: path)
    }
    if bytes.isEmpty { return .empty }
    guard bytes.count <= maximumLength, bytes.last == UInt8(ascii: "\n"),
      let value = UInt64(String(decoding: bytes.dropLast(), as: UTF8.self)), value < UInt64.max
    else { return .other }
    return .counter(value)
  }
}
