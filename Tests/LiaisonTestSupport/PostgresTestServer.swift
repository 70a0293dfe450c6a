// A throwaway PostgreSQL cluster for the tests of LiaisonPostgres: made in a temporary folder,
// started on a free port, stopped, killed and started again at will, removed with its folder when
// the test is done, when this process exits, or, when this process dies without exiting (a
// crash, SIGKILL), by a watchdog process that notices.

import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A throwaway PostgreSQL cluster: its own folder, its own port, the superuser `liaison` with no
/// password (`trust`; or one that TCP connections must give, with `start(password:)`), and the
/// database `liaison` (initdb's `postgres`, renamed: there is no database `postgres`).
///
/// A test that needs PostgreSQL is enabled by ``mustRun``, so that it is skipped on a machine
/// without PostgreSQL but fails, with the reason, in CI:
///
/// ```swift
/// @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL: apt-get install postgresql"))
/// func aLockIsSharedThroughPostgres() throws {
///   let server = try PostgresTestServer.start()  // or `try PostgresTestServer.shared.get()`
///   #expect(try server.psql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'") == "1")
///   // … connect to `server.url` …
/// }
/// ```
///
/// ``shared`` is one server for the whole test process, for the tests that neither stop nor kill
/// it; a test that does starts its own with ``start(listenAddresses:durable:password:tls:)``.
///
/// The postmaster is a child of this process (not daemonized by `pg_ctl`), so that this process
/// reaps it the moment it ends: a postmaster left a zombie (an orphan whose reaper is slow, as
/// `init` is on some machines) would keep ``startAgain()`` from starting, since PostgreSQL
/// refuses to start while the pid in `postmaster.pid` answers `kill(pid, 0)`. ``stop()`` sends it
/// `SIGINT` (what `pg_ctl stop -m fast` sends), ``remove()`` `SIGQUIT` (`-m immediate`).
///
/// As root (PostgreSQL refuses to run as root), `initdb` and `postgres` run as the `postgres`
/// user that Debian's package creates, through `setpriv`, in a folder given to that user; this
/// process still stops, kills and removes them.
///
/// Guarantees: the server's folder and processes are removed by ``remove()``, by `deinit`, by an
/// `atexit` hook when this process exits, and, when this process dies without exiting (a crash, a
/// trap, `SIGKILL`), by a watchdog child (`sh`) whose standard input is a pipe only this process
/// holds: it ignores Ctrl-C and `SIGTERM`, and at the end of its input it shuts the postmaster
/// down (immediate) and deletes the folder.
public final class PostgresTestServer: Sendable {
  /// The TCP port, the same on every listen address and across ``stop()`` and ``startAgain()``.
  public let port: Int
  /// The addresses the server listens on.
  public let listenAddresses: [String]
  /// The cluster's data directory (`PGDATA`).
  public let dataDirectory: String
  /// The temporary folder that holds everything: the data directory, the Unix socket, the log.
  public let folder: String
  /// The server's log, appended to by every start.
  public let logFile: String
  /// The superuser the tests connect as (no password: `trust`).
  public let user = "liaison"
  /// The database the tests use: initdb's `postgres`, renamed by ``start(listenAddresses:durable:password:tls:)``
  /// (instantly, where `CREATE DATABASE` takes half a second of copying and syncing files).
  public let database = "liaison"
  /// Whether the server commits durably (`fsync=on`, PostgreSQL's default).
  public let durable: Bool

  private let binaries: PostgresBinaries
  private let watchdog: Watchdog
  private let state: ServerState

  // MARK: - Availability

  /// Why no server can be started here, or `nil` when one can: PostgreSQL's server programs are
  /// missing, or (as root) the `postgres` user or `setpriv` is.
  public static var unavailableReason: String? { availability.reason }

  /// Whether the tests that need PostgreSQL must run: it is available, or this is CI (`CI=true`),
  /// where a skipped test would hide a broken setup, so such a test runs and fails with
  /// ``unavailableReason``.
  public static var mustRun: Bool { unavailableReason == nil || runsInCI }

  private static let availability: (binaries: PostgresBinaries?, reason: String?) = {
    // The servers are started, killed and cleaned up the Debian way, their processes found in
    // /proc (``kill()``): on macOS those tests are skipped, even where PostgreSQL is installed.
    guard isLinux else {
      return (
        nil,
        "the tests start PostgreSQL servers on Linux only (Debian's layout, /proc); "
          + "LiaisonPostgres is built, not tested, on macOS"
      )
    }
    guard let binaries = PostgresBinaries.find() else {
      return (
        nil,
        "PostgreSQL's server programs (initdb, postgres, psql) are not installed: none in "
          + "/usr/lib/postgresql/VERSION/bin nor on PATH; install them with `apt-get install postgresql`"
      )
    }
    if isRoot {
      guard getpwnam(serverUser) != nil else {
        return (
          nil,
          "running as root, the tests start PostgreSQL as the `\(serverUser)` user (it refuses to run as root), "
            + "and there is no such user: `apt-get install postgresql` creates it"
        )
      }
      guard FileManager.default.isExecutableFile(atPath: setprivPath) else {
        return (nil, "running as root, the tests start PostgreSQL through \(setprivPath): `apt-get install util-linux`")
      }
    }
    var found = binaries
    do {
      let version = try runCommand(serverUserPrefix + [binaries.initdb, "--version"])
      let number = version.split(separator: " ").last.map { $0.prefix { $0.isNumber } } ?? ""
      found.majorVersion = Int(number) ?? 0
    } catch {
      return (nil, "\(binaries.initdb) does not run: \(error)")
    }
    return (found, nil)
  }()

  // MARK: - Starting

  /// One server for the whole test process, started on first use (safe from parallel tests), for
  /// the tests that neither stop, kill nor remove it. It is removed when the process exits.
  public static let shared: Result<PostgresTestServer, any Error> = Result { try start() }

  /// Makes a new cluster in a temporary folder and starts it.
  ///
  /// About a second: `initdb` (without syncing to disk) and a start.
  ///
  /// - Parameters:
  ///   - listenAddresses: the addresses it listens on for TCP, all on one port chosen free (a
  ///     ``NetworkNamespace/hostAddress``, for a peer in a namespace to reach it). It also
  ///     listens on a Unix socket in ``folder``, which ``psql(_:)`` uses.
  ///   - durable: `false` sets `fsync=off`: faster, and a crash of the machine (not of the
  ///     server) may lose or damage data. Keep the default for benchmarks and crash tests.
  ///   - password: when given, the superuser has this password, and TCP connections must give it
  ///     (`scram-sha-256`); the Unix socket, which ``psql(_:)`` uses, stays `trust`.
  ///   - tls: the server's certificate and what it asks of clients over TCP (see
  ///     ``PostgresTestTLS``), which then decides the TCP authentication; `nil` for no TLS.
  /// - Throws: ``TestInfrastructureError`` when PostgreSQL is missing (``unavailableReason``)
  ///   or does not start, with the failing command's error output or the server's log.
  public static func start(
    listenAddresses: [String] = ["127.0.0.1"], durable: Bool = true, password: String? = nil,
    tls: PostgresTestTLS? = nil
  ) throws -> PostgresTestServer {
    let hostMethod = password == nil ? "trust" : "scram-sha-256"
    let server = try make(listenAddresses: listenAddresses, durable: durable) { binaries, dataDirectory in
      try runCommand(
        serverUserPrefix + [
          binaries.initdb, "-D", dataDirectory, "--auth-local=trust", "--auth-host=\(hostMethod)", "-U", "liaison",
          "--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C",
        ])
      if let tls {
        try tls.install(
          folder: URL(fileURLWithPath: dataDirectory).deletingLastPathComponent().path,
          dataDirectory: dataDirectory)
        return
      }
      // initdb's lines cover the Unix socket and the loopback addresses only.
      let remoteClients = "host all all 0.0.0.0/0 \(hostMethod)\nhost all all ::/0 \(hostMethod)\n"
      let hba = try FileHandle(forWritingTo: URL(fileURLWithPath: dataDirectory + "/pg_hba.conf"))
      defer { try? hba.close() }
      try hba.seekToEnd()
      try hba.write(contentsOf: Data(remoteClients.utf8))
    }
    try server.psql("ALTER DATABASE postgres RENAME TO liaison", database: "template1")
    if let password {
      // As a literal: psql's -c takes no parameters. Quotes doubled, as SQL escapes them.
      try server.psql("ALTER ROLE liaison PASSWORD '\(password.replacingOccurrences(of: "'", with: "''"))'")
    }
    return server
  }

  /// Starts a hot standby of `primary`: a copy made with `pg_basebackup -R` that streams its
  /// changes and answers read-only queries (`pg_is_in_recovery()` is true), on a port of its own,
  /// with `primary`'s roles, passwords and authentication.
  ///
  /// - Throws: ``TestInfrastructureError`` when PostgreSQL is missing or the copy fails.
  public static func startStandby(of primary: PostgresTestServer) throws -> PostgresTestServer {
    try make(listenAddresses: primary.listenAddresses, durable: primary.durable) { binaries, dataDirectory in
      try runCommand(
        serverUserPrefix + [
          binaries.directory + "/pg_basebackup", "-D", dataDirectory, "-h", primary.folder, "-p", String(primary.port),
          "-U", primary.user, "-R", "-X", "stream", "--no-sync",
        ])
    }
  }

  /// Makes a cluster in a new folder with `prepare` (given the programs and the data directory),
  /// and starts it on a free port.
  private static func make(
    listenAddresses: [String], durable: Bool, prepare: (PostgresBinaries, String) throws -> Void
  ) throws -> PostgresTestServer {
    guard let binaries = availability.binaries else {
      throw TestInfrastructureError(unavailableReason ?? "PostgreSQL is not available")
    }
    precondition(!listenAddresses.isEmpty, "a PostgreSQL test server needs at least one listen address")
    let folder = try makeFolder()
    let dataDirectory = folder + "/data"
    let watchdog: Watchdog
    do {
      watchdog = try Watchdog(script: serverCleanupScript, arguments: [folder, dataDirectory])
    } catch {
      try? FileManager.default.removeItem(atPath: folder)
      throw error
    }
    var postmaster: ChildProcess?
    var port = 0
    do {
      try prepare(binaries, dataDirectory)
      // A port below Linux's ephemeral range (32768-60999) and macOS's (49152-65535), which the
      // kernel hands out to outgoing connections; a port another process took is tried again.
      for attempt in 1...20 {
        port = Int.random(in: 20000..<32768)
        do {
          postmaster = try launchPostmaster(
            binaries: binaries, folder: folder, port: port, listenAddresses: listenAddresses, durable: durable)
          break
        } catch is PortInUse where attempt < 20 {
          continue
        }
      }
    } catch {
      postmaster.map(shutDown)
      watchdog.abandon()  // it deletes the folder
      throw error
    }
    return PostgresTestServer(
      binaries: binaries, folder: folder, port: port, listenAddresses: listenAddresses, durable: durable,
      watchdog: watchdog, postmaster: postmaster!)
  }

  private init(
    binaries: PostgresBinaries, folder: String, port: Int, listenAddresses: [String], durable: Bool,
    watchdog: Watchdog, postmaster: ChildProcess
  ) {
    self.binaries = binaries
    self.folder = folder
    self.dataDirectory = folder + "/data"
    self.logFile = folder + "/server.log"
    self.port = port
    self.listenAddresses = listenAddresses
    self.durable = durable
    self.watchdog = watchdog
    self.state = ServerState(postmaster: postmaster)
    ExitCleanup.register(self) { [weak self] in self?.remove() }
  }

  deinit { remove() }

  // MARK: - Connecting

  /// The URL of the database on the first listen address:
  /// `postgres://liaison@127.0.0.1:PORT/liaison`.
  public var url: String { url(host: listenAddresses[0]) }

  /// The URL of the database on `host` (an address the server listens on).
  public func url(host: String) -> String {
    let host = host.contains(":") ? "[\(host)]" : host
    return "postgres://\(user)@\(host):\(port)/\(database)"
  }

  /// Runs `sql` with `psql` on the server's Unix socket and returns what it prints, unaligned and
  /// without headers: one line a row, `|` between columns, no final newline.
  ///
  /// ```swift
  /// try server.psql("SELECT count(*) FROM pg_stat_activity")  // "6"
  /// ```
  ///
  /// - Throws: when `psql` fails (the server is stopped, the SQL is wrong), with its error output.
  @discardableResult
  public func psql(_ sql: String) throws -> String {
    try psql(sql, database: database)
  }

  /// The command (`psql` with its arguments, the program first) that runs `sql` on the server
  /// over TCP at `host`, or reads SQL from its standard input when `sql` is `nil`, printing rows
  /// as ``psql(_:)`` returns them. For a test to start it elsewhere, such as in a network
  /// namespace: `ChildProcess` over `namespace.command(server.psqlCommand(host: …))`.
  ///
  /// - Parameter connectTimeout: seconds `psql` waits to connect before it gives up.
  public func psqlCommand(host: String, sql: String? = nil, connectTimeout: Int = 10) -> [String] {
    let connection = "host=\(host) port=\(port) user=\(user) dbname=\(database) connect_timeout=\(connectTimeout)"
    return [binaries.psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", connection]
      + (sql.map { ["-c", $0] } ?? [])
  }

  /// Runs `sql` with `psql` in `database` (another database of the server's), as ``psql(_:)``.
  @discardableResult
  public func psql(_ sql: String, database: String) throws -> String {
    let output = try runCommand(
      [
        binaries.psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", folder, "-p", String(port), "-U", user,
        "-d", database, "-c", sql,
      ], environment: ["PGCONNECT_TIMEOUT": "10"])
    return String(output.reversed().drop { $0 == "\n" }.reversed())
  }

  // MARK: - Stopping and starting

  /// Whether the postmaster is running (started and not stopped, killed or removed).
  public var isRunning: Bool { state.withLock { $0.postmaster.map { !$0.hasExited } ?? false } }

  /// The postmaster's process id while it runs.
  public var postmasterID: pid_t? { state.withLock { $0.postmaster?.pid } }

  /// Stops the server cleanly: a fast shutdown (`pg_ctl stop -m fast`), which ends the sessions
  /// and writes a checkpoint. Does nothing when it is not running.
  ///
  /// - Throws: when it does not stop within 60 s (it is then killed), or stops with an error;
  ///   with the log's end.
  public func stop() throws {
    try state.withLock { state in
      guard let postmaster = state.postmaster else { return }
      state.postmaster = nil
      postmaster.kill(SIGINT)
      guard (try? waitUntil("the postmaster ends", { postmaster.hasExited })) != nil else {
        postmaster.kill(SIGKILL)
        postmaster.wait()
        throw TestInfrastructureError("PostgreSQL did not stop within 60 s, and was killed\(logTail())")
      }
      let termination = postmaster.wait()
      guard termination == .exited(0) else {
        throw TestInfrastructureError("PostgreSQL \(termination) while it stopped\(logTail())")
      }
    }
  }

  /// Starts the stopped (or killed) server again: the same folder and data, the same port.
  ///
  /// - Throws: when it does not start (another process took the port meanwhile), with the log.
  public func startAgain() throws {
    try state.withLock { state in
      precondition(!state.removed, "startAgain() on a removed PostgreSQL test server")
      precondition(state.postmaster == nil, "startAgain() on a PostgreSQL test server that runs: stop() it first")
      do {
        state.postmaster = try Self.launchPostmaster(
          binaries: binaries, folder: folder, port: port, listenAddresses: listenAddresses, durable: durable)
      } catch let error as PortInUse {
        throw TestInfrastructureError("PostgreSQL cannot start again: another process took port \(port): \(error)")
      }
    }
  }

  /// ``stop()`` then ``startAgain()``.
  public func restart() throws {
    try stop()
    try startAgain()
  }

  /// Kills the server as a crash of its machine would: every process of the cluster ends with
  /// `SIGKILL` at once, with no shutdown, no checkpoint, and `postmaster.pid` left behind (the
  /// kernel still closes their connections). ``startAgain()`` then recovers from the write-ahead
  /// log. For a host that stops answering instead, see ``NetworkNamespace/cut()``.
  ///
  /// The postmaster is stopped (`SIGSTOP`) first, so that it neither restarts a backend that
  /// dies nor starts one, then its children are killed (Linux: found in `/proc`), then it is;
  /// this returns once they have all ended. Does nothing when the server is not running.
  public func kill() {
    state.withLock { state in
      guard let postmaster = state.postmaster else { return }
      state.postmaster = nil
      postmaster.kill(SIGSTOP)
      let children = childProcesses(of: postmaster.pid)
      for child in children { sendSignal(SIGKILL, to: child) }
      postmaster.kill(SIGKILL)
      postmaster.wait()
      // Their memory, which holds PostgreSQL's shared memory, is released when they end: a
      // start before then finds it in use, and refuses.
      try? waitUntil("the killed server's processes end") { children.allSatisfy { !isRunningProcess($0) } }
    }
  }

  /// Shuts the server down at once (`pg_ctl stop -m immediate`) if it runs, and deletes its
  /// folder: gone from its path on return, its files deleted in the background. Calling it again
  /// does nothing; `deinit` and this process's exit call it.
  public func remove() {
    let removedNow = state.withLock { state -> Bool in
      guard !state.removed else { return false }
      state.removed = true
      state.postmaster.map(Self.shutDown)
      state.postmaster = nil
      return true
    }
    guard removedNow else { return }
    // The watchdog deletes the folder.
    watchdog.abandon()
    ExitCleanup.unregister(self)
  }

  /// Closes the watchdog's input without telling it that all is clean, as the end of this process
  /// does, and waits for it: it shuts the server down and deletes the folder. For the test that
  /// the watchdog does its job.
  package func abandonToWatchdog() {
    watchdog.abandon()
    state.withLock { state in
      state.postmaster?.wait()
      state.postmaster = nil
      state.removed = true
    }
    ExitCleanup.unregister(self)
  }

  // MARK: - Plumbing

  /// Starts the postmaster and waits until it accepts connections.
  ///
  /// - Throws: ``PortInUse`` when it could not listen on `port` on every address.
  private static func launchPostmaster(
    binaries: PostgresBinaries, folder: String, port: Int, listenAddresses: [String], durable: Bool
  ) throws -> ChildProcess {
    let dataDirectory = folder + "/data"
    let logFile = folder + "/server.log"
    let logStart = (try? FileManager.default.attributesOfItem(atPath: logFile)[.size] as? Int) ?? 0
    var settings = [
      "listen_addresses=" + listenAddresses.joined(separator: ","),
      "port=\(port)",
      "unix_socket_directories=" + folder,
      "max_connections=200",
      "fsync=" + (durable ? "on" : "off"),
    ]
    // After a crash (``kill()``), PostgreSQL syncs the data directory before it recovers: file by
    // file by default, 3 s for a new cluster's 1,300 files; with one `syncfs` (Linux, 14 and
    // later), a few milliseconds.
    #if os(Linux)
      if binaries.majorVersion >= 14 { settings.append("recovery_init_sync_method=syncfs") }
    #endif
    // The shell sends the server's output to its log, then becomes the server (`exec`): the
    // child's pid is the postmaster's.
    let command =
      serverUserPrefix + [
        "/bin/sh", "-c", "exec \"$@\" >>\"$0\" 2>&1", logFile, binaries.postgres, "-D", dataDirectory,
      ]
      + settings.flatMap { ["-c", $0] }
    let postmaster = try ChildProcess(
      command[0], Array(command.dropFirst()), input: .discard, output: .discard, errors: .pipe)
    let log = { logText(logFile, from: logStart) }
    do {
      try waitUntil("PostgreSQL accepts connections on port \(port)") {
        if postmaster.hasExited {
          let errors = postmaster.finish().errors
          let output = errors.isEmpty ? log() : errors + "\n" + log()
          if output.contains("Address already in use") { throw PortInUse(output) }
          throw TestInfrastructureError(
            "PostgreSQL \(postmaster.wait()) as it started; its log (\(logFile)):\n\(output)")
        }
        return isReady(dataDirectory: dataDirectory, postmaster: postmaster.pid)
      }
    } catch let error as PeerError {
      shutDown(postmaster)
      throw TestInfrastructureError("\(error); its log (\(logFile)):\n\(log())")
    }
    // A listen address it could not bind is only a warning, when it could bind another.
    let text = log()
    if text.contains("could not bind") {
      shutDown(postmaster)
      if text.contains("Address already in use") { throw PortInUse(text) }
      throw TestInfrastructureError("PostgreSQL could not listen on every address; its log (\(logFile)):\n\(text)")
    }
    return postmaster
  }

  /// Whether `postmaster.pid` says that the postmaster `pid` accepts connections: its first line
  /// is the pid and its eighth the status, `ready`, or `standby` for a hot standby (what
  /// `pg_ctl -w` waits for).
  private static func isReady(dataDirectory: String, postmaster pid: pid_t) -> Bool {
    guard let text = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8) else {
      return false
    }
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    return lines.count >= 8 && Int32(lines[0]) == pid
      && ["ready", "standby"].contains(lines[7].trimmingCharacters(in: .whitespaces))
  }

  /// An immediate shutdown (`SIGQUIT`) of a running postmaster, `SIGKILL` after 60 s.
  private static func shutDown(_ postmaster: ChildProcess) {
    postmaster.kill(SIGQUIT)
    if (try? waitUntil("the postmaster ends", { postmaster.hasExited })) == nil {
      postmaster.kill(SIGKILL)
    }
    postmaster.wait()
  }

  private func logTail() -> String {
    let text = logText(logFile, from: 0)
    let tail = text.split(separator: "\n", omittingEmptySubsequences: false).suffix(20).joined(separator: "\n")
    return "; the end of its log (\(logFile)):\n\(tail)"
  }

  /// A new folder of this process's, the postgres user's when this process runs as root.
  private static func makeFolder() throws -> String {
    // As root, in /tmp: the postgres user may not reach the folder that TMPDIR names.
    let parent = isRoot ? "/tmp" : NSTemporaryDirectory()
    var template = Array(URL(fileURLWithPath: parent).appendingPathComponent("liaison-pg-XXXXXX").path.utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
      throw TestInfrastructureError("cannot create a folder in \(parent): \(String(cString: strerror(errno)))")
    }
    let folder = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    if isRoot, let user = getpwnam(serverUser) {
      guard chown(folder, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
        let reason = String(cString: strerror(errno))
        try? FileManager.default.removeItem(atPath: folder)
        throw TestInfrastructureError("cannot give \(folder) to the \(serverUser) user: \(reason)")
      }
    }
    return folder
  }

  /// The watchdog's cleanup (`$1` the folder, `$2` the data directory): an immediate shutdown of
  /// the postmaster that `postmaster.pid` names, if that process is still a postmaster of this
  /// data directory (not a process that reuses its pid), then the folder deleted: renamed at once,
  /// then deleted in the background, by an `rm` that outlives the watchdog. Deleting files that
  /// were synced to disk takes seconds on a disk mounted with `discard` (2.3 s for a new cluster
  /// on this project's machines), which a test need not wait for.
  private static let serverCleanupScript = #"""
    running() {
      kill -0 "$1" 2>/dev/null || return 1
      [ -r "/proc/$1/stat" ] || return 0
      ! sed 's/^.*) //' "/proc/$1/stat" | grep -q '^Z'
    }
    pid=$(head -n 1 "$2/postmaster.pid" 2>/dev/null)
    if [ -n "$pid" ]; then
      command=$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null || ps -p "$pid" -o args= 2>/dev/null)
      case "$command" in
      *"$2"*)
        kill -QUIT "$pid" 2>/dev/null
        tries=0
        while running "$pid" && [ "$tries" -lt 100 ]; do sleep 0.1; tries=$((tries + 1)); done
        kill -KILL "$pid" 2>/dev/null
        ;;
      esac
    fi
    # Again after a while: an initdb still running when this process died may add a few files.
    mv "$1" "$1.removed" && { { rm -rf "$1.removed"; sleep 5; rm -rf "$1.removed"; } & }
    """#
}

/// PostgreSQL could not listen on its port: another process has it.
private struct PortInUse: Error, CustomStringConvertible {
  let description: String
  init(_ log: String) { description = log }
}

/// What the postmaster of a server is, guarded by a lock.
private final class ServerState: @unchecked Sendable {
  struct Value {
    var postmaster: ChildProcess?
    var removed = false
  }

  private let lock = NSLock()
  private var value: Value

  init(postmaster: ChildProcess) { value = Value(postmaster: postmaster) }

  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}

/// Where PostgreSQL's programs are: Debian's newest `/usr/lib/postgresql/VERSION/bin`, else the
/// first folder on `PATH` that has them.
private struct PostgresBinaries: Sendable {
  let directory: String
  /// The major version, from `initdb --version` (`initdb (PostgreSQL) 15.18`); 0 if unknown.
  var majorVersion = 0
  var initdb: String { directory + "/initdb" }
  var postgres: String { directory + "/postgres" }
  var psql: String { directory + "/psql" }

  static func find() -> PostgresBinaries? {
    let debian = "/usr/lib/postgresql"
    let versions = ((try? FileManager.default.contentsOfDirectory(atPath: debian)) ?? [])
      .map { ($0, $0.split(separator: ".").compactMap { Int($0) }) }
      .filter { !$0.1.isEmpty }
      .sorted { $0.1.lexicographicallyPrecedes($1.1) }
      .reversed()
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
    let candidates = versions.map { "\(debian)/\($0.0)/bin" } + path
    return
      candidates
      .map { PostgresBinaries(directory: $0) }
      .first { binaries in
        [binaries.initdb, binaries.postgres, binaries.psql].allSatisfy(FileManager.default.isExecutableFile)
      }
  }
}

/// The user that PostgreSQL runs as when this process is root.
let serverUser = "postgres"
private let setprivPath = "/usr/bin/setpriv"

/// What runs a command as ``serverUser`` when this process is root: `setpriv`, which executes the
/// command in its own process (`runuser` would stay its parent) with the user's ids and groups.
let serverUserPrefix: [String] =
  isRoot ? [setprivPath, "--reuid=\(serverUser)", "--regid=\(serverUser)", "--init-groups", "--"] : []

/// The processes whose parent is `pid` (Linux: read from `/proc`; none elsewhere).
private func childProcesses(of pid: pid_t) -> [pid_t] {
  #if os(Linux)
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { entry -> pid_t? in
      guard let child = pid_t(entry), let fields = processStat(child), fields.count > 1 else { return nil }
      return pid_t(fields[1]) == pid ? child : nil
    }
  #else
    return []
  #endif
}

/// Whether `pid` is a process that has not ended (a zombie has).
private func isRunningProcess(_ pid: pid_t) -> Bool {
  #if os(Linux)
    guard let fields = processStat(pid) else { return false }
    return fields.first != "Z"
  #else
    return Darwin.kill(pid, 0) == 0
  #endif
}

#if os(Linux)
  /// The fields of `/proc/PID/stat` after the command's name: the state, the parent's pid, ….
  private func processStat(_ pid: pid_t) -> [Substring]? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let nameEnd = text.lastIndex(of: ")")
    else { return nil }
    return text[text.index(after: nameEnd)...].split(separator: " ")
  }
#endif

private func sendSignal(_ signal: Int32, to pid: pid_t) {
  _ = kill(pid, signal)
}

/// What the file at `path` holds from byte `offset` on, as text.
func logText(_ path: String, from offset: Int) -> String {
  guard let data = FileManager.default.contents(atPath: path) else { return "" }
  return String(decoding: data.dropFirst(offset), as: UTF8.self)
}

// MARK: - Shared by the test servers and the network namespaces

/// The tests' own infrastructure (a PostgreSQL server, a network namespace) could not be set up:
/// what went wrong, with the failing command's error output or the server's log.
public struct TestInfrastructureError: Error, CustomStringConvertible {
  public let description: String
  public init(_ description: String) { self.description = description }
}

/// A command that ended with a failure: its arguments, how it ended, and what it printed.
struct CommandFailure: Error, CustomStringConvertible {
  let arguments: [String]
  let termination: Termination
  let output: String
  let errors: String

  var description: String {
    let printed = [errors, output].map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
    return "`\(arguments.joined(separator: " "))` \(termination)"
      + (printed.isEmpty ? "" : ": " + printed.joined(separator: "\n"))
  }
}

/// Runs `arguments` (the program first) to its end and returns its standard output.
///
/// - Parameter input: what the command reads on its standard input (a newline is added).
/// - Throws: ``CommandFailure`` when it does not exit with status 0, with its error output.
@discardableResult
func runCommand(_ arguments: [String], environment: [String: String]? = nil, input: String? = nil) throws -> String {
  let child: ChildProcess
  do {
    child = try ChildProcess(
      arguments[0], Array(arguments.dropFirst()), environment: environment, input: input == nil ? .discard : .pipe,
      output: .pipe, errors: .pipe)
  } catch {
    throw TestInfrastructureError("cannot run `\(arguments.joined(separator: " "))`: \(error)")
  }
  if let input { child.write(input) }
  let (output, errors, termination) = child.finish()
  guard termination == .exited(0) else {
    throw CommandFailure(arguments: arguments, termination: termination, output: output, errors: errors)
  }
  return output
}

/// Whether this is a CI run on Linux (`CI=true`), where a test must not be skipped for want of a
/// tool. Not on macOS, where GitHub's runners set `CI=true` as well: there PostgreSQL and network
/// namespaces are missing by design (``PostgresTestServer/unavailableReason``,
/// ``NetworkNamespace/unavailableReason``), and the tests that need them are skipped.
let runsInCI = isLinux && ProcessInfo.processInfo.environment["CI"] == "true"

/// A shell that undoes what this process set up, if this process ends without undoing it itself
/// (a crash, a trap, `SIGKILL`). It waits for a line on its standard input, a pipe that only this
/// process holds (close-on-exec): `done` ends it with nothing to do; the end of its input (this
/// process closed it, or ended and the kernel closed it) runs `script`. It ignores the signals that
/// a Ctrl-C or a closing terminal sends the whole process group.
final class Watchdog: Sendable {
  private let child: ChildProcess

  /// - Parameters:
  ///   - script: `sh` commands, which get `arguments` as `$1`, `$2`, ….
  init(script: String, arguments: [String]) throws {
    let program = "trap '' INT TERM HUP QUIT\nIFS= read -r line && [ \"$line\" = done ] && exit 0\n" + script
    child = try ChildProcess(
      "/bin/sh", ["-c", program, "liaison-watchdog"] + arguments, input: .pipe, output: .discard, errors: .discard)
  }

  /// Tells the watchdog that all is clean, and waits for it to end.
  func dismiss() {
    child.write("done")
    child.closeInput()
    child.wait()
  }

  /// Closes the watchdog's input, so that it cleans up now, and waits for it to end.
  func abandon() {
    child.closeInput()
    child.wait()
  }
}

/// What this process removes when it exits (`atexit`): the test servers and network namespaces
/// still alive.
enum ExitCleanup {
  private static let registry = Registry()

  private final class Registry: @unchecked Sendable {
    let lock = NSLock()
    var actions: [ObjectIdentifier: @Sendable () -> Void] = [:]

    init() { atexit { ExitCleanup.runAll() } }
  }

  /// Runs `action` at exit, unless `object` is unregistered first.
  static func register(_ object: AnyObject, _ action: @escaping @Sendable () -> Void) {
    registry.lock.withLock { registry.actions[ObjectIdentifier(object)] = action }
  }

  static func unregister(_ object: AnyObject) {
    _ = registry.lock.withLock { registry.actions.removeValue(forKey: ObjectIdentifier(object)) }
  }

  private static func runAll() {
    let actions = registry.lock.withLock { () -> [@Sendable () -> Void] in
      defer { registry.actions = [:] }
      return Array(registry.actions.values)
    }
    for action in actions { action() }
  }
}
