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

  /// SIGKILLs `pid` if it is still a `liaison` process: what remains of the tool.
  func killIfLiaison(_ pid: pid_t) {
    let executable = URL(fileURLWithPath: "/proc/\(pid)/exe").resolvingSymlinksInPath().lastPathComponent
    if executable == "liaison" { kill(pid, SIGKILL) }
  }

  @Test func theLockStaysWithTheCommandWhenWhatRemainsOfLiaisonIsKilled() throws {
    let job = try start(["lock", "db", "--", "sh", "-c", "echo $$; exec sleep 30"])
    let commandPID = try #require(pid_t(try job.readLine()))
    killIfLiaison(job.pid)
    killIfLiaison(commandPID)
    #expect(ProcessTable.isRunning(commandPID))
    #expect(try run("flock", ["-n", lockFile, "true"]) == 1)
    #expect(try run(liaisonPath, ["lock", "db", "--timeout", "0.2", "--", "true"]) == 75)

    kill(commandPID, SIGKILL)
    job.wait()
    #expect(try run("flock", ["-n", lockFile, "true"]) == 0)
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
    // dash clears the signal mask when it starts.)
    let show = "open(F, '/proc/self/status'); print grep(/^Sig(Blk|Ign)/, <F>); print getpgrp(), qq(\\n);"
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
    #expect(lines[0] == "SigBlk:\t0000000000000200")  // SIGUSR1 (10), as the caller set it
    let ignored = UInt64(lines[1].dropFirst("SigIgn:\t".count), radix: 16) ?? 0
    #expect(ignored & (1 << (SIGUSR2 - 1)) != 0, "\(lines[1])")  // as the caller set it
  }

  @Test func aTermSentToTheReportedProcessReachesTheCommand() throws {
    // `read` waits on the input this test keeps open; no child process that could outlive it.
    let job = try start(["lock", "db", "--", "sh", "-c", "trap 'exit 3' TERM; echo $$; read line"])
    let commandPID = try #require(pid_t(try job.readLine()))
    kill(commandPID, SIGTERM)
    #expect(job.wait() == .exited(3))
    #expect(try run("flock", ["-n", lockFile, "true"]) == 0)
  }

  @Test func timeoutEndsTheCommandAndTheLockWithIt() throws {
    let started = monotonicNanoseconds()
    let job = try ChildProcess(
      "timeout", ["1", liaisonPath, "lock", "db", "--", "sh", "-c", "echo $$; exec sleep 30"],
      environment: ["LIAISON_CONTAINER": directory.path])
    let commandPID = try #require(pid_t(try job.readLine()))
    #expect(job.wait() == .exited(124))
    #expect(monotonicNanoseconds() - started < 2_000_000_000)
    #expect(!ProcessTable.isRunning(commandPID))
    #expect(try run("flock", ["-n", lockFile, "true"]) == 0)
  }

  @Test func underATerminalTheCommandReadsItAndCtrlCEndsIt() throws {
    // script(1) runs the command on a new pseudo-terminal, in its foreground process group, and
    // copies what we write to the terminal's input.
    let terminal = try ChildProcess(
      "script", ["-q", "-e", "-c", "\(liaisonPath) lock db -- cat", "/dev/null"],
      environment: ["LIAISON_CONTAINER": directory.path, "SHELL": "/bin/sh"])
    terminal.write("typed line")
    // The terminal echoes the line, then cat prints it back: two lines.
    #expect(try terminal.readLine().hasSuffix("typed line\r"))
    #expect(try terminal.readLine() == "typed line\r")
    writeAll(terminal.inputDescriptor!, [3])  // Ctrl-C: SIGINT to the foreground process group
    #expect(terminal.wait() == .exited(128 + SIGINT))
    #expect(try run("flock", ["-n", lockFile, "true"]) == 0)
  }
}

enum ProcessTable {
  /// Whether a process with this id exists and is not a zombie.
  static func isRunning(_ pid: pid_t) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
    return !stat.contains(") Z ")
  }
}
