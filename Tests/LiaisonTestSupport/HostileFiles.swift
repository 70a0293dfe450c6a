// Helpers for the tests that plant hostile files in a container: damaged content, other owners,
// loose modes, links, read-only folders.

import Foundation

#if canImport(Glibc)
  import CLiaison
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The user id the tests give files that must belong to "another user" (`nobody`).
public let anotherUserID: uid_t = 65534

/// Whether this process runs as root, which the tests need to give a file to another user.
public let isRoot = geteuid() == 0

/// The bytes of the file at `path`.
public func fileBytes(_ path: String) throws -> [UInt8] {
  [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// Replaces the content of the existing file at `path` with `bytes`, in place: the file keeps its
/// inode, owner and mode, as when another process writes into it.
public func overwrite(_ path: String, with bytes: [UInt8]) throws {
  let fd = open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC)
  guard fd >= 0 else { throw PeerError("cannot open \(path): errno \(errno)") }
  defer { close(fd) }
  let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
  guard written == bytes.count else { throw PeerError("cannot write \(path): errno \(errno)") }
}

/// Writes `text` to a new file at `path`, readable and writable by its owner only (0600).
public func writePrivateFile(_ path: String, _ text: String) throws {
  let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
  guard fd >= 0 else { throw PeerError("cannot create \(path): errno \(errno)") }
  defer { close(fd) }
  let bytes = Array(text.utf8)
  let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
  guard written == bytes.count else { throw PeerError("cannot write \(path): errno \(errno)") }
}

/// Cuts the file at `path` to `size` bytes, in place.
public func truncateFile(_ path: String, to size: Int) throws {
  guard truncate(path, off_t(size)) == 0 else { throw PeerError("cannot truncate \(path): errno \(errno)") }
}

/// Bytes that are no file format at all: the same every run.
public func garbage(count: Int) -> [UInt8] {
  var state: UInt64 = 0x9E37_79B9_7F4A_7C15
  return (0..<count).map { _ in
    state ^= state << 13
    state ^= state >> 7
    state ^= state << 17
    return UInt8(truncatingIfNeeded: state)
  }
}

/// Gives the file or folder at `path` (not following a link) to `user`.
public func changeOwner(_ path: String, to user: uid_t) throws {
  guard lchown(path, user, gid_t(user)) == 0 else { throw PeerError("cannot chown \(path): errno \(errno)") }
}

/// Gives `path` and everything under it to `user`.
public func changeOwnerRecursively(_ path: String, to user: uid_t) throws {
  try changeOwner(path, to: user)
  guard let enumerator = FileManager.default.enumerator(atPath: path) else { return }
  for case let relative as String in enumerator {
    try changeOwner(path + "/" + relative, to: user)
  }
}

/// The permission bits of `path`, not following a link.
public func permissionBits(_ path: String) throws -> mode_t {
  var info = stat()
  guard lstat(path, &info) == 0 else { throw PeerError("cannot stat \(path): errno \(errno)") }
  return info.st_mode & 0o7777
}

/// The owner of `path`, not following a link.
public func owner(_ path: String) throws -> uid_t {
  var info = stat()
  guard lstat(path, &info) == 0 else { throw PeerError("cannot stat \(path): errno \(errno)") }
  return info.st_uid
}

/// Sets the permission bits of `path`.
public func setPermissions(_ path: String, _ mode: mode_t) throws {
  guard chmod(path, mode) == 0 else { throw PeerError("cannot chmod \(path): errno \(errno)") }
}

/// Replaces whatever stands at `path` with a symbolic link to `target`.
public func plantSymbolicLink(at path: String, to target: String) throws {
  try? FileManager.default.removeItem(atPath: path)
  try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
}

/// Replaces whatever stands at `path` with a hard link to the file `target`.
public func plantHardLink(at path: String, to target: String) throws {
  try? FileManager.default.removeItem(atPath: path)
  try FileManager.default.linkItem(atPath: target, toPath: path)
}

/// The test peer started as user `nobody` by `setpriv`, on a container that user owns.
///
/// Root bypasses permission bits, so a read-only folder can only be shown to a process of another
/// user. `setpriv` (util-linux, on every Debian) changes the user and group ids and drops every
/// capability and supplementary group before it executes the peer: nothing of root's is left.
public final class UnprivilegedPeer: @unchecked Sendable {
  public let child: ChildProcess
  /// The peer's first line: `ready PID`, or `error CODE: MESSAGE` when it could not open the
  /// container.
  public let greeting: String

  public static var isAvailable: Bool { isRoot && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") }

  public init(container: String) throws {
    child = try ChildProcess(
      "/usr/bin/setpriv",
      [
        "--reuid=\(anotherUserID)", "--regid=\(anotherUserID)", "--clear-groups", "--",
        productsDirectory().appendingPathComponent("LiaisonTestPeer").path, container,
      ])
    greeting = try child.readLine()
  }

  /// Sends `command` with `arguments` and returns the whole answer line, `ok …` or `error …`.
  public func ask(_ command: PeerCommand, _ arguments: any CustomStringConvertible...) throws -> String {
    child.write(command.line(arguments))
    return try child.readLine()
  }
}

/// Takes what a claim being made holds before its record is written: the file's exclusive `flock`
/// and, on Linux, the claim's mark, a lock on its first byte that looks test without taking
/// (Liaison's `Syscall.markClaimed`). Waits for the `flock` when `waiting`.
///
/// - Returns: whether both were taken.
public func holdLikeAClaimBeingMade(_ fd: CInt, waiting: Bool = false) -> Bool {
  guard flock(fd, waiting ? LOCK_EX : LOCK_EX | LOCK_NB) == 0 else { return false }
  #if os(Linux)
    return cliaison_ofd_lock(fd) == 0
  #else
    return true
  #endif
}
