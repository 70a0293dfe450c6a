#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Which files are `flock`-ed right now, as the kernel's table of locks (`/proc/locks`, Linux)
/// tells it: how inspection (`liaison status`, a presence's `holder`) learns whether a lock is
/// held without taking it, so that looking never makes another process's `tryLock` fail or its
/// claim wait.
///
/// The table is read whole, once per look or per listing. Apple platforms have no such table:
/// there ``read()`` returns `nil`, and inspection does without it (see ``Presence/holder``).
package struct FileLockTable {
  /// The strongest `flock` held on each listed file; waiters are not locks, and not listed.
  private let modes: [FileKey: LockState]

  /// Whether a file missing from the table is surely not locked. The kernel lists a lock only
  /// if its taker can be named in the pid namespace `/proc` belongs to: in the host's, every
  /// lock; in a container's, not those taken by a process of another container, nor those
  /// whose taker has exited leaving the lock to a descendant (the taker's pid is gone).
  let isComplete: Bool

  /// The table now; `nil` where there is none to read (Apple platforms, a Linux without `/proc`).
  package static func read() -> FileLockTable? {
    #if os(Linux) && !DarwinModel
      guard let text = readProcLocks() else { return nil }
      var modes: [FileKey: LockState] = [:]
      for line in text.split(separator: "\n") {
        // "1: FLOCK  ADVISORY  WRITE 2370 fe:00:16221289 0 EOF"; a waiter's line has "->".
        let fields = line.split(separator: " ")
        guard fields.count >= 6, fields[1] == "FLOCK", let key = fileKey(fields[5]) else { continue }
        let mode: LockState = fields[3] == "WRITE" ? .exclusive : .shared
        if modes[key] != .exclusive { modes[key] = mode }
      }
      return FileLockTable(modes: modes, isComplete: inHostPIDNamespace)
    #else
      return nil
    #endif
  }

  /// What the table says of the file `key`: `nil` when it lists no lock on it.
  func state(of key: FileKey) -> LockState? { modes[key] }

  #if os(Linux) && !DarwinModel
    /// The inode number of the host's pid namespace (`PROC_PID_INIT_INO`).
    private static let hostPIDNamespace: UInt64 = 0xEFFF_FFFC

    private static let inHostPIDNamespace: Bool = {
      var info = stat()
      return stat("/proc/self/ns/pid", &info) == 0 && UInt64(info.st_ino) == hostPIDNamespace
    }()

    /// `/proc/locks` whole, read until its end (its size reads as 0).
    private static func readProcLocks() -> String? {
      let fd = retryOnInterrupt { open("/proc/locks", O_RDONLY | O_CLOEXEC) }
      guard fd >= 0 else { return nil }
      defer { Syscall.close(fd) }
      var bytes: [UInt8] = []
      var chunk = [UInt8](repeating: 0, count: 65_536)
      while true {
        let count = chunk.withUnsafeMutableBytes { raw in
          retryOnInterrupt { Glibc.read(fd, raw.baseAddress, raw.count) }
        }
        if count < 0 { return nil }
        if count == 0 { break }
        bytes += chunk[..<count]
      }
      return String(decoding: bytes, as: UTF8.self)
    }

    /// The file of `MAJOR:MINOR:INODE` (major and minor in hex), as `stat` names it.
    private static func fileKey(_ field: Substring) -> FileKey? {
      let parts = field.split(separator: ":")
      guard parts.count == 3, let major = UInt64(parts[0], radix: 16), let minor = UInt64(parts[1], radix: 16),
        let inode = UInt64(parts[2])
      else { return nil }
      // glibc's makedev.
      let device =
        ((major & 0xFFFF_F000) << 32) | ((major & 0xFFF) << 8) | ((minor & 0xFFFF_FF00) << 12) | (minor & 0xFF)
      return FileKey(device: device, inode: inode)
    }
  #endif
}
