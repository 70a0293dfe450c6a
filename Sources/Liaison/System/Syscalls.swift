// Thin Swift wrappers over the system calls Liaison uses. Each retries on EINTR where that is
// the right thing to do and reports failure as an `Errno`; callers turn that into a
// `LiaisonError` that names the file.

import SystemPackage

#if canImport(Glibc)
  import CLiaison
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
#if DarwinModel
  import DarwinModel

  // In the Darwin model, Liaison's `flock` and `close` are the model's (Tests/DarwinModel), which
  // report the releases of locks as XNU does.
  private func flock(_ fd: CInt, _ operation: CInt) -> CInt { DarwinModel.flock(fd, operation) }
  // And `openat` the model's: a file made takes its folder's protection class, and a file of a
  // strict class is refused while the model's device is locked.
  private func openat(_ directory: CInt, _ name: String, _ flags: CInt, _ mode: mode_t) -> CInt {
    DarwinModel.openat(directory, name, flags, mode)
  }
#endif

/// The current thread's `errno`, as an `Errno`.
@inline(__always)
package func currentErrno() -> Errno { Errno(rawValue: errno) }

/// Runs `body` until it does not fail with `EINTR`.
@inline(__always)
package func retryOnInterrupt<T: FixedWidthInteger>(_ body: () -> T) -> T {
  while true {
    let result = body()
    if result == -1 && errno == EINTR { continue }
    return result
  }
}

/// A file's device number (`st_dev`), as the same `UInt64` in every process. `dev_t` is unsigned
/// on Linux but an `Int32` on Apple platforms, where `UInt64(st_dev)` would trap on a negative
/// device number; its bits are kept instead.
///
/// (A function of `dev_t`, not an extension of `stat`: glibc's headers are not modular, so the C
/// type `stat` seen by another module of this package may be another Swift type, depending on
/// which module imported the header first.)
package func deviceNumber(_ device: dev_t) -> UInt64 { UInt64(truncatingIfNeeded: device) }

package enum Syscall {
  /// `openat(2)` relative to a directory descriptor.
  static func openAt(_ directory: CInt, _ name: String, _ flags: CInt, _ mode: mode_t = 0) -> Result<CInt, Errno> {
    let fd = retryOnInterrupt { openat(directory, name, flags, mode) }
    return fd >= 0 ? .success(fd) : .failure(currentErrno())
  }

  /// `fstat(2)`.
  static func status(_ fd: CInt) -> Result<stat, Errno> {
    var info = stat()
    return fstat(fd, &info) == 0 ? .success(info) : .failure(currentErrno())
  }

  /// `flock(2)`: returns `true` when the lock was taken, `false` when `LOCK_NB` was given and
  /// another open file description holds a conflicting lock. Does not retry on `EINTR`, so that a
  /// blocked wait can be interrupted; the caller decides.
  static func lock(_ fd: CInt, _ operation: CInt) -> Result<Bool, Errno> {
    if flock(fd, operation) == 0 { return .success(true) }
    let error = currentErrno()
    return error == .wouldBlock ? .success(false) : .failure(error)
  }

  /// `flock(fd, LOCK_UN)`. Unlocking a descriptor this process holds cannot fail for a reason
  /// the caller could act on. (On Apple platforms every release posts `NOTE_FUNLOCK` to the file's
  /// watchers, this process's own included.)
  package static func unlock(_ fd: CInt) {
    _ = retryOnInterrupt { flock(fd, LOCK_UN) }
  }

  #if os(Linux) && !DarwinModel
    /// Marks the file open on `fd` as claimed with an open-file-description lock on its first
    /// byte (see `cliaison_ofd_lock`), which a look tests without taking anything. Only ever
    /// taken by the holder of the file's exclusive `flock`, so it never waits.
    static func markClaimed(_ fd: CInt) -> Result<Void, Errno> {
      cliaison_ofd_lock(fd) == 0 ? .success(()) : .failure(currentErrno())
    }

    /// Removes the mark of ``markClaimed(_:)``.
    static func unmarkClaimed(_ fd: CInt) { _ = cliaison_ofd_unlock(fd) }

    /// Whether another open file has the mark of ``markClaimed(_:)`` on the file open on `fd`;
    /// `nil` when the system cannot tell.
    static func isMarkedClaimed(_ fd: CInt) -> Bool? {
      switch cliaison_ofd_is_locked(fd) {
      case 1: true
      case 0: false
      default: nil
      }
    }
  #endif

  /// Reads up to `count` bytes at offset 0 of a small regular file with **one** `pread(2)`. On a
  /// local file system such a read returns fewer bytes only at the end of the file, so the second
  /// call that ``read(_:count:offset:)`` makes to see the end is not needed; a network file system
  /// may return fewer, and the caller decides whether to read on.
  static func readSmallFile(_ fd: CInt, count: Int) -> Result<[UInt8], Errno> {
    var buffer = [UInt8](repeating: 0, count: count)
    let n = buffer.withUnsafeMutableBytes { raw in retryOnInterrupt { pread(fd, raw.baseAddress!, count, 0) } }
    if n < 0 { return .failure(currentErrno()) }
    buffer.removeSubrange(n...)
    return .success(buffer)
  }

  /// Reads up to `count` bytes at `offset` with `pread(2)`.
  static func read(_ fd: CInt, count: Int, offset: Int = 0) -> Result<[UInt8], Errno> {
    var buffer = [UInt8](repeating: 0, count: count)
    var filled = 0
    while filled < count {
      let n = buffer.withUnsafeMutableBytes { raw in
        retryOnInterrupt { pread(fd, raw.baseAddress! + filled, count - filled, off_t(offset + filled)) }
      }
      if n < 0 { return .failure(currentErrno()) }
      if n == 0 { break }
      filled += n
    }
    buffer.removeSubrange(filled...)
    return .success(buffer)
  }

  /// Replaces the whole content of `fd` with `bytes`: writes them at offset 0, then cuts the file
  /// to their length. A reader that takes no lock sees the old content, the new, or a mix of both
  /// (which a record's format tells apart), never an empty file unless `bytes` is empty.
  static func replaceContent(_ fd: CInt, with bytes: [UInt8]) -> Result<Void, Errno> {
    if case .failure(let error) = write(fd, bytes, at: 0) { return .failure(error) }
    if retryOnInterrupt({ ftruncate(fd, off_t(bytes.count)) }) != 0 { return .failure(currentErrno()) }
    return .success(())
  }

  /// Writes all of `bytes` at `offset` with `pwrite(2)`, leaving the rest of the file as it is.
  static func write(_ fd: CInt, _ bytes: [UInt8], at offset: Int) -> Result<Void, Errno> {
    var written = 0
    while written < bytes.count {
      let n = bytes.withUnsafeBytes { raw in
        retryOnInterrupt { pwrite(fd, raw.baseAddress! + written, bytes.count - written, off_t(offset + written)) }
      }
      if n < 0 { return .failure(currentErrno()) }
      written += n
    }
    return .success(())
  }

  /// Closes `fd`. A failed close of a file Liaison only locked or read loses nothing.
  package static func close(_ fd: CInt) {
    #if canImport(Darwin)
      _ = Darwin.close(fd)
    #elseif DarwinModel
      _ = DarwinModel.close(fd)  // the model's: the close of a locked descriptor is a NOTE_FUNLOCK
    #else
      _ = Glibc.close(fd)
    #endif
  }

  /// Clears `FD_CLOEXEC` on `fd`, so that a program this process executes inherits it.
  static func keepOpenAcrossExec(_ fd: CInt) -> Result<Void, Errno> {
    fcntl(fd, F_SETFD, 0) == 0 ? .success(()) : .failure(currentErrno())
  }

  /// The process id of this process (on Linux, read from the kernel once: see
  /// `cliaison_process_id`).
  static var processID: Int32 {
    #if os(Linux) && !DarwinModel
      cliaison_process_id()
    #else
      getpid()
    #endif
  }

  /// Whether a process with this id exists (it may belong to another user).
  static func processExists(_ pid: Int32) -> Bool {
    guard pid > 0 else { return false }
    return kill(pid, 0) == 0 || errno == EPERM
  }
}
