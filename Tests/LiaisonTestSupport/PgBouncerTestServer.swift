import ChildProcesses
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A throwaway PgBouncer (Debian's `pgbouncer`) in front of a ``PostgresTestServer``, for the
/// tests of what Liaison does through a pooler: on a port of its own, in a folder of its own,
/// run as the server's user (PgBouncer refuses to run as root). A watchdog stops it and deletes
/// its folder if this process dies.
///
/// It is configured as a managed service's pooled endpoint is, with nothing done for Liaison:
/// the clients' startup parameters other than PgBouncer's own are refused (no
/// `ignore_startup_parameters`). It retries a failed login to the server after 1 s rather than
/// 15 (a loaded test machine may refuse one).
///
/// ```swift
/// let bouncer = try PgBouncerTestServer.start(in: server, mode: .transaction)
/// let place = try await PostgresContainer(url: bouncer.url, namespace: "app")  // refused
/// ```
public final class PgBouncerTestServer: Sendable {
  /// When PgBouncer gives a server connection back to its pool.
  public enum PoolMode: String, Sendable, CaseIterable, CustomStringConvertible {
    /// When the client disconnects: each client has a session of its own.
    case session
    /// After each transaction.
    case transaction
    /// After each statement.
    case statement

    public var description: String { rawValue }
  }

  /// The pool mode.
  public let mode: PoolMode
  /// The port it listens on, at 127.0.0.1.
  public let port: Int
  /// Its folder: configuration, log, pid file.
  public let folder: String
  private let watchdog: Watchdog
  private let process: LockedValue<ChildProcess?>

  /// Why PgBouncer cannot run here, or `nil`.
  public static var unavailableReason: String? {
    binary == nil ? "needs PgBouncer (apt-get install pgbouncer)" : nil
  }

  /// Whether the tests that need PgBouncer run: when it is installed, and always in CI (where its
  /// absence is a failure, not a skip).
  public static var mustRun: Bool { unavailableReason == nil || runsInCI }

  private static let binary = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].first {
    FileManager.default.isExecutableFile(atPath: $0)
  }

  /// The URL of the server's test database through the pooler.
  public var url: String { "postgres://liaison@127.0.0.1:\(port)/liaison?sslmode=disable" }

  /// Starts a PgBouncer in `mode` in front of `server` (its first listen address and port), with
  /// the further `settings` of its `[pgbouncer]` section (`server_round_robin = 1`).
  ///
  /// - Throws: ``TestInfrastructureError`` when PgBouncer is missing or does not start, with
  ///   its log.
  public static func start(
    in server: PostgresTestServer, mode: PoolMode, settings: [String] = []
  ) throws -> PgBouncerTestServer {
    guard let binary else { throw TestInfrastructureError(unavailableReason!) }
    let folder = try makeServerUserFolder(prefix: "liaison-pgbouncer")
    let watchdog: Watchdog
    do {
      watchdog = try Watchdog(script: cleanupScript, arguments: [folder])
    } catch {
      try? FileManager.default.removeItem(atPath: folder)
      throw error
    }
    do {
      try writeServerUserFile(folder + "/users.txt", "\"\(server.user)\" \"\"\n")
      for attempt in 1...20 {
        let port = Int.random(in: 20000..<32768)
        let configuration = """
          [databases]
          \(server.database) = host=\(server.listenAddresses[0]) port=\(server.port) dbname=\(server.database)
          [pgbouncer]
          listen_addr = 127.0.0.1
          listen_port = \(port)
          unix_socket_dir =
          auth_type = trust
          auth_file = \(folder)/users.txt
          pool_mode = \(mode)
          max_client_conn = 1000
          default_pool_size = 20
          server_login_retry = 1
          logfile = \(folder)/pgbouncer.log
          pidfile = \(folder)/pgbouncer.pid
          \(settings.joined(separator: "\n"))

          """
        try writeServerUserFile(folder + "/pgbouncer.ini", configuration)
        do {
          let process = try launch(binary: binary, folder: folder, port: port)
          return PgBouncerTestServer(mode: mode, port: port, folder: folder, watchdog: watchdog, process: process)
        } catch is PortTaken where attempt < 20 {
          continue
        }
      }
      throw TestInfrastructureError("PgBouncer found no free port")
    } catch {
      watchdog.abandon()  // it deletes the folder
      throw error
    }
  }

  private init(mode: PoolMode, port: Int, folder: String, watchdog: Watchdog, process: ChildProcess) {
    self.mode = mode
    self.port = port
    self.folder = folder
    self.watchdog = watchdog
    self.process = LockedValue(process)
    ExitCleanup.register(self) { [weak self] in self?.remove() }
  }

  deinit { remove() }

  /// Stops it at once (`SIGTERM`: PgBouncer's immediate shutdown, which closes every client's
  /// connection), then starts it again on the same port: what a pooler's restart or crash does
  /// to its clients.
  public func restart() throws {
    try process.withLock { process in
      if let running = process {
        running.kill(SIGTERM)
        running.kill(SIGCONT)  // if frozen
        running.wait()
        process = nil
      }
      guard let binary = Self.binary else { throw TestInfrastructureError(Self.unavailableReason!) }
      process = try Self.launch(binary: binary, folder: folder, port: port)
    }
  }

  /// Changes its pool mode (from ``mode``, the one it started in) and adds `settings` while it
  /// runs: `SIGHUP`, on which PgBouncer reads its configuration again, its clients' connections
  /// staying open. Returns once its log says it read it.
  public func reload(mode newMode: PoolMode, settings: [String] = []) throws {
    let path = folder + "/pgbouncer.ini"
    let text = try String(contentsOfFile: path, encoding: .utf8)
    try writeServerUserFile(
      path,
      text.replacingOccurrences(of: "pool_mode = \(mode)\n", with: "pool_mode = \(newMode)\n")
        + settings.map { $0 + "\n" }.joined())
    let reloads = log.components(separatedBy: "got SIGHUP").count
    process.withLock { $0?.kill(SIGHUP) }
    let deadline = Date().addingTimeInterval(60)
    while log.components(separatedBy: "got SIGHUP").count == reloads {
      guard Date() < deadline else { throw TestInfrastructureError("PgBouncer did not reload within 60 s: \(log)") }
      usleep(10_000)
    }
  }

  /// Freezes it (`SIGSTOP`) until ``thaw()``: its clients' connections stay open and their
  /// statements go unanswered, as across a cut network.
  public func freeze() {
    process.withLock { $0?.kill(SIGSTOP) }
  }

  /// What PgBouncer has logged so far (for a failure's message).
  public var log: String { logText(folder + "/pgbouncer.log", from: 0) }

  /// Lets a frozen pooler go on (`SIGCONT`).
  public func thaw() {
    process.withLock { $0?.kill(SIGCONT) }
  }

  /// Stops it and deletes its folder; calling it again does nothing.
  public func remove() {
    let stopped = process.withLock { process -> Bool in
      guard let running = process else { return false }
      running.kill(SIGTERM)
      running.kill(SIGCONT)  // if frozen
      running.wait()
      process = nil
      return true
    }
    guard stopped else { return }
    watchdog.abandon()  // it deletes the folder
    ExitCleanup.unregister(self)
  }

  /// Starts PgBouncer in the foreground (its pid is the child's) and waits until it listens.
  private static func launch(binary: String, folder: String, port: Int) throws -> ChildProcess {
    let log = folder + "/pgbouncer.log"
    let logStart = (try? FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) ?? 0
    // Quiet (-q): its log goes to the log file only. Logged to standard error too, it would fill
    // the pipe nobody reads after the start, and PgBouncer would stop, blocked on a write.
    let process = try ChildProcess(
      serverUserPrefix.first ?? binary,
      Array((serverUserPrefix + [binary, "-q", folder + "/pgbouncer.ini"]).dropFirst()),
      input: .discard, output: .discard, errors: .pipe)
    let text = { logText(log, from: logStart) }
    do {
      try waitUntil("PgBouncer listens on port \(port)") {
        if process.hasExited {
          let output = process.finish().errors + "\n" + text()
          if output.contains("Address already in use") { throw PortTaken() }
          throw TestInfrastructureError("PgBouncer \(process.wait()) as it started; its log:\n\(output)")
        }
        return text().contains("process up")
      }
    } catch let error as PeerError {
      process.kill(SIGKILL)
      process.wait()
      throw TestInfrastructureError("\(error); PgBouncer's log:\n\(text())")
    }
    return process
  }

  /// The watchdog's cleanup (`$1` the folder): PgBouncer stopped by its pid file, if that
  /// process is still PgBouncer, then the folder deleted.
  private static let cleanupScript = #"""
    pid=$(cat "$1/pgbouncer.pid" 2>/dev/null)
    if [ -n "$pid" ] && grep -q pgbouncer "/proc/$pid/cmdline" 2>/dev/null; then kill -TERM "$pid"; fi
    rm -rf "$1"
    """#
}

/// PgBouncer could not listen on its port: another process has it.
private struct PortTaken: Error {}

/// A value guarded by a lock.
private final class LockedValue<Value>: @unchecked Sendable {
  private let lock = NSLock()
  private var value: Value

  init(_ value: Value) { self.value = value }

  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}

/// A new folder in /tmp, the server user's when this process runs as root (so that PostgreSQL's
/// programs, which run as that user, may write in it).
func makeServerUserFolder(prefix: String) throws -> String {
  var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
  guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
    throw TestInfrastructureError("cannot create a folder in /tmp: \(String(cString: strerror(errno)))")
  }
  let folder = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  try giveToServerUser(folder)
  return folder
}

/// Writes `text` to a new file at `path`, mode 0600, the server user's when this process runs as
/// root.
func writeServerUserFile(_ path: String, _ text: String) throws {
  guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
  else { throw TestInfrastructureError("cannot write \(path)") }
  try giveToServerUser(path)
}

private func giveToServerUser(_ path: String) throws {
  guard isRoot, let user = getpwnam(serverUser) else { return }
  guard chown(path, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
    throw TestInfrastructureError("cannot give \(path) to the \(serverUser) user: \(String(cString: strerror(errno)))")
  }
}
