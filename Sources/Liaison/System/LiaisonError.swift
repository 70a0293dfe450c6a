import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The error every Liaison operation throws.
///
/// Each error carries a ``code`` to switch on, a ``message`` that says what went wrong and what
/// to do about it, and where it applies the underlying system error and the file or name
/// involved.
///
/// ```swift
/// do {
///   let token = try await lock.lock(timeout: .seconds(2))
/// } catch let error as LiaisonError where error.code == .timedOut {
///   print("someone else is refreshing; try again later")
/// }
/// ```
public struct LiaisonError: Error, Sendable, CustomStringConvertible {
  /// What kind of failure this is. New codes may be added in later versions.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    private enum Value: String, Sendable {
      case invalidName = "invalid name"
      case invalidArgument = "invalid argument"
      case unsafeFile = "unsafe file"
      case corruptFile = "corrupt file"
      case timedOut = "timed out"
      case suspended = "suspended"
      case alreadyClaimed = "already claimed"
      case claimInProgress = "claim in progress"
      case leaseLost = "lease lost"
      case typeMismatch = "type mismatch"
      case tooLarge = "too large"
      case incompatibleSchema = "incompatible schema"
      case system = "system error"
      case closed = "closed"
      case lost = "lost"
      case unavailable = "unavailable"
      case staleFencingToken = "stale fencing token"
      case cancelled = "cancelled"
      case readOnly = "read-only"
      case protectedDataUnavailable = "protected data unavailable"
    }
    private let value: Value
    private init(_ value: Value) { self.value = value }

    /// A name broke the naming rule; the message states the rule.
    public static let invalidName = Code(.invalidName)
    /// An argument other than a name was out of range (a negative timeout, say).
    public static let invalidArgument = Code(.invalidArgument)
    /// A file in the container is not what Liaison made: a symbolic link, a hard link, a
    /// directory, or a file or folder owned by another user (`.liaison` itself, for a process of
    /// another user, which cannot enter it). Liaison refuses to touch it; the message names it.
    public static let unsafeFile = Code(.unsafeFile)
    /// A file in the container holds content Liaison cannot read.
    public static let corruptFile = Code(.corruptFile)
    /// A wait ran out of time before the lock or claim could be had.
    public static let timedOut = Code(.timedOut)
    /// The container was suspended with ``SharedContainer/suspend()``: the operation was given
    /// up, or refused, until ``SharedContainer/resume()``.
    public static let suspended = Code(.suspended)
    /// Another holder has the presence; the message names it.
    public static let alreadyClaimed = Code(.alreadyClaimed)
    /// The presence is active but its holder is not known yet: a process has taken the
    /// presence's lock and not yet written its record (a claim being made, by a process the
    /// system may have descheduled there), or another program locks the file. Read again
    /// shortly; the file is in use and must not be deleted.
    public static let claimInProgress = Code(.claimInProgress)
    /// A lease lapsed and another process claimed the presence before it was renewed.
    public static let leaseLost = Code(.leaseLost)
    /// A stored value cannot be read as the type asked for.
    public static let typeMismatch = Code(.typeMismatch)
    /// A value is larger than the limit; the message states the limit.
    public static let tooLarge = Code(.tooLarge)
    /// A database was migrated by a newer version of the program, to a schema this version does
    /// not know; nothing was changed.
    public static let incompatibleSchema = Code(.incompatibleSchema)
    /// A system call failed; ``LiaisonError/errno`` says which error.
    public static let system = Code(.system)
    /// The object was closed by its owner (a mailbox receiver's `close()`, say): make a new one.
    public static let closed = Code(.closed)
    /// A held lock or claim was taken away without its holder releasing it: its PostgreSQL
    /// connection ended (server restart, cut network), or the container was suspended. Whatever
    /// runs under it must stop; another process may hold it now.
    public static let lost = Code(.lost)
    /// The server could not be reached, or the connection to it ended while the operation ran:
    /// nothing is known to have happened. Try again once the server is back.
    public static let unavailable = Code(.unavailable)
    /// A write guarded by a fencing token was refused: a later holder of the lock has written
    /// with a larger token, so this holder's lock ended before the write.
    public static let staleFencingToken = Code(.staleFencingToken)
    /// The task was cancelled while the operation waited; nothing was done. Not a loss: a lock or
    /// claim a cancelled wait was watching is still held.
    public static let cancelled = Code(.cancelled)
    /// The container is read-only for this process, and the operation writes: a keyboard
    /// extension without Full Access (its App Group container is read-only), a read-only mount, a
    /// folder this user may not write. Reading works there (probes, values, peeks, signal waits);
    /// write from a process that may write the container. ``LiaisonError/errno`` says what the
    /// system answered (`EROFS`, `EACCES` or `EPERM`).
    public static let readOnly = Code(.readOnly)
    /// On Apple platforms, a file could not be opened because its data protection class keeps it
    /// unreadable while the device is locked (`complete`, say), or could not be made in a folder of
    /// such a class. Liaison makes its own folders, and so its files, with the class
    /// `completeUntilFirstUserAuthentication`, which an extension can open while the device is
    /// locked after its first unlock; the message names the file (made with a stricter class, by an
    /// earlier version or another program) and says what to do. ``LiaisonError/errno`` is `EPERM`.
    /// Never on Linux.
    public static let protectedDataUnavailable = Code(.protectedDataUnavailable)

    public var description: String { value.rawValue }
  }

  /// What kind of failure this is.
  public let code: Code
  /// What went wrong and what to do about it, in a sentence or two.
  public let message: String
  /// The system error beneath this one, if any.
  public let errno: Errno?
  /// The file involved, if any, as a path for people to read.
  public let path: String?
  /// The error this one reports, if it came from a library beneath: for a store or shared
  /// database, GRDB's `DatabaseError`, with SQLite's result code (`LiaisonStore` reads it as
  /// `databaseError`).
  public let cause: (any Error)?

  /// Makes an error; Liaison's modules throw these, and a program may throw one of its own in
  /// the same form (a wrapper that reports a container problem, a test double).
  ///
  /// - Parameters:
  ///   - code: what kind of failure it is, for `switch` and `catch` patterns.
  ///   - message: what went wrong and what to do about it, for a person.
  ///   - errno: the system's error number, when a system call failed.
  ///   - path: the file or folder involved.
  ///   - cause: the underlying error, such as GRDB's `DatabaseError`.
  public init(
    _ code: Code, _ message: String, errno: Errno? = nil, path: String? = nil, cause: (any Error)? = nil
  ) {
    self.code = code
    self.message = message
    self.errno = errno
    self.path = path
    self.cause = cause
  }

  public var description: String {
    var text = message
    if let errno { text += " (\(errno))" }
    return text
  }
}

extension LiaisonError {
  /// The error of an operation whose task was cancelled while it waited.
  package static func cancelled(_ what: String) -> LiaisonError {
    LiaisonError(.cancelled, "The task was cancelled while \(what); nothing was done.", cause: CancellationError())
  }

  /// A failed system call on a file, with a message that names the file and the call.
  package static func system(_ errno: Errno, _ action: String, path: String) -> LiaisonError {
    LiaisonError(.system, "Could not \(action) '\(path)'.\(advice(for: errno))", errno: errno, path: path)
  }

  /// Whether `errno`, from an open for writing, a create or a `mkdir` in the container, means
  /// that this process may not write there: a read-only mount (`EROFS`), or a folder or a sandbox
  /// that refuses this process's writes (`EACCES`, `EPERM`).
  package static func meansReadOnly(_ errno: Errno) -> Bool {
    errno == .readOnlyFileSystem || errno == .permissionDenied || errno == .notPermitted
  }

  /// The error of a write refused because the container is read-only for this process: `action`
  /// is what was being done (`"write"`, `"create"`), `path` the file or folder.
  package static func readOnly(_ errno: Errno?, _ action: String, path: String) -> LiaisonError {
    let why =
      errno == .readOnlyFileSystem
      ? "the container is on a read-only file system"
      : "the container is read-only for this process (the system refused it: a sandbox, such as a keyboard "
        + "extension's without Full Access, or a folder this user may not write)"
    return LiaisonError(
      .readOnly,
      "Could not \(action) '\(path)': \(why). Reading works in a read-only container (presences, shared defaults, "
        + "mailbox peeks, signal waits); write from a process that may write the container.",
      errno: errno, path: path)
  }

  /// What to do about `errno`, as a sentence after a space; empty when there is nothing to say.
  package static func advice(for errno: Errno) -> String {
    switch errno {
    case .permissionDenied, .notPermitted: " Check that this process may read and write the container folder."
    case .readOnlyFileSystem: " The container is on a read-only file system; choose a writable folder."
    case .noSpace: " The disk is full; free some space."
    case .diskQuotaExceeded: " The user's disk quota is used up; free some space, or have it raised."
    case .tooManyOpenFiles, .tooManyOpenFilesInSystem: " " + descriptorAdvice(errno)!
    default: ""
    }
  }

  /// What to do when no file descriptor can be had: for `EMFILE`, this process has reached its
  /// own limit (`ulimit -n`), which the message states; for `ENFILE`, the whole system has. `nil`
  /// for any other error.
  package static func descriptorAdvice(_ errno: Errno) -> String? {
    switch errno {
    case .tooManyOpenFiles:
      var limit = rlimit()
      #if canImport(Glibc)
        let known = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0
      #else
        let known = getrlimit(RLIMIT_NOFILE, &limit) == 0
      #endif
      return "This process has as many files open as its limit allows"
        + (known ? " (\(limit.rlim_cur), `ulimit -n`)" : " (`ulimit -n`)")
        + ": raise the limit (`ulimit -n`, or LimitNOFILE= in a systemd unit), or have the process keep fewer "
        + "files open."
    case .tooManyOpenFilesInSystem:
      return "The system has as many files open as its limit allows (fs.file-max on Linux, kern.maxfiles on "
        + "Apple platforms): close files elsewhere, or raise the limit."
    default:
      return nil
    }
  }

  /// Whether this process can open `count` more file descriptors now, found by opening
  /// `/dev/null` that many times: `EMFILE` or `ENFILE` when it cannot, else `nil`. For failures
  /// that do not say why, and whose opener has closed what it had opened by the time it reports
  /// (SQLite's "unable to open database file": ask for as many as it opens at once), and for those
  /// with more than one cause (`inotify_init1`'s `EMFILE` is also the user's limit of inotify
  /// instances).
  package static func descriptorShortage(count: Int = 1) -> Errno? {
    var opened: [CInt] = []
    defer { for fd in opened { _ = close(fd) } }
    while opened.count < count {
      let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
      guard fd >= 0 else {
        let error = currentErrno()
        return error == .tooManyOpenFiles || error == .tooManyOpenFilesInSystem ? error : nil
      }
      opened.append(fd)
    }
    return nil
  }
}
