import ArgumentParser
import Foundation
import Liaison
import LiaisonCommandLine

@main
struct LiaisonCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "liaison",
    abstract:
      "Inspect and drive the locks, presences, signals, defaults and mailboxes that processes share in a container.",
    discussion: """
      The container is --container PATH (anywhere on the line), else \
      $\(SharedContainer.environmentVariable), else \(SharedContainer.defaultDirectory). Commands \
      that only read (status, state, peek, defaults read, presence check and list) never create \
      anything, and fail when there is no container there. Commands that write create the \
      container's own folder if needed, but not its parent, so that a mistyped path fails \
      instead of starting a second container (the per-user default is created whole).

      Every command except demo works on PostgreSQL instead with --postgres URL \
      (else $\(PlaceOptions.postgresVariable)) and --namespace NAME (else \
      $\(PlaceOptions.namespaceVariable), else '\(PlaceOptions.defaultNamespace)'); an option on the \
      command line wins over the variables, and $\(PlaceOptions.postgresVariable) over \
      $\(SharedContainer.environmentVariable).

      Exit status: 0 on success (or the command's own status for `lock` and `presence claim`); \
      1 when `presence check` finds the presence inactive, or the condition of `defaults write \
      --if-value` or `--if-absent` does not hold; \(ExitStatus.busy) (EX_TEMPFAIL) when `lock`, `wait` \
      or a store write (`defaults write`, `defaults delete`, `send`) times out, `presence claim` finds \
      the presence held, or `receive` finds another receiver; 64 for bad usage or a bad \
      name; \(ExitStatus.lockLost) when the PostgreSQL lock or claim a command ran under was lost \
      (liaison stopped the command); \(ExitStatus.dataError) when an argument or standard input is not \
      UTF-8 text; \(ExitStatus.ioError) when the output could not be written (a full disk, a closed \
      descriptor, a reader that has gone); 70 for any other failure; 126/127 when the command cannot be run or is not found; \
      128+N when it was killed by signal N.

      \(DocsPage.command)
      """,
    subcommands: [
      LockCommand.self, PresenceCommand.self, PostCommand.self, WaitCommand.self, ObserveCommand.self,
      StateCommand.self, DefaultsCommand.self, SendCommand.self, ReceiveCommand.self,
      PeekCommand.self, RequeueCommand.self, StatusCommand.self, DemoCommand.self, DemoActorCommand.self,
    ]
  )

  /// Reads the caller's signal state and descriptors before anything else runs (for the commands
  /// that `lock` and `presence claim` run; see ``CallerSignals`` and ``CallerDescriptors``),
  /// occupies the standard descriptors the caller left closed (see ``StandardStreams``), refuses
  /// arguments that are not UTF-8 (see ``TextInput``), then parses and runs the command.
  static func main() async {
    CallerSignals.capture()
    CallerDescriptors.capture()
    StandardStreams.occupyClosedDescriptors()
    do {
      try TextInput.checkArguments()
    } catch {
      printError(error.description)
      Self.exit(withError: ExitCode(error.status))
    }
    let arguments = Array(CommandLine.arguments.dropFirst())
    await main(CommandLineValue.movingPlaceOptions(arguments, groups: ["presence", "defaults"]))
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

  /// The folder given by --container or the environment, if any.
  private var chosenDirectory: String? {
    if let container { return container }
    let variable = ProcessInfo.processInfo.environment[SharedContainer.environmentVariable]
    return variable?.isEmpty == false ? variable : nil
  }

  /// Opens the container for a command that writes. A folder given by --container or the
  /// environment is created if missing, but not its parent; the per-user default is created
  /// whole.
  func open() throws -> SharedContainer {
    do {
      guard let directory = chosenDirectory else { return try SharedContainer.standard() }
      let parent = URL(fileURLWithPath: directory).deletingLastPathComponent().path
      var isFolder: ObjCBool = false
      if !FileManager.default.fileExists(atPath: directory),
        !FileManager.default.fileExists(atPath: parent, isDirectory: &isFolder) || !isFolder.boolValue
      {
        throw CLIError(
          "There is no folder '\(parent)' to make the container '\(directory)' in. liaison creates only the "
            + "container's own folder, so that a mistyped path does not start a second container: correct the "
            + "path (--container or $\(SharedContainer.environmentVariable)), or create the parent first.",
          status: ExitStatus.usage)
      }
      return try SharedContainer(directory: directory, createIfMissing: true)
    } catch let error as LiaisonError {
      throw CLIError(error)
    }
  }

  /// Whether a process has used a container at the folder given by --container or the
  /// environment, else at the per-user default.
  var containerExists: Bool {
    var isFolder: ObjCBool = false
    let directory = chosenDirectory ?? SharedContainer.standardDirectory
    return FileManager.default.fileExists(atPath: directory + "/.liaison", isDirectory: &isFolder) && isFolder.boolValue
  }

  /// Opens the container for a command that only reads: creates nothing, and fails when no
  /// process has used a container there.
  func openExisting() throws -> SharedContainer {
    let directory = chosenDirectory ?? SharedContainer.standardDirectory
    guard containerExists else {
      throw CLIError(
        "There is no container at '\(directory)' (no process has used it yet, or the path is mistyped). Check "
          + "--container or $\(SharedContainer.environmentVariable); this command only reads, so it creates nothing.",
        status: ExitStatus.failure)
    }
    do {
      return try SharedContainer(directory: directory)
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
  /// EX_DATAERR: the input is not what the command takes (bytes that are not UTF-8 text).
  static let dataError: Int32 = 65
  /// EX_IOERR: the output could not be written (a full disk, a closed descriptor, a reader that
  /// has gone while SIGPIPE is ignored).
  static let ioError: Int32 = 74
  /// EX_SOFTWARE: anything else went wrong.
  static let failure: Int32 = 70
  /// EX_UNAVAILABLE: the lock or claim that a command ran under was lost (its connection to
  /// PostgreSQL ended), so `liaison` stopped the command.
  static let lockLost: Int32 = 69
}

/// A library error shown as one line on standard error, with the exit status it maps to.
struct CLIError: Error, CustomStringConvertible {
  let message: String
  let status: Int32

  init(_ message: String, status: Int32) {
    self.message = message
    self.status = status
  }

  init(_ error: LiaisonError) {
    // With the system's reason, when a system call failed and the message does not give it.
    message = error.errno.map { error.message.contains("\($0)") } ?? true ? error.message : error.description
    switch error.code {
    case .timedOut, .alreadyClaimed, .claimInProgress: status = ExitStatus.busy
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
    } catch let error as ExitCode {
      throw error
    } catch {
      printError("liaison: \(error)")
      throw ExitCode(ExitStatus.failure)
    }
  }
}
