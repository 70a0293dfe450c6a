import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A folder Liaison owns inside the container, held open as a directory descriptor.
///
/// Every file in it is opened relative to that descriptor with `O_NOFOLLOW | O_CLOEXEC`, so a
/// symbolic link planted in the folder never redirects a read or a write, and the folder keeps
/// meaning the same directory even if its path is renamed underneath. Folders are created 0700 and
/// files 0600; a folder or file of ours found with looser modes is tightened. On Apple platforms a
/// folder made here gets the data protection class `completeUntilFirstUserAuthentication`, which
/// the files made in it take.
///
/// In a container this process may not write (a read-only mount, a keyboard extension without
/// Full Access), nothing is created or tightened, and the checks still run. A folder missing there
/// is **absent**: it lists nothing, holds no file, and a write into it throws
/// ``LiaisonError/Code/readOnly``, so that a reader sees "nothing there".
package final class PrivateFolder: Sendable {
  /// The descriptor of the folder, open for the life of this object; -1 for an absent folder
  /// (``exists``).
  package let descriptor: CInt
  /// The folder's path, for messages.
  package let path: String
  /// The folder's device and inode, the same in every process whatever path it was opened by.
  package let identity: String

  /// Why an absent folder could not be made (`EROFS`, `EACCES`, `EPERM`); `nil` for one that exists.
  private let absenceReason: Errno?

  private init(descriptor: CInt, path: String, identity: String, absenceReason: Errno? = nil) {
    self.descriptor = descriptor
    self.path = path
    self.identity = identity
    self.absenceReason = absenceReason
  }

  deinit { if exists { Syscall.close(descriptor) } }

  /// Whether the folder exists: `false` for a folder missing from a container this process may
  /// not write, which could not be created.
  package var exists: Bool { descriptor >= 0 }

  /// A folder missing from a read-only container: it lists nothing and holds no file.
  private static func absent(_ path: String, reason: Errno?) -> PrivateFolder {
    PrivateFolder(descriptor: -1, path: path, identity: "absent:" + path, absenceReason: reason)
  }

  /// Opens (creating it if needed) the folder `name` inside the directory `parent`.
  ///
  /// In a container this process may not write, a missing folder (or one inside an absent
  /// `parent`, -1) is returned absent (``exists`` is `false`) rather than created.
  package static func open(_ name: String, in parent: CInt, parentPath: String) throws(LiaisonError) -> PrivateFolder {
    let path = parentPath.hasSuffix("/") ? parentPath + name : parentPath + "/" + name
    if parent < 0 { return absent(path, reason: nil) }
    // Made only when missing: in a sandbox that lets this process read and not write, a `mkdir`
    // on a folder that exists is refused (`EPERM`) rather than answered `EEXIST`.
    var existing = stat()
    let missing = fstatat(parent, name, &existing, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT
    if missing, mkdirat(parent, name, 0o700) != 0, errno != EEXIST {
      let error = currentErrno()
      if error == .noSuchFileOrDirectory, let deleted = deletedFolderError(parent, path: parentPath) { throw deleted }
      // Refused (a read-only mount, a sandbox, a folder this user may not write): read as empty.
      if LiaisonError.meansReadOnly(error) { return absent(path, reason: error) }
      throw LiaisonError.system(error, "create the folder", path: path)
    }
    let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
    let fd: CInt
    switch Syscall.openAt(parent, name, flags) {
    case .success(let opened): fd = opened
    case .failure(let error) where error == .tooManySymbolicLinkLevels || error == .notDirectory:
      throw LiaisonError(
        .unsafeFile,
        "'\(path)' is not a folder Liaison made (a symbolic link or a file stands there). "
          + "Liaison never follows links in its folder; remove '\(path)' and try again.",
        errno: error, path: path)
    case .failure(let error):
      var info = stat()
      if error == .permissionDenied || error == .notPermitted,
        fstatat(parent, name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_uid != geteuid()
      {
        // The folder is private to another user: permissions are not what to check.
        throw ownedByAnotherUser(path, kind: "folder", owner: info.st_uid, errno: error)
      }
      throw LiaisonError.system(error, "open the folder", path: path)
    }
    let info: stat
    do {
      info = try checkOwnership(fd, path: path, kind: "folder", privateMode: 0o700)
    } catch {
      Syscall.close(fd)
      throw error
    }
    #if canImport(Darwin) || DarwinModel
      // A folder this process made (or found made by another since it looked, which sets it too
      // before using it) gets the class that an extension can open while the device is locked,
      // before any file is made in it: its files, SQLite's included, take the folder's class.
      if missing { ProtectionClass.setUntilFirstUnlock(fd) }
    #endif
    return PrivateFolder(descriptor: fd, path: path, identity: "\(deviceNumber(info.st_dev)).\(info.st_ino)")
  }

  /// Opens (creating it if needed) the folder `name` inside this one; absent when this one is.
  package func subfolder(_ name: String) throws(LiaisonError) -> PrivateFolder {
    if !exists { return Self.absent(path(of: name), reason: absenceReason) }
    return try Self.open(name, in: descriptor, parentPath: path)
  }

  /// Opens the folder `name` inside the directory `parent` if it exists, creating nothing.
  ///
  /// - Returns: the folder, or `nil` when nothing stands at that name.
  package static func openIfExists(
    _ name: String, in parent: CInt, parentPath: String
  ) throws(LiaisonError) -> PrivateFolder? {
    if parent < 0 { return nil }
    var info = stat()
    if fstatat(parent, name, &info, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT { return nil }
    return try open(name, in: parent, parentPath: parentPath)
  }

  /// The path of `name` in this folder, for messages.
  package func path(of name: String) -> String { path + "/" + name }

  /// The `notify(3)` name that writers of the file `name` ring on Apple platforms, scoped by
  /// this folder's identity so that two containers never share one.
  package func doorbell(for name: String) -> String { "liaison.\(identity).\(name)" }

  /// Opens the file `name` for reading and writing (or, unless `writing`, for reading only),
  /// creating it 0600 if `create` is set.
  ///
  /// A descriptor that only reads must be opened so: closing one opened for writing is an event
  /// of the file's watch on Linux (`IN_CLOSE_WRITE`), so a watcher that read through one would
  /// wake itself again at every read.
  ///
  /// - Returns: the descriptor, or `nil` when the file does not exist and `create` is not set.
  /// - Throws: ``LiaisonError/Code/unsafeFile`` when a symbolic link, a hard link, a folder or
  ///   another user's file stands at that name; on Apple platforms,
  ///   ``LiaisonError/Code/protectedDataUnavailable`` when the file's data protection
  ///   class refuses it while the device is locked.
  package func openFile(_ name: String, create: Bool, writing: Bool = true) throws(LiaisonError) -> CInt? {
    let filePath = path(of: name)
    if !exists {
      if create || writing { throw LiaisonError.readOnly(absenceReason, "create", path: filePath) }
      return nil
    }
    var flags = (writing ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK
    if create { flags |= O_CREAT }
    let fd: CInt
    switch Syscall.openAt(descriptor, name, flags, 0o600) {
    case .success(let opened): fd = opened
    case .failure(.noSuchFileOrDirectory) where !create:
      return nil
    case .failure(let error) where error == .tooManySymbolicLinkLevels || error == .isDirectory:
      throw LiaisonError(
        .unsafeFile,
        "'\(filePath)' is not a file Liaison made (a symbolic link or a folder stands there). "
          + "Liaison never follows links in its folder; remove '\(filePath)' and try again.",
        errno: error, path: filePath)
    case .failure(let error):
      if error == .noSuchFileOrDirectory, let deleted = Self.deletedFolderError(descriptor, path: path) {
        throw deleted
      }
      // On Apple platforms, an `EPERM` may be data protection's, while the device is locked.
      if let refusal = LiaisonError.protectedDataRefusal(error, opening: name, in: descriptor, path: filePath) {
        throw refusal
      }
      if (writing || create) && LiaisonError.meansReadOnly(error) {
        if let refusal = readOnlyRefusal(name, error: error, path: filePath) { throw refusal }
      }
      throw LiaisonError.system(error, "open", path: filePath)
    }
    do {
      _ = try Self.checkOwnership(fd, path: filePath, kind: "file", privateMode: 0o600)
    } catch {
      Syscall.close(fd)
      throw error
    }
    return fd
  }

  /// Whether this folder has been deleted since it was opened (its descriptor then names a
  /// folder with no links). A new folder made at the same path may even reuse its inode, and so
  /// its ``identity``: caches keyed by identity check this before trusting an entry.
  package var isDeleted: Bool {
    if !exists { return false }
    var info = stat()
    return fstat(descriptor, &info) != 0 || info.st_nlink == 0
  }

  /// Checks the file `name` as ``openFile(_:create:)`` does, without opening it: for the files
  /// that SQLite opens itself. Closing a descriptor drops every `fcntl` lock this process holds on
  /// its file, and SQLite's locks are such locks: a descriptor opened and closed here on a database
  /// that SQLite has open in this process would silently release them.
  ///
  /// - Returns: the file's status, or `nil` when it does not exist.
  /// - Throws: ``LiaisonError/Code/unsafeFile`` when a symbolic link, a hard link, a folder or
  ///   another user's file stands at that name.
  package func inspectFile(_ name: String) throws(LiaisonError) -> stat? {
    let filePath = path(of: name)
    if !exists { return nil }
    var info = stat()
    if fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) != 0 {
      let error = currentErrno()
      if error == .noSuchFileOrDirectory { return nil }
      throw LiaisonError.system(error, "inspect", path: filePath)
    }
    if info.st_mode & S_IFMT == S_IFLNK || info.st_mode & S_IFMT == S_IFDIR {
      throw LiaisonError(
        .unsafeFile,
        "'\(filePath)' is not a file Liaison made (a symbolic link or a folder stands there). "
          + "Liaison never follows links in its folder; remove '\(filePath)' and try again.",
        path: filePath)
    }
    // Not a link a moment ago; only a process of this user could swap one in since, in this 0700 folder.
    try Self.check(info, path: filePath, kind: "file") { fchmodat(descriptor, name, 0o600, 0) == 0 }
    return info
  }

  /// The error for an open of the file `name` for writing that the system refused with `error`
  /// (`EROFS`, `EACCES`, `EPERM`), when it means that this process may not write the container:
  /// always for `EROFS`; for the others, when the file is this user's (a sandbox, a mount or its
  /// mode refused it), or is to be made in this folder, which is this user's. `nil` when the file
  /// is another user's, or not a regular file: the caller reports the system's refusal.
  private func readOnlyRefusal(_ name: String, error: Errno, path filePath: String) -> LiaisonError? {
    if error == .readOnlyFileSystem { return LiaisonError.readOnly(error, "write", path: filePath) }
    var info = stat()
    if fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 {
      // Another user's file, or not a file: not a read-only container, but the system's refusal.
      guard info.st_uid == geteuid(), info.st_mode & S_IFMT == S_IFREG else { return nil }
    }
    return LiaisonError.readOnly(error, "write", path: filePath)
  }

  /// The names in this folder that follow the naming rule, sorted. Other entries are skipped.
  /// With a `suffix`, the names of the files called `NAME` + `suffix` (`notes` for
  /// `notes.sqlite`), so that a name of the longest length allowed is listed too.
  package func names(suffix: String = "") throws(LiaisonError) -> [LiaisonName] {
    if !exists { return [] }
    // fdopendir takes ownership of the descriptor it is given. A `dup` would share the folder
    // descriptor's offset with concurrent listings; opening "." gives this listing its own.
    let copy = retryOnInterrupt { openat(descriptor, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    guard copy >= 0, let directory = fdopendir(copy) else {
      let error = currentErrno()
      if copy >= 0 { Syscall.close(copy) }
      throw LiaisonError.system(error, "list", path: path)
    }
    defer { closedir(directory) }
    var names: [LiaisonName] = []
    while let entry = readdir(directory) {
      // The name up to its NUL only: an entry is as long as its name needs (`d_reclen`), so the
      // whole of `d_name` may reach past the end of what `readdir` read.
      let name = UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!
      let length = strlen(name.assumingMemoryBound(to: CChar.self))
      let fileName = String(decoding: UnsafeRawBufferPointer(start: name, count: length), as: UTF8.self)
      guard fileName.hasSuffix(suffix) else { continue }
      if let name = LiaisonName(fileName: String(fileName.dropLast(suffix.count))) { names.append(name) }
    }
    return names.sorted { $0.rawValue < $1.rawValue }
  }

  /// The error for a folder that was deleted while this process held it open, or `nil` when the
  /// folder `descriptor` is still there. Nothing can be created in a deleted folder (`ENOENT`),
  /// and Liaison does not make it again under running processes: their locks and signals would
  /// split in two, the files they hold open on one side and new ones on the other.
  private static func deletedFolderError(_ descriptor: CInt, path: String) -> LiaisonError? {
    guard case .success(let info) = Syscall.status(descriptor), info.st_nlink == 0 else { return nil }
    return LiaisonError(
      .system,
      "The folder '\(path)' was deleted while this process was using it. Liaison does not make it again under "
        + "running processes (their locks and signals would split in two): stop every process that uses the "
        + "container, then open the container again.",
      errno: .noSuchFileOrDirectory, path: path)
  }

  /// Refuses anything that is not ours and of the expected type; tightens loose modes.
  @discardableResult
  private static func checkOwnership(_ fd: CInt, path: String, kind: String, privateMode: mode_t) throws(LiaisonError)
    -> stat
  {
    let info: stat
    switch Syscall.status(fd) {
    case .success(let status): info = status
    case .failure(let error): throw LiaisonError.system(error, "inspect", path: path)
    }
    try check(info, path: path, kind: kind) { fchmod(fd, privateMode) == 0 }
    return info
  }

  /// Refuses `info` unless it is of the expected type, this user's and, for a file, has one link;
  /// tightens loose modes with `restrict`, which returns whether it succeeded.
  private static func check(_ info: stat, path: String, kind: String, restrict: () -> Bool) throws(LiaisonError) {
    let expectedType: mode_t = kind == "folder" ? S_IFDIR : S_IFREG
    if info.st_mode & S_IFMT != expectedType {
      throw LiaisonError(
        .unsafeFile, "'\(path)' is not a regular \(kind). Remove it so that Liaison can recreate it.", path: path)
    }
    if info.st_uid != geteuid() {
      throw ownedByAnotherUser(path, kind: kind, owner: info.st_uid, errno: nil)
    }
    if kind == "file" && info.st_nlink > 1 {
      throw LiaisonError(
        .unsafeFile,
        "'\(path)' has \(info.st_nlink) hard links; a file of Liaison's has one. Remove it so that Liaison can recreate it.",
        path: path)
    }
    if info.st_mode & 0o077 != 0 && !restrict() {
      let error = currentErrno()
      // A container this process may not write is read as it is: nothing is repaired there.
      if LiaisonError.meansReadOnly(error) { return }
      throw LiaisonError.system(error, "restrict the permissions of", path: path)
    }
  }

  /// The error for Liaison's folder or file at `path` that belongs to the user `owner`, not to
  /// this process's user: whose it is, by name and uid, and what to do.
  private static func ownedByAnotherUser(_ path: String, kind: String, owner: uid_t, errno: Errno?) -> LiaisonError {
    LiaisonError(
      .unsafeFile,
      "'\(path)' belongs to \(userDescription(owner)), but this process runs as \(userDescription(geteuid())). "
        + "Liaison keeps its \(kind)s private to the user who made them (mode \(kind == "folder" ? "0700" : "0600")), "
        + "so one container serves the processes of one user: run this as \(userName(owner) ?? "user \(owner)"), "
        + "or give each user a container of its own.",
      errno: errno, path: path)
  }

  /// `user UID (NAME)`, or `user UID` for a user the system cannot name.
  private static func userDescription(_ uid: uid_t) -> String {
    "user \(uid)" + (userName(uid).map { " (\($0))" } ?? "")
  }

  /// The login name of the user `uid`, or `nil` when the user database has none.
  private static func userName(_ uid: uid_t) -> String? {
    var entry = passwd()
    var found: UnsafeMutablePointer<passwd>?
    var buffer = [CChar](repeating: 0, count: 4096)
    guard getpwuid_r(uid, &entry, &buffer, buffer.count, &found) == 0, found != nil, let name = entry.pw_name else {
      return nil
    }
    return String(cString: name)
  }
}
