import ArgumentParser
import Liaison
import LiaisonCommandLine

struct LockCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "lock",
    abstract: "Run a command while holding a lock.",
    discussion: """
      Waits for the lock, runs the command, releases the lock, and exits with the command's \
      status. With --timeout, exits \(ExitStatus.busy) if the lock is not had in time. The lock is \
      held by this liaison process, so it is released when the command ends or liaison dies.

        liaison lock token-refresh --timeout 5 -- ./refresh-token.sh
      """
  )

  @OptionGroup var options: ContainerOptions

  @Argument(help: "The lock's name.")
  var name: String

  @Flag(help: "Take the lock shared: other shared holders may run at the same time.")
  var shared = false

  @Option(
    help: ArgumentHelp("Give up after this many seconds (default: wait as long as it takes).", valueName: "seconds"),
    transform: CommandLineValue.timeout)
  var timeout: Duration?

  @Argument(parsing: .postTerminator, help: ArgumentHelp("The command to run, after --.", valueName: "command"))
  var command: [String] = []

  func validate() throws {
    if command.isEmpty { throw ValidationError("Give the command to run after --, e.g. `liaison lock NAME -- make`.") }
  }

  func run() async throws {
    let status = try await Self.reporting {
      let lock = try options.open().lock(name)
      let mode: LockMode = shared ? .shared : .exclusive
      let held = try await lock.lock(mode, timeout: timeout)
      defer { held.unlock() }
      return try runCommand(command)
    }
    throw ExitCode(status)
  }
}
