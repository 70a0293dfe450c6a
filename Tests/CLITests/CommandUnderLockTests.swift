import Foundation
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// `liaison lock NAME -- CMD` and `liaison presence claim NAME -- CMD` under ordinary job control:
/// the command holds what it runs under, and is an ordinary child of the caller's session.
@Suite("The command that liaison runs under a lock")
struct CommandUnderLockTests {
  let directory = TemporaryDirectory()

  /// Starts `liaison ARGS` on the test's container.
  func start(_ arguments: [String], input: ChildProcess.Stream = .pipe) throws -> ChildProcess {
    try ChildProcess(liaisonPath, arguments, environment: ["LIAISON_CONTAINER": directory.path], input: input)
  }

  /// Runs a command to its end on the test's container and returns its shell status.
  func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
    try ChildProcess(
      executable, arguments, environment: ["LIAISON_CONTAINER": directory.path], output: .discard, errors: .discard
    ).finish().termination.shellStatus
  }

  var lockFile: String { directory.path + "/.liaison/locks/db" }

  /// Whether another process holds the `flock` of the lock `db`: what `flock -n FILE true` tells
  /// (util-linux's `flock`, which stock macOS lacks), asked in this process.
  func lockIsHeld() throws -> Bool {
    let fd = open(lockFile, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw SpawnError("cannot open \(lockFile): errno \(errno)") }
    defer { close(fd) }
    if flock(fd, LOCK_EX | LOCK_NB) == 0 { return false }  // released by close
    guard errno == EWOULDBLOCK else { throw SpawnError("flock of \(lockFile): errno \(errno)") }
    return true
  }

  /// SIGKILLs `pid` if it is still a `liaison` process: what remains of the tool.
  func killIfLiaison(_ pid: pid_t) {
    #if os(Linux)
      let executable = URL(fileURLWithPath: "/proc/\(pid)/exe").resolvingSymlinksInPath().lastPathComponent
    #else
      // BSD ps: the executable's path (`comm`); nothing for a process that has gone.
      let shown = try? ChildProcess("ps", ["-o", "comm=", "-p", "\(pid)"], input: .discard, errors: .discard).finish()
      let executable = shown.map { URL(fileURLWithPath: $0.output.trimmingCharacters(in: .whitespacesAndNewlines)) }?
        .lastPathComponent
    #endif
    if executable == "liaison" { kill(pid, SIGKILL) }
  }

  @Test func theLockStaysWithTheCommandWhenWhatRemainsOfLiaisonIsKilled() throws {
    let job = try start(["lock", "db", "--", "sh", "-c", "echo $$; exec sleep 30"])
    let commandPID = try #require(pid_t(try job.readLine()))
    killIfLiaison(job.pid)
    killIfLiaison(commandPID)
    #expect(ProcessTable.isRunning(commandPID))
    #expect(try lockIsHeld())
    #expect(try run(liaisonPath, ["lock", "db", "--timeout", "0.2", "--", "true"]) == 75)

    kill(commandPID, SIGKILL)
    job.wait()
    #expect(try !lockIsHeld())
    #expect(try run(liaisonPath, ["lock", "db", "--timeout", "0.2", "--", "true"]) == 0)
  }

  @Test func theClaimStaysWithTheCommandAndNamesItsProcess() throws {
    let job = try start(["presence", "claim", "recorder", "--", "sh", "-c", "echo $$; exec sleep 30"])
    let commandPID = try #require(pid_t(try job.readLine()))
    killIfLiaison(job.pid)
    killIfLiaison(commandPID)
    let check = try ChildProcess(
      liaisonPath, ["presence", "check", "recorder"], environment: ["LIAISON_CONTAINER": directory.path]
    ).finish()
    #expect(check.termination == .exited(0))
    #expect(check.output.hasPrefix("active: pid \(commandPID) (claim)"), "\(check.output)")
    #expect(try run(liaisonPath, ["presence", "claim", "recorder", "--", "true"]) == 75)

    kill(commandPID, SIGKILL)
    job.wait()
    #expect(try run(liaisonPath, ["presence", "check", "recorder"]) == 1)
    #expect(try run(liaisonPath, ["presence", "claim", "recorder", "--", "true"]) == 0)
  }

  @Test func theCommandHasTheCallersSignalMaskIgnoredSignalsAndProcessGroup() throws {
    // perl blocks SIGUSR1 and ignores SIGUSR2, shows its own mask, ignored signals and process
    // group, then becomes `liaison lock` with a command that shows its own. (Not through `sh`:
    // dash clears the signal mask when it starts.) The mask is the kernel's (sigprocmask), and
    // perl's %SIG shows a signal ignored since the process started as IGNORE: the same on Linux
    // and macOS, where /proc/self/status is not.
    let show = #"""
      use POSIX (); use Config; my @name = split(q( ), $Config{sig_name});
      my $mask = POSIX::SigSet->new; POSIX::sigprocmask(POSIX::SIG_BLOCK(), undef, $mask);
      print q(blocked:), join(q(,), grep { $mask->ismember($_) } 1..31), qq(\n);
      print q(ignored:), join(q(,), grep { ($SIG{$name[$_]} // q()) eq q(IGNORE) } 1..31), qq(\n);
      print getpgrp(), qq(\n);
      """#
    let caller = try ChildProcess(
      "perl",
      [
        "-MPOSIX", "-e",
        "sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGUSR1)); $SIG{USR2} = 'IGNORE'; $| = 1; \(show) exec @ARGV",
        liaisonPath, "lock", "x", "--", "perl", "-e", show,
      ], environment: ["LIAISON_CONTAINER": directory.path]
    ).finish()
    let lines = caller.output.split(separator: "\n").map(String.init)
    try #require(lines.count == 6, "\(caller.output)")
    #expect(lines[3...] == lines[..<3], "liaison's caller: \(lines[..<3]); the command: \(lines[3...])")
    #expect(lines[0] == "blocked:\(SIGUSR1)")  // as the caller set it
    #expect(lines[1].dropFirst("ignored:".count).split(separator: ",").contains("\(SIGUSR2)"), "\(lines[1])")
  }

  @Test func aTermSentToTheReportedProcessReachesTheCommand() throws {
    // `read` waits on the input this test keeps open; no child process that could outlive it.
    let job = try start(["lock", "db", "--", "sh", "-c", "trap 'exit 3' TERM; echo $$; read line"])
    let commandPID = try #require(pid_t(try job.readLine()))
    kill(commandPID, SIGTERM)
    #expect(job.wait() == .exited(3))
    #expect(try !lockIsHeld())
  }

  @Test(.enabled(if: isLinux, "runs GNU timeout (coreutils), which stock macOS lacks"))
  func timeoutEndsTheCommandAndTheLockWithIt() throws {
    let job = try ChildProcess(
      "timeout", ["1", liaisonPath, "lock", "db", "--", "sh", "-c", "echo $$; exec sleep 30"],
      environment: ["LIAISON_CONTAINER": directory.path])
    let commandPID = try #require(pid_t(try job.readLine()))
    #expect(job.wait() == .exited(124))  // ended by timeout, not by the command's end
    #expect(!ProcessTable.isRunning(commandPID))
    #expect(try !lockIsHeld())
  }

  @Test func underATerminalTheCommandReadsItAndCtrlCEndsIt() throws {
    // script(1) runs the command on a new pseudo-terminal, in its foreground process group, and
    // copies what we write to the terminal's input.
    #if os(Linux)
      // util-linux: `-c` runs the command through $SHELL; `-e` exits with its status, 128+N
      // for a command killed by signal N.
      let arguments = ["-q", "-e", "-c", "\(liaisonPath) lock db -- cat", "/dev/null"]
      let interrupted: [Termination] = [.exited(128 + SIGINT)]
    #else
      // BSD (macOS): the command follows the file, run directly; script exits with its status,
      // N (some versions 128+N) for a command killed by signal N.
      let arguments = ["-q", "/dev/null", liaisonPath, "lock", "db", "--", "cat"]
      let interrupted: [Termination] = [.exited(SIGINT), .exited(128 + SIGINT)]
    #endif
    let terminal = try ChildProcess(
      "script", arguments, environment: ["LIAISON_CONTAINER": directory.path, "SHELL": "/bin/sh"])
    terminal.write("typed line")
    // The terminal echoes the line, then cat prints it back: two lines.
    #expect(try terminal.readLine().hasSuffix("typed line\r"))
    #expect(try terminal.readLine() == "typed line\r")
    writeAll(terminal.inputDescriptor!, [3])  // Ctrl-C: SIGINT to the foreground process group
    let ended = terminal.wait()
    #expect(interrupted.contains(ended), "script \(ended)")
    #expect(try !lockIsHeld())
  }
}

enum ProcessTable {
  /// Whether a process with this id exists and is not a zombie.
  static func isRunning(_ pid: pid_t) -> Bool {
    #if os(Linux)
      guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
      return !stat.contains(") Z ")
    #else
      // BSD ps: the state, `Z…` for a zombie; nothing for a process that has gone.
      let ps = try? ChildProcess("ps", ["-o", "stat=", "-p", "\(pid)"], input: .discard, errors: .discard)
      guard let shown = ps?.finish() else { return false }
      let state = shown.output.trimmingCharacters(in: .whitespacesAndNewlines)
      return !state.isEmpty && !state.hasPrefix("Z")
    #endif
  }
}
