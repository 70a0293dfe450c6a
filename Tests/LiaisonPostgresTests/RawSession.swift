#if Postgres
  import LiaisonTestSupport

  /// A session of `psql` on a test server, for a transaction held open across steps: `run` sends
  /// SQL and returns the line `marker` once it is printed.
  struct RawSession {
    let child: ChildProcess
    let pid: String

    init(_ server: PostgresTestServer) throws {
      try self.init(command: server.psqlCommand(host: "127.0.0.1"))
    }

    /// A session through `bouncer`, in front of `server`.
    init(bouncer: PgBouncerTestServer, of server: PostgresTestServer) throws {
      try self.init(command: [server.psqlCommand(host: "127.0.0.1")[0], "-X", "-A", "-t", "-d", bouncer.url])
    }

    private init(command: [String]) throws {
      child = try ChildProcess(command[0], Array(command.dropFirst()), errors: .pipe)
      child.write("SELECT 'pid ' || pg_backend_pid();")
      var line = ""
      while !line.hasPrefix("pid ") { line = try child.readLine() }
      pid = String(line.dropFirst(4))
    }

    /// Runs `sql`, then prints `marker`, and returns the lines printed before it.
    @discardableResult
    func run(_ sql: String, marker: String = "done") throws -> [String] {
      child.write(sql)
      child.write("SELECT '\(marker)';")
      var lines: [String] = []
      while true {
        let line = try child.readLine()
        if line == marker { return lines }
        lines.append(line)
      }
    }

    /// Whether a statement of another session waits for a lock this session holds.
    func blocksAnother(_ server: PostgresTestServer) throws -> Bool {
      try server.psql("SELECT count(*) FROM pg_stat_activity WHERE \(pid) = ANY (pg_blocking_pids(pid))") != "0"
    }

    func end() {
      child.write("\\q")
      _ = child.finish()
    }
  }
#endif
