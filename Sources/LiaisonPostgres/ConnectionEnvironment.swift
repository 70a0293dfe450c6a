#if Postgres
  import Foundation
  import Liaison

  #if canImport(Glibc)
    import Glibc
  #elseif canImport(Darwin)
    import Darwin
  #endif

  /// What a PostgreSQL URL is read with besides its text, as libpq reads it: the environment's
  /// variables (`PGHOST`, `PGUSER`, `PGPASSWORD`, …), the name and home folder of the user this
  /// process runs as, and a reader of the password file. ``current`` is this process's; the
  /// tests give their own, so that reading a URL is a pure function of its inputs.
  struct ConnectionEnvironment: Sendable {
    /// The environment's variables; an empty one counts as unset.
    var variables: [String: String]
    /// The name of the user this process runs as (the default user name), if known.
    var userName: String?
    /// The home folder of that user, where `.pgpass` is looked for when `$HOME` is unset.
    var homeDirectory: String?
    /// Reads the password file at a path: its text, or `nil` when there is none to read (missing,
    /// not a regular file).
    var readPasswordFile: @Sendable (String) throws(LiaisonError) -> String?

    /// An environment with nothing in it: no variables, no user, no password file.
    static let empty = ConnectionEnvironment(
      variables: [:], userName: nil, homeDirectory: nil, readPasswordFile: { _ throws(LiaisonError) in nil })

    /// This process's environment, user and files.
    static var current: ConnectionEnvironment {
      // getpwuid_r: getpwuid's static buffer is not safe while other threads read it.
      var buffer = [CChar](repeating: 0, count: 16_384)
      let (userName, homeDirectory) = buffer.withUnsafeMutableBufferPointer { buffer -> (String?, String?) in
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        guard let start = buffer.baseAddress, getpwuid_r(geteuid(), &entry, start, buffer.count, &found) == 0,
          found != nil
        else {
          return (nil, nil)
        }
        return (String(cString: entry.pw_name), String(cString: entry.pw_dir))
      }
      return ConnectionEnvironment(
        variables: ProcessInfo.processInfo.environment, userName: userName, homeDirectory: homeDirectory,
        readPasswordFile: { path throws(LiaisonError) in try Self.readPasswordFile(at: path) })
    }

    /// The value of the variable `name`, unless it is unset or empty.
    subscript(_ name: String) -> String? {
      variables[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The path of the password file: `$PGPASSFILE`, else `.pgpass` in `$HOME`, else in the
    /// user's home folder.
    var passwordFilePath: String? {
      if let path = self["PGPASSFILE"] { return path }
      guard let home = self["HOME"] ?? homeDirectory, !home.isEmpty else { return nil }
      return home + (home.hasSuffix("/") ? "" : "/") + ".pgpass"
    }

    /// libpq's warning for a password file that others may read, which Liaison makes an error.
    static func loosePermissionsMessage(_ path: String) -> String {
      "password file \"\(path)\" has group or world access; permissions should be u=rw (0600) or less"
    }

    /// The text of the password file at `path`, checked as libpq checks it, and more strictly.
    ///
    /// Missing or unreadable: `nil`, as libpq ignores it. Not a regular file (a folder, a FIFO):
    /// `nil`, as libpq ignores it (and a FIFO never blocks the read). A symbolic link is followed
    /// (a `.pgpass` linked from a folder of dotfiles is common), and the file it leads to is
    /// checked.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/unsafeFile`` when the file has any permission for
    ///   its group or others (libpq's warning, as an error rather than a file silently skipped),
    ///   or when another user owns it (someone else's file, or a link to one, would choose the
    ///   password sent to the server).
    static func readPasswordFile(at path: String) throws(LiaisonError) -> String? {
      let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
      guard descriptor >= 0 else { return nil }
      defer { close(descriptor) }
      var info = stat()
      guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
      if info.st_mode & 0o077 != 0 {
        throw LiaisonError(
          .unsafeFile,
          "The \(loosePermissionsMessage(path)). Liaison refuses it, as libpq ignores it: make it private "
            + "(chmod 0600 '\(path)'), or give the password another way ($PGPASSWORD).", path: path)
      }
      guard info.st_uid == geteuid() else {
        throw LiaisonError(
          .unsafeFile,
          "The password file \"\(path)\" belongs to another user (uid \(info.st_uid)), not to the user this "
            + "process runs as (uid \(geteuid())): Liaison does not take passwords from someone else's file. Use a "
            + "file of your own (PGPASSFILE=PATH), mode 0600.", path: path)
      }
      var bytes: [UInt8] = []
      var buffer = [UInt8](repeating: 0, count: 4096)
      while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break }
        bytes += buffer[..<count]
        guard bytes.count <= 1 << 20 else {
          throw LiaisonError(
            .invalidArgument,
            "The password file \"\(path)\" is larger than 1 MiB: that is not a password file. Check $PGPASSFILE.",
            path: path)
        }
      }
      return String(decoding: bytes, as: UTF8.self)
    }
  }
#endif
