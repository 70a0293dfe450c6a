import ArgumentParser
import Liaison
import LiaisonCommandLine

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

struct LockCommand: AsyncParsableCommand {
  /// Where the command finds its exclusive lock's fencing token.
  static let fencingTokenVariable = "LIAISON_FENCING_TOKEN"

  /// How long the command has to end after `SIGTERM` when its lock is lost, by default.
  static let defaultGrace: Duration = .seconds(10)

  static let configuration = CommandConfiguration(
    commandName: "lock",
    abstract: "Run a command while holding a lock.",
    discussion: """
      Waits for the lock, then runs the command. In a folder, the command runs in liaison's place \
      (exec), with the lock's descriptor open: the command holds the lock, and the kernel releases \
      it when the command, and every process it passed the descriptor on to, has ended. The \
      command keeps liaison's process id, process group, terminal and the caller's signal mask, \
      so Ctrl-C, kill, timeout(1) and job control reach it as they would without liaison, and the \
      exit status is the command's own. With --timeout, exits \(ExitStatus.busy) if the lock is \
      not had in time.

        liaison lock token-refresh --timeout 5 -- ./refresh-token.sh

      A background process the command starts keeps the lock until it ends too, as with flock(1); \
      close the descriptor in it if it must not.

      With --postgres (or $\(PlaceOptions.postgresVariable)), liaison holds the lock through its \
      connection and runs the command as its child, in the caller's process group with the \
      caller's signal mask; it passes TERM, HUP, USR1 and USR2 on to the command, and exits with \
      the command's status. The command inherits the connection's socket, so it holds the lock \
      too: if liaison is killed, the lock stays held until the command (and every process it \
      passed the socket on to) has ended. If the lock is lost (the server restarted, the session was \
      terminated, the network was cut), liaison says so in one line on standard error, sends the \
      command SIGTERM, then SIGKILL after --grace seconds (default \(Self.defaultGrace.components.seconds)), \
      and exits \(ExitStatus.lockLost).

        liaison lock --postgres postgres://app@db/app nightly-report -- ./report.sh

      An exclusive lock's fencing token is in $\(Self.fencingTokenVariable): larger than every \
      earlier holder's, so a script can guard its writes with it (a resource that remembers the \
      largest token it has seen refuses a smaller one).

      \(DocsPage.lock)
      """
  )

  @OptionGroup var options: PlaceOptions

  @Argument(help: "The lock's name.")
  var name: String

  @Flag(help: "Take the lock shared: other shared holders may run at the same time.")
  var shared = false

  @Option(
    parsing: .unconditional,
    help: ArgumentHelp("Give up after this many seconds (default: wait as long as it takes).", valueName: "seconds"),
    transform: CommandLineValue.timeout)
  var timeout: Duration?

  @Option(
    parsing: .unconditional,
    help: ArgumentHelp(
      "When the lock is lost, how long the command has to end after SIGTERM before SIGKILL (default: "
        + "\(Self.defaultGrace.components.seconds)).",
      valueName: "seconds"),
    transform: CommandLineValue.grace)
  var grace: Duration = Self.defaultGrace

  @Argument(parsing: .postTerminator, help: ArgumentHelp("The command to run, after --.", valueName: "command"))
  var command: [String] = []

  func validate() throws {
    if command.isEmpty { throw ValidationError("Give the command to run after --, e.g. `liaison lock NAME -- make`.") }
  }

  func run() async throws {
    let status = try await Self.reporting {
      try await options.withPlace(creating: true) { place in try await run(on: place) }
    }
    throw ExitCode(status)
  }

  /// Takes the lock in `place`, then runs the command under it.
  private func run(on place: some CommandPlace) async throws -> Int32 {
    let lock = try place.lock(name)
    let mode: LockMode = shared ? .shared : .exclusive
    let held = try await lock.lock(mode, timeout: timeout)
    if mode == .exclusive {
      setenv(Self.fencingTokenVariable, "\(try await held.fencingToken())", 1)
    } else {
      unsetenv(Self.fencingTokenVariable)  // an inherited one belongs to another lock
    }
    return try await place.run(command, holding: held, grace: grace)
  }
}
