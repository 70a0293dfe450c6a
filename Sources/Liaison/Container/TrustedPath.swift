#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
#if DarwinModel
  import DarwinModel

  // In the Darwin model, the model's `fcntl(F_GETPATH)` (Tests/DarwinModel).
  private func fcntl(_ descriptor: CInt, _ command: CInt, _ pointer: UnsafeMutableRawPointer) -> CInt {
    DarwinModel.fcntl(descriptor, command, pointer)
  }
#endif

extension PrivateFolder {
  /// The path by which SQLite may open the file `name` of this folder, once checked that no
  /// other user can redirect it.
  ///
  /// Liaison opens its own files relative to the folder's descriptor, but SQLite opens its
  /// database, `-wal` and `-shm` by path, and opens them again later (a pool's new connection,
  /// a log made anew after a checkpoint). A user who may write any folder on that path could
  /// rename a folder away between a check and an open, and put one of theirs in its place. So the
  /// path given to SQLite is the folder's real path (read from its descriptor, with no symbolic
  /// link in it), and every folder on it, from `/` down, must belong to this process's user or to
  /// root and be writable by no one else, as OpenSSH's `StrictModes` requires of `~/.ssh`. A
  /// folder with the sticky bit (`/tmp`) may be writable by all: others may add entries there, but
  /// not rename or remove this user's. Only this user and root can then change the path, and it
  /// stays safe for as long as the database is open.
  ///
  /// - Throws: ``LiaisonError/Code/unsafeFile`` naming the folder another user can write, and
  ///   whose it is.
  package func trustedPath(of name: String) throws(LiaisonError) -> String {
    if !exists { throw LiaisonError.readOnly(nil, "create", path: path(of: name)) }
    let real = try realPath()
    var folder = ""
    var components = real.split(separator: "/", omittingEmptySubsequences: true).map(String.init)[...]
    var info = stat()
    while true {
      let current = folder.isEmpty ? "/" : folder
      guard lstat(current, &info) == 0 else {
        throw LiaisonError.system(currentErrno(), "check the folders on the path of", path: path)
      }
      guard info.st_mode & S_IFMT == S_IFDIR else {
        throw LiaisonError(
          .unsafeFile,
          "'\(current)', on the path of '\(path)', stopped being a folder while Liaison checked it (another process "
            + "renamed it). Find out who changes it, then try again.",
          path: current)
      }
      let isLast = components.isEmpty
      try Self.checkNoOtherUserCanRedirect(info, folder: current, storeFolder: path, last: isLast)
      guard let next = components.popFirst() else { break }
      folder += "/" + next
    }
    var opened = stat()
    guard fstat(descriptor, &opened) == 0, opened.st_dev == info.st_dev, opened.st_ino == info.st_ino else {
      throw LiaisonError(
        .unsafeFile,
        "The folder '\(path)' was moved while Liaison checked its path ('\(real)' is another folder now). Find out "
          + "who moves it, then try again.",
        path: path)
    }
    return real + "/" + name
  }

  /// This folder's path with no symbolic link in it, read from its descriptor.
  private func realPath() throws(LiaisonError) -> String {
    if isDeleted {
      throw LiaisonError(
        .system,
        "The folder '\(path)' was deleted while this process was using it: stop every process that uses the "
          + "container, then open the container again.",
        errno: .noSuchFileOrDirectory, path: path)
    }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    #if canImport(Darwin) || DarwinModel
      guard fcntl(descriptor, F_GETPATH, &buffer) != -1 else {
        throw LiaisonError.system(currentErrno(), "find the real path of", path: path)
      }
    #else
      let count = readlink("/proc/self/fd/\(descriptor)", &buffer, buffer.count - 1)
      guard count > 0 else {
        throw LiaisonError.system(currentErrno(), "find the real path (through /proc/self/fd) of", path: path)
      }
    #endif
    let real = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    guard real.hasPrefix("/") else {
      throw LiaisonError(
        .system, "The real path of the folder '\(path)' could not be read (the system gave '\(real)').", path: path)
    }
    return real
  }

  /// Refuses `folder` (of status `info`) unless only this process's user or root can change
  /// which folder its entries name.
  private static func checkNoOtherUserCanRedirect(
    _ info: stat, folder: String, storeFolder: String, last: Bool
  ) throws(LiaisonError) {
    let advice =
      "so it could redirect the files SQLite opens by path under '\(storeFolder)'. Keep the container in a folder "
      + "that only you (or root) can write, all the way up, or run as that folder's owner."
    if info.st_uid != 0 && info.st_uid != geteuid() {
      throw LiaisonError(
        .unsafeFile, "'\(folder)' belongs to \(userDescription(info.st_uid)), \(advice)", path: folder)
    }
    let othersMayWrite = info.st_mode & 0o022 != 0
    let sticky = info.st_mode & S_ISVTX != 0
    if othersMayWrite && (last || !sticky) {
      let mode = String(info.st_mode & 0o7777, radix: 8)
      throw LiaisonError(
        .unsafeFile,
        "'\(folder)' can be written by other users (mode \(mode)), \(advice) (A folder with the sticky bit, as "
          + "/tmp has, is accepted.)",
        path: folder)
    }
  }
}

/// `user 'name' (uid N)`, or `user N` when the user has no name.
package func userDescription(_ uid: uid_t) -> String {
  var entry = passwd()
  var result: UnsafeMutablePointer<passwd>? = nil
  var buffer = [CChar](repeating: 0, count: 4096)
  guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else {
    return "user \(uid)"
  }
  return "user '\(String(cString: name))' (uid \(uid))"
}
