import Foundation
import Liaison
import LiaisonCommandLine

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Standard output and standard error, written with `write(2)` and checked.
///
/// Every line the command prints goes through ``printLine(_:)`` or ``printError(_:)``, never
/// through `print` or `FileHandle`: stdio keeps what it buffers and tells of a failed write only
/// when asked, and `FileHandle.write` traps (the process then dies of SIGILL). Output that cannot
/// be written whole (a full disk, a closed descriptor, a reader that has gone while SIGPIPE is
/// ignored) ends the command with ``ExitStatus/ioError``, as coreutils' commands end.
enum StandardStreams {
  /// Keeps lines whole when several tasks print at once (`observe` with several signals).
  private static let writing = NSLock()

  /// Opens `/dev/null` on each of the descriptors 0, 1 and 2 that the caller left closed: for
  /// reading on 1 and 2, for writing on 0, so that using one still fails as it would have (with
  /// `EBADF`), but no file this process opens later (a lock file, a database) takes its number
  /// and receives what was meant for standard output. Close-on-exec, so that the command that
  /// `lock` runs finds them closed, as its caller left them. Call once, first thing, after
  /// ``CallerDescriptors/capture()``.
  static func occupyClosedDescriptors() {
    for fd: CInt in 0...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
      // `open` takes the lowest free number: this one, as the loop has filled those below it.
      _ = open("/dev/null", (fd == 0 ? O_WRONLY : O_RDONLY) | O_CLOEXEC)
    }
  }

  /// Writes all of `bytes` to `fd`, retrying after `EINTR`, short writes, and `EAGAIN` on a
  /// descriptor that another program made non-blocking.
  ///
  /// - Returns: `nil` once every byte is written, else the `errno` of the failure.
  static func write(_ bytes: [UInt8], to fd: CInt) -> CInt? {
    writing.withLock {
      var written = 0
      while written < bytes.count {
        let n = bytes.withUnsafeBytes { buffer in
          #if canImport(Glibc)
            Glibc.write(fd, buffer.baseAddress! + written, buffer.count - written)
          #elseif canImport(Darwin)
            Darwin.write(fd, buffer.baseAddress! + written, buffer.count - written)
          #endif
        }
        if n > 0 {
          written += n
        } else if n == 0 {
          return EIO
        } else if errno == EAGAIN || errno == EWOULDBLOCK {
          var waiting = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
          _ = poll(&waiting, 1, -1)
        } else if errno != EINTR {
          return errno
        }
      }
      return nil
    }
  }

  /// The error for standard output that could not be written, with the reason (`errno`).
  static func outputFailure(_ errno: CInt) -> CLIError {
    CLIError(
      "Could not write to standard output (\(String(cString: strerror(errno)))), so the output is incomplete. "
        + "Check where standard output goes: a full disk, a closed descriptor, a reader that has gone.",
      status: ExitStatus.ioError)
  }
}

/// Writes `line` and a newline to standard output.
///
/// - Throws: ``CLIError`` with ``ExitStatus/ioError`` when the line could not be written whole.
func printLine(_ line: String) throws(CLIError) {
  if let failure = StandardStreams.write(Array((line + "\n").utf8), to: 1) {
    throw StandardStreams.outputFailure(failure)
  }
}

/// Writes `line` and a newline to standard error, its control characters escaped so that it
/// stays one line (``CommandLineText/visible(_:)``); a failure is ignored, as there is nowhere
/// left to tell of it.
func printError(_ line: String) {
  _ = StandardStreams.write(Array((CommandLineText.visible(line) + "\n").utf8), to: 2)
}

/// Prints `value` as one line of JSON with sorted keys.
func printJSON<T: Encodable>(_ value: T) throws {
  try printLine(try jsonLine(value))
}

/// `value` as one line of JSON with sorted keys.
func jsonLine<T: Encodable>(_ value: T) throws -> String {
  let encoder = JSONEncoder()
  encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
  encoder.dateEncodingStrategy = .iso8601
  return String(decoding: try encoder.encode(value), as: UTF8.self)
}

/// A presence holder as the CLI shows it.
struct HolderReport: Encodable {
  let kind: String
  let pid: Int32
  let since: Date
  let info: String?
  let leaseRemainingSeconds: Double?
  /// Whether `pid` has exited while a descendant holds the claim on (its pid is not recorded).
  let pidExited: Bool

  init(_ holder: PresenceHolder) {
    kind = holder.kind.rawValue
    pid = holder.processID
    pidExited = holder.processHasExited
    since = holder.since
    info = holder.info
    leaseRemainingSeconds = holder.leaseRemaining.map {
      Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18
    }
  }

  var text: String {
    var line = "pid \(pid) (\(kind)) since \(since.formatted(.iso8601))"
    if pidExited { line += ", held by a descendant of pid \(pid), which has exited" }
    if let leaseRemainingSeconds { line += String(format: ", lease %.1f s left", leaseRemainingSeconds) }
    if let info { line += ": \(CommandLineText.visible(info))" }
    return line
  }
}

/// A presence as the CLI lists it.
struct PresenceReport: Encodable {
  let name: String
  let active: Bool
  let holder: HolderReport?

  /// Reads `presence`'s holder.
  static func of(_ presence: some CoordinationPresence) async throws -> PresenceReport {
    try await of(name: presence.name) { try await presence.holder }
  }

  /// The report of the presence `name`, whose holder `holder` reads.
  static func of(name: LiaisonName, holder: () async throws -> PresenceHolder?) async throws -> PresenceReport {
    do {
      return PresenceReport(name: name.rawValue, holder: try await holder(), active: nil)
    } catch let error as LiaisonError where error.code == .claimInProgress {
      // Claimed a moment ago: active, its holder not written yet.
      return PresenceReport(name: name.rawValue, holder: nil, active: true)
    }
  }

  private init(name: String, holder: PresenceHolder?, active: Bool?) {
    self.name = name
    self.holder = holder.map(HolderReport.init)
    self.active = active ?? (holder != nil)
  }

  /// `active: HOLDER`, `active: claim in progress` or `inactive`.
  var text: String {
    guard active else { return "inactive" }
    return "active: " + (holder?.text ?? "claim in progress (its holder is not recorded yet)")
  }
}

/// The line that ends each command's help: the page of the DocC documentation that explains it.
enum DocsPage {
  static let command = "Docs: Sources/liaison/README.md in Liaison's repository (\"The liaison Command\")."
  static let lock = "Docs: ProcessLock in the Liaison documentation, and Sources/liaison/README.md in its repository."
  static let presence = "Docs: Presence in the Liaison documentation."
  static let signal = "Docs: Signal in the Liaison documentation."
  static let defaults = "Docs: SharedDefaults in the LiaisonStore documentation."
  static let mailbox = "Docs: Mailbox in the LiaisonStore documentation."
  static let demo = "Docs: \"Choosing a Part\" in the Liaison documentation."
}
