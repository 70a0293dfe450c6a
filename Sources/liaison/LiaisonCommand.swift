import ArgumentParser
import Liaison

@main
struct LiaisonCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "liaison",
    abstract:
      "Inspect and drive the locks, presences, signals, defaults and mailboxes that processes share in a container.",
    discussion: """
      The container is --container PATH, else $\(SharedContainer.environmentVariable), else \
      \(SharedContainer.defaultDirectory).

      Exit status: 0 on success (or the command's own status for `lock` and `presence claim`); \
      1 when `presence check` finds the presence inactive; \(ExitStatus.busy) (EX_TEMPFAIL) when \
      `lock` or `wait` times out, `presence claim` finds the presence held, or `receive` finds another receiver; 64 for bad usage or a bad \
      name; 70 for any other failure; 126/127 when the command cannot be run or is not found; \
      128+N when it was killed by signal N.
      """,
    subcommands: [
      LockCommand.self, PresenceCommand.self, PostCommand.self, WaitCommand.self, ObserveCommand.self,
      StateCommand.self, DefaultsCommand.self, SendCommand.self, ReceiveCommand.self,
      PeekCommand.self, StatusCommand.self, DemoCommand.self, DemoActorCommand.self,
    ]
  )

  /// Reads the caller's signal state before anything else runs (for the commands that `lock`
  /// and `presence claim` execute; see ``CallerSignals``), then parses and runs the command.
  static func main() async {
    CallerSignals.capture()
    await main(nil)
  }
}

/// `--container PATH`, shared by every subcommand.
struct ContainerOptions: ParsableArguments {
  @Option(
    name: .long,
    help: ArgumentHelp(
      "The container directory (default: $\(SharedContainer.environmentVariable), else the per-user default).",
      valueName: "path"))
  var container: String?

  func open() throws -> SharedContainer {
    do {
      if let container { return try SharedContainer(directory: container) }
      return try SharedContainer.standard()
    } catch {
      throw CLIError(error)
    }
  }
}

/// Exit statuses with a meaning of their own.
enum ExitStatus {
  /// EX_TEMPFAIL: the lock or presence is held by someone else; try again later.
  static let busy: Int32 = 75
  /// EX_USAGE.
  static let usage: Int32 = 64
  /// EX_SOFTWARE: anything else went wrong.
  static let failure: Int32 = 70
}

/// A library error shown as one line on standard error, with the exit status it maps to.
struct CLIError: Error, CustomStringConvertible {
  let message: String
  let status: Int32

  init(_ error: LiaisonError) {
    message = error.message
    switch error.code {
    case .timedOut, .alreadyClaimed: status = ExitStatus.busy
    case .invalidName, .invalidArgument: status = ExitStatus.usage
    default: status = ExitStatus.failure
    }
  }

  var description: String { "liaison: \(message)" }
}

extension ParsableCommand {
  /// Runs `body`, turning a `LiaisonError` into a message and its exit status.
  static func reporting<T>(_ body: () async throws -> T) async throws -> T {
    do {
      return try await body()
    } catch let error as LiaisonError {
      let wrapped = CLIError(error)
      printError(wrapped.description)
      throw ExitCode(wrapped.status)
    } catch let error as CLIError {
      printError(error.description)
      throw ExitCode(error.status)
    }
  }
}
