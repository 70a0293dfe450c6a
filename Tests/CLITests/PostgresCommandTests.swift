import Foundation
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

#if Postgres
  /// `liaison lock`, `presence`, `post`, `wait`, `observe`, `state`, `defaults`, `send`,
  /// `receive`, `peek`, `requeue` and `status` on PostgreSQL (`--postgres URL` or
  /// `$LIAISON_POSTGRES_URL`), across real `liaison` processes and a real server that the tests
  /// stop and whose sessions they terminate.
  @Suite("The liaison command on PostgreSQL")
  struct PostgresCommandTests {
    /// The folder for the commands' marker files, and `$LIAISON_CONTAINER` (which `--postgres`
    /// must win over).
    let directory = TemporaryDirectory()
    /// A namespace of this test's own on the shared server.
    let namespace = "cli-\(UInt32.random(in: 0...UInt32.max))"

    /// The environment of every `liaison` the tests start: the folder, and none of the caller's
    /// PostgreSQL variables unless `extra` sets them.
    func environment(_ extra: [String: String]) -> [String: String] {
      ["LIAISON_CONTAINER": directory.path, "LIAISON_POSTGRES_URL": "", "LIAISON_NAMESPACE": ""].merging(extra) {
        $1
      }
    }

    /// Starts `liaison ARGS`, its standard error piped.
    func start(_ arguments: [String], environment extra: [String: String] = [:]) throws -> ChildProcess {
      try ChildProcess(liaisonPath, arguments, environment: environment(extra), errors: .pipe)
    }

    /// Runs `liaison ARGS` to its end: the status a shell reports, standard output and error.
    func liaison(_ arguments: [String], environment extra: [String: String] = [:]) throws -> (
      status: Int32, output: String, errors: String
    ) {
      let (output, errors, termination) = try start(arguments, environment: extra).finish()
      return (termination.shellStatus, output, errors)
    }

    /// `--postgres URL --namespace NAME` for `server`.
    func place(_ server: PostgresTestServer) -> [String] {
      ["--postgres", server.url, "--namespace", namespace]
    }

    func contents(_ file: String) -> String {
      (try? String(contentsOfFile: directory.path + "/" + file, encoding: .utf8)) ?? ""
    }

    // MARK: - lock

    /// Through a pooler in transaction mode, where its lock would be shared with the pooler's
    /// other clients, `liaison lock` refuses at once, says what to do, and never runs its command.
    @Test(
      .enabled(
        if: PostgresTestServer.mustRun && PgBouncerTestServer.mustRun,
        "needs PostgreSQL and PgBouncer (apt-get install postgresql pgbouncer)"))
    func lockThroughATransactionPoolerRefusesAndRunsNothing() throws {
      let server = try PostgresTestServer.shared.get()
      let bouncer = try PgBouncerTestServer.start(in: server, mode: .transaction)
      defer { bouncer.remove() }
      let marker = directory.path + "/ran"
      let (status, _, errors) = try liaison(
        ["lock", "--postgres", bouncer.url, "--namespace", namespace, "job", "--", "touch", marker])
      #expect(status != 0)
      #expect(errors.contains("pooler in transaction or statement mode"), "\(errors)")
      #expect(!FileManager.default.fileExists(atPath: marker))
      // With pool_mode=transaction the lock would be a lease, which would end while the command
      // ran were liaison killed: refused too (usage, 64), the command never run.
      let (leased, _, leaseErrors) = try liaison(
        [
          "lock", "--postgres", bouncer.url + "&pool_mode=transaction", "--namespace", namespace, "job", "--", "touch",
          marker,
        ])
      #expect(leased == 64, "\(leaseErrors)")
      #expect(leaseErrors.contains("is a lease that liaison renews"), "\(leaseErrors)")
      #expect(!FileManager.default.fileExists(atPath: marker))
    }

    /// Three `liaison lock` started at once run their commands one at a time, each with a fencing
    /// token larger than the one before.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func threeLocksStartedAtOnceRunOneAtATimeWithGrowingTokens() throws {
      let server = try PostgresTestServer.shared.get()
      let log = directory.path + "/log"
      // The pause is the work done under the lock: the window an overlap would show in.
      let script = "echo start $LIAISON_FENCING_TOKEN >> \(log); sleep 0.3; echo end $LIAISON_FENCING_TOKEN >> \(log)"
      let jobs = try (0..<3).map { _ in try start(["lock"] + place(server) + ["job", "--", "sh", "-c", script]) }
      for job in jobs {
        let (_, errors, termination) = job.finish()
        #expect(termination == .exited(0), "\(errors)")
      }
      let lines = contents("log").split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
      try #require(lines.count == 6, "\(lines)")
      var tokens: [UInt64] = []
      for pair in stride(from: 0, to: 6, by: 2) {
        #expect(lines[pair].first == "start" && lines[pair + 1].first == "end", "overlap: \(lines)")
        #expect(lines[pair].last == lines[pair + 1].last, "\(lines)")
        tokens.append(try #require(UInt64(lines[pair].last ?? "")))
      }
      #expect(tokens == tokens.sorted() && Set(tokens).count == 3, "tokens \(tokens)")
    }

    /// The command's own status is liaison's; a command not found is 127; a command killed by a
    /// signal is reported as the shell would.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func lockPassesTheCommandsStatus() throws {
      let server = try PostgresTestServer.shared.get()
      let lock = ["lock"] + place(server) + ["job", "--"]
      #expect(try liaison(lock + ["sh", "-c", "exit 3"]).status == 3)
      #expect(try liaison(lock + ["sh", "-c", "echo ran"]).output == "ran\n")
      let missing = try liaison(lock + ["no-such-command-anywhere"])
      #expect(missing.status == 127)
      #expect(missing.errors.hasPrefix("liaison: cannot run 'no-such-command-anywhere': no such command"))
      #expect(try liaison(lock + ["sh", "-c", "kill -9 $$"]).status == 128 + 9)
      #expect(try liaison(lock + ["sh", "-c", "kill -TERM $$"]).status == 128 + SIGTERM)
      // The lock was released each time: a lock with no wait is had at once.
      #expect(try liaison(["lock"] + place(server) + ["job", "--timeout", "0", "--", "true"]).status == 0)
    }

    /// A TERM sent to liaison reaches the command, and liaison exits with the command's status.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func aTermSentToLiaisonReachesTheCommand() throws {
      let server = try PostgresTestServer.shared.get()
      let job = try start(
        ["lock"] + place(server) + ["job", "--", "sh", "-c", "trap 'exit 3' TERM; echo ready; read l"])
      #expect(try job.readLine() == "ready")
      job.kill(SIGTERM)
      #expect(job.wait() == .exited(3))
    }

    /// The server stops while a command holds the lock: the command gets SIGTERM, and liaison
    /// exits with the lock-lost status after one line on standard error. The lock is free for the
    /// next holder once the server is back.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func aServerRestartStopsTheCommandAndExits69() throws {
      let server = try PostgresTestServer.start()
      let marker = directory.path + "/terminated"
      let job = try start(
        ["lock"] + place(server) + [
          "nightly-report", "--", "sh", "-c",
          "trap 'echo TERM > \(marker); kill $s; exit 0' TERM; sleep 1000 & s=$!; echo ready; wait $s",
        ])
      #expect(try job.readLine() == "ready")
      try server.stop()
      let (_, errors, termination) = job.finish()
      #expect(termination == .exited(69))
      #expect(contents("terminated") == "TERM\n")
      let lines = errors.split(separator: "\n")
      #expect(lines.count == 1, "\(errors)")
      #expect(errors.hasPrefix("liaison: lost the lock 'nightly-report'"), "\(errors)")
      try server.startAgain()
      let next = try liaison(["lock"] + place(server) + ["nightly-report", "--timeout", "0", "--", "true"])
      #expect(next.status == 0, "\(next.errors)")
    }

    /// A command that ignores TERM is KILLed once the grace period has passed, not before.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func aCommandThatIgnoresTermIsKilledAfterTheGracePeriod() throws {
      let server = try PostgresTestServer.start()
      let job = try start(
        ["lock"] + place(server) + ["--grace", "1", "job", "--", "sh", "-c", "trap '' TERM; echo $$; exec sleep 1000"])
      let commandPID = try #require(pid_t(try job.readLine()))
      // Ends every session but psql's own: the lock's among them.
      try server.psql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' "
          + "AND pid <> pg_backend_pid()")
      let (_, errors, termination) = job.finish()
      #expect(termination == .exited(69), "\(errors)")
      #expect(errors.contains("SIGKILL follows in 1 s"), "\(errors)")
      // A command that ignores TERM is gone: the SIGKILL after the grace came.
      #expect(!ProcessTable.isRunning(commandPID))
    }

    // MARK: - Choosing the place

    /// `$LIAISON_POSTGRES_URL` and `$LIAISON_NAMESPACE` choose the database; `--postgres`,
    /// `--namespace` and `--container` on the command line win over them.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func theEnvironmentChoosesTheDatabaseAndTheCommandLineWins() throws {
      let server = try PostgresTestServer.shared.get()
      let byEnvironment = ["LIAISON_POSTGRES_URL": server.url, "LIAISON_NAMESPACE": namespace]
      #expect(try liaison(["post", "s", "--state", "5"], environment: byEnvironment).status == 0)
      #expect(try liaison(["state", "s"] + place(server)).output == "5\n")
      let rows = try server.psql("SELECT state FROM liaison.signal WHERE namespace = '\(namespace)' AND name = 's'")
      #expect(rows == "5")

      // --postgres over a variable that names no server.
      let unreachable = ["LIAISON_POSTGRES_URL": "postgres://nobody@127.0.0.1:1/none", "LIAISON_NAMESPACE": namespace]
      #expect(try liaison(["state", "s", "--postgres", server.url], environment: unreachable).output == "5\n")
      // --namespace over $LIAISON_NAMESPACE: nothing was posted in the other namespace.
      let other = try liaison(["state", "s", "--namespace", namespace + "-other"], environment: byEnvironment)
      #expect(other.status == 1, "\(other)")
      // --container over $LIAISON_POSTGRES_URL: the folder, not the database.
      #expect(
        try liaison(["post", "s", "--state", "7", "--container", directory.path], environment: unreachable).status == 0)
      #expect(try liaison(["state", "s", "--container", directory.path], environment: unreachable).output == "7\n")
      #expect(try liaison(["state", "s"] + place(server)).output == "5\n")
      // The default namespace.
      #expect(try liaison(["post", "s", "--state", "8", "--postgres", server.url]).status == 0)
      let defaultRow = try server.psql("SELECT state FROM liaison.signal WHERE namespace = 'default' AND name = 's'")
      #expect(defaultRow == "8")
    }

    /// A URL that cannot be read (or whose port is out of range), a namespace that breaks the
    /// naming rule, and both a folder and a database: the usage status and one line that says
    /// what to write.
    @Test func badPlaceOptionsAreUsageErrors() throws {
      let notURL = try liaison(["post", "s", "--postgres", "db.internal/app"])
      #expect(notURL.status == 64)
      #expect(notURL.errors.hasPrefix("liaison: The PostgreSQL URL is not usable"), "\(notURL.errors)")
      #expect(notURL.errors.contains("postgres://USER"))
      #expect(notURL.errors.split(separator: "\n").count == 1)
      // A port beyond 16 bits used to be truncated (120969 reached a server on 55433).
      let badPort = try liaison(["post", "s", "--postgres", "postgres://a@127.0.0.1:120969/b"])
      #expect(badPort.status == 64, "\(badPort.errors)")
      #expect(badPort.errors.contains("the port '120969' is not a number from 1 to 65535"), "\(badPort.errors)")
      let badNamespace = try liaison(["post", "s", "--postgres", "postgres://a@127.0.0.1:1/b", "--namespace", "a b"])
      #expect(badNamespace.status == 64, "\(badNamespace.errors)")
      #expect(badNamespace.errors.contains("--namespace"))
      let both = try liaison(["post", "s", "--postgres", "postgres://a@h/b", "--container", directory.path])
      #expect(both.status == 64)
      #expect(both.errors.contains("not both"))
      let namespaceAlone = try liaison(["post", "s", "--namespace", "x"])
      #expect(namespaceAlone.status == 64)
    }

    /// No server where the URL points: status 70, one line.
    @Test func anUnreachableServerIsOneLineAndStatus70() throws {
      let result = try liaison(["post", "s", "--postgres", "postgres://liaison@127.0.0.1:1/liaison"])
      #expect(result.status == 70)
      #expect(result.errors.hasPrefix("liaison: "), "\(result.errors)")
      #expect(result.errors.split(separator: "\n").count == 1, "\(result.errors)")
    }

    // MARK: - Presences and signals

    /// A claim held by one liaison's command is seen by another process, refused to a third, and
    /// gone when the command ends.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func presenceClaimIsSeenByOtherProcesses() throws {
      let server = try PostgresTestServer.shared.get()
      let holder = try start(
        ["presence", "claim"] + place(server) + [
          "recording", "--info", "episode 7", "--", "sh", "-c", "echo ready; read l; exit 0",
        ]
      )
      #expect(try holder.readLine() == "ready")
      let active = try liaison(["presence", "check", "recording"] + place(server))
      #expect(active.status == 0, "\(active.errors)")
      #expect(active.output.hasPrefix("active: pid \(holder.pid) (claim)"), "\(active.output)")
      #expect(active.output.contains("episode 7"))
      let listed = try liaison(["presence", "list"] + place(server))
      #expect(listed.output.hasPrefix("recording\tactive: pid \(holder.pid) (claim)"), "\(listed)")
      let second = try liaison(["presence", "claim"] + place(server) + ["recording", "--", "true"])
      #expect(second.status == 75, "\(second.errors)")
      holder.closeInput()
      #expect(holder.wait() == .exited(0))
      let inactive = try liaison(["presence", "check", "recording"] + place(server))
      #expect(inactive.status == 1 && inactive.output == "inactive\n")
    }

    /// `wait` prints the state of the post another process makes, `state` reads and sets it, and
    /// a signal never posted has no state.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func waitHearsAPostFromAnotherProcessAndStateReadsIt() throws {
      let server = try PostgresTestServer.shared.get()
      let waiter = try start(["wait", "ready"] + place(server))
      // The waiter hears the first post made after it listens: post until it has.
      try waitUntil("the waiter hears a post") {
        let posted = try liaison(["post", "ready", "--state", "42"] + place(server))
        #expect(posted.status == 0, "\(posted.errors)")
        return waiter.hasExited
      }
      let (output, errors, termination) = waiter.finish()
      #expect(termination == .exited(0), "\(errors)")
      #expect(output == "42\n")
      #expect(try liaison(["state", "ready"] + place(server)).output == "42\n")
      #expect(try liaison(["state", "ready", "--set", "43"] + place(server)).status == 0)
      #expect(try liaison(["state", "ready"] + place(server)).output == "43\n")
      let never = try liaison(["state", "never-posted"] + place(server))
      #expect(never.status == 1 && never.output.isEmpty)
      let timedOut = try liaison(["wait", "quiet", "--timeout", "0.2"] + place(server))
      #expect(timedOut.status == 75)
    }

    /// `observe` prints a line for each post another process makes, for each signal it names.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func observePrintsThePostsOfAnotherProcess() throws {
      let server = try PostgresTestServer.shared.get()
      let observer = try start(["observe", "first", "second"] + place(server))
      var line: String?
      try waitUntil("the observer prints a post") {
        let posted = try liaison(["post", "first", "--state", "1"] + place(server))
        #expect(posted.status == 0, "\(posted.errors)")
        line = try? observer.readLine(timeout: 0.5)
        return line != nil
      }
      #expect(line?.hasPrefix("first 1 ") == true, "\(line ?? "")")
      // Both signals were observed before the first line: the next post is heard at once.
      #expect(try liaison(["post", "second", "--state", "2"] + place(server)).status == 0)
      #expect(try observer.readLine() == "second 2 1")
      observer.kill(SIGTERM)
      observer.wait()
    }

    // MARK: - Defaults, mailboxes and status

    /// What one `liaison defaults write` stores, another reads, observes and deletes; the
    /// environment names the database as well as --postgres does.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func defaultsRoundTripBetweenProcesses() throws {
      let server = try PostgresTestServer.shared.get()
      #expect(try liaison(["defaults", "write", "app", "theme", "dark"] + place(server)).status == 0)
      #expect(try liaison(["defaults", "write", "app", "volume", "0.8"] + place(server)).status == 0)
      let theme = try liaison(["defaults", "read", "app", "theme"] + place(server))
      #expect(theme.status == 0 && theme.output == "\"dark\"\n", "\(theme)")
      let byEnvironment = ["LIAISON_POSTGRES_URL": server.url, "LIAISON_NAMESPACE": namespace]
      let domain = try liaison(["defaults", "read", "app"], environment: byEnvironment)
      #expect(domain.output == "theme = \"dark\"\nvolume = 0.8\n", "\(domain)")
      let all = try liaison(["defaults", "read", "--json"] + place(server))
      #expect(all.output == #"{"app":{"theme":"dark","volume":0.8}}"# + "\n", "\(all)")

      // An observer of a key prints its value now, then each new value.
      let observer = try start(["defaults", "observe", "app", "theme"] + place(server))
      #expect(try observer.readLine() == "\"dark\"")
      #expect(try liaison(["defaults", "write", "app", "theme", "light"] + place(server)).status == 0)
      #expect(try observer.readLine() == "\"light\"")
      #expect(try liaison(["defaults", "delete", "app", "theme"] + place(server)).status == 0)
      #expect(try observer.readLine() == "null")
      observer.kill(SIGTERM)
      observer.wait()

      let deleted = try liaison(["defaults", "read", "app", "theme"] + place(server))
      #expect(deleted.status == 1 && deleted.output.isEmpty, "\(deleted)")
      #expect(try liaison(["defaults", "read", "nowhere", "theme"] + place(server)).status == 1)
      let badKey = try liaison(["defaults", "write", "app", "a b", "x"] + place(server))
      #expect(badKey.status == 64 && badKey.errors.hasPrefix("liaison: "), "\(badKey)")
      #expect(try liaison(["defaults", "delete", "app"] + place(server)).status == 0)
      #expect(try liaison(["defaults", "read", "app"] + place(server)).output.isEmpty)
    }

    /// Messages sent by one process are peeked at without being consumed, then received in order
    /// by others: --count takes some, --no-ack leaves them for the next receiver, --json shows
    /// the envelope. `status` lists the mailbox and the defaults domain.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func sendPeekReceiveAndStatus() throws {
      let server = try PostgresTestServer.shared.get()
      let first = try liaison(["send", "inbox", "hello"] + place(server))
      #expect(first.status == 0, "\(first.errors)")
      let id = first.output.trimmingCharacters(in: .newlines)
      #expect(!id.isEmpty)
      #expect(
        try liaison(["send", "inbox", #"{"n":1}"#, "--id", "m2", "--sender", "tester"] + place(server)).output == "m2\n"
      )
      #expect(try liaison(["send", "inbox", "third"] + place(server)).status == 0)
      #expect(try liaison(["send", "inbox", "again", "--id", "m2"] + place(server)).output == "m2\n")  // stored once

      for _ in 0..<2 {
        let peeked = try liaison(["peek", "inbox"] + place(server))
        let lines = peeked.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(peeked)")
        #expect(lines.first == "\(id)\tliaison\t\"hello\"", "\(peeked)")
        #expect(lines.dropFirst().first?.hasPrefix("m2\ttester\t") == true, "\(peeked)")
      }
      #expect(try liaison(["peek", "empty"] + place(server)).output.isEmpty)

      #expect(try liaison(["defaults", "write", "app", "mode", "fast"] + place(server)).status == 0)
      let status = try liaison(["status"] + place(server))
      #expect(status.status == 0, "\(status)")
      #expect(status.output.hasPrefix("Namespace \(namespace) (PostgreSQL)\n"), "\(status.output)")
      #expect(status.output.contains("Defaults:\n  app\t1 key\n"), "\(status.output)")
      #expect(status.output.contains("Mailboxes:\n  inbox\t3 waiting\t0 quarantined\t"), "\(status.output)")
      #expect(status.output.contains("Locks: not available on PostgreSQL\n"), "\(status.output)")
      let statusJSON = try liaison(["status", "--json"] + place(server))
      let report = try #require(
        try JSONSerialization.jsonObject(with: Data(statusJSON.output.utf8)) as? [String: Any], "\(statusJSON)")
      #expect(report["namespace"] as? String == namespace)
      #expect((report["mailboxes"] as? [[String: Any]])?.first?["waiting"] as? Int == 3)

      let one = try liaison(["receive", "inbox", "--count", "1"] + place(server))
      #expect(one.status == 0 && one.output == "\"hello\"\n", "\(one)")
      let unacknowledged = try liaison(["receive", "inbox", "--no-ack", "--json"] + place(server))
      let envelopes = unacknowledged.output.split(separator: "\n").map(String.init)
      #expect(envelopes.count == 2, "\(unacknowledged)")
      let envelope = try #require(
        try JSONSerialization.jsonObject(with: Data((envelopes.first ?? "").utf8)) as? [String: Any])
      #expect(envelope["id"] as? String == "m2")
      #expect(envelope["sender"] as? String == "tester")
      #expect((envelope["payload"] as? [String: Any])?["n"] as? Int == 1)
      let rest = try liaison(["receive", "inbox"] + place(server))
      #expect(rest.status == 0 && rest.output.split(separator: "\n").last == "\"third\"", "\(rest)")
      #expect(rest.output.split(separator: "\n").count == 2, "\(rest)")
      let none = try liaison(["receive", "inbox"] + place(server))
      #expect(none.status == 0 && none.output.isEmpty, "\(none)")
      #expect(try liaison(["requeue", "inbox"] + place(server)).output == "0\n")
    }

    /// While one `receive --follow` holds a mailbox, another `receive` exits 75 at once.
    @Test(.enabled(if: PostgresTestServer.mustRun, "needs PostgreSQL (apt-get install postgresql)"))
    func aSecondReceiverIsBusy() throws {
      let server = try PostgresTestServer.shared.get()
      let follower = try start(["receive", "jobs", "--follow"] + place(server))
      #expect(try liaison(["send", "jobs", "first"] + place(server)).status == 0)
      // Printed: the follower holds the mailbox.
      #expect(try follower.readLine() == "\"first\"")
      let second = try liaison(["receive", "jobs"] + place(server))
      #expect(second.status == 75, "\(second)")
      #expect(second.errors.contains("already has a receiver"), "\(second.errors)")
      #expect(try liaison(["send", "jobs", "second"] + place(server)).status == 0)
      #expect(try follower.readLine() == "\"second\"")
      follower.kill(SIGTERM)
      follower.wait()
    }
  }
#else
  /// Without the package trait `Postgres`, `--postgres` and `$LIAISON_POSTGRES_URL` say how to
  /// build with it.
  @Suite("The liaison command built without PostgreSQL")
  struct WithoutPostgresTests {
    @Test func postgresNeedsTheTrait() throws {
      for (arguments, environment) in [
        (["post", "s", "--postgres", "postgres://a@h/b"], [:]),
        (["post", "s"], ["LIAISON_POSTGRES_URL": "postgres://a@h/b"]),
      ] {
        let child = try ChildProcess(liaisonPath, arguments, environment: environment, errors: .pipe)
        let (_, errors, termination) = child.finish()
        #expect(termination == .exited(64))
        #expect(errors.contains("swift build --traits Postgres"), "\(errors)")
      }
    }
  }
#endif
