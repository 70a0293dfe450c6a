import ArgumentParser
import Liaison
import LiaisonCommandLine

struct PresenceCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "presence",
    abstract: "Claim, check and list presences: is a feature running, and who runs it?",
    discussion: DocsPage.presence,
    subcommands: [Claim.self, Check.self, List.self]
  )

  struct Claim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Run a command while claiming a presence.",
      discussion: """
        Claims the presence, then runs the command in liaison's place (exec), as `liaison lock` \
        does: the command holds the claim until it (and every process it passed the descriptor \
        on to) has ended, and the holder's record names its process id. Exits with the \
        command's status, or \(ExitStatus.busy) at once if another holder has the presence. On \
        PostgreSQL, runs the command as its child, as `liaison lock` does there, and stops it \
        (SIGTERM, then SIGKILL after --grace seconds) and exits \(ExitStatus.lockLost) if the claim \
        is lost.

          liaison presence claim recording --info "episode 7" -- ./record.sh

        \(DocsPage.presence)
        """
    )

    @OptionGroup var options: PlaceOptions
    @Argument(help: "The presence's name.") var name: String
    @Option(help: "A short text for others to read while the claim lasts.") var info: String?
    @Option(
      parsing: .unconditional,
      help: ArgumentHelp(
        "When the claim is lost (PostgreSQL), how long the command has to end after SIGTERM before SIGKILL "
          + "(default: \(LockCommand.defaultGrace.components.seconds)).",
        valueName: "seconds"),
      transform: CommandLineValue.grace)
    var grace: Duration = LockCommand.defaultGrace
    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command to run, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
      if command.isEmpty {
        throw ValidationError("Give the command to run after --, e.g. `liaison presence claim NAME -- ./job`.")
      }
    }

    func run() async throws {
      let status = try await Self.reporting {
        try await options.withPlace(creating: true) { place in try await run(on: place) }
      }
      throw ExitCode(status)
    }

    /// Claims the presence in `place`, then runs the command under the claim.
    private func run<Place: CommandPlace>(on place: Place) async throws -> Int32 {
      let presence = try place.presence(name)
      let claim: Place.PresenceType.Claim
      do {
        claim = try await presence.claim(info: info)
      } catch {
        // A `catch … where` here, after a typed throw that initialises `claim`, crashes Swift
        // 6.3.1's SIL ownership verifier: the condition is a guard instead.
        guard error.code == .alreadyClaimed || error.code == .claimInProgress else { throw error }
        let holder = (try? await presence.holder)?.map { HolderReport($0).text } ?? "another process"
        throw CLIError(
          "The presence '\(name)' is already claimed (\(holder)). Try again once it is released; "
            + "`liaison presence check \(name)` shows who holds it.",
          status: ExitStatus.busy)
      }
      return try await place.run(command, claiming: claim, grace: grace)
    }
  }

  struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Tell whether a presence is active.",
      discussion: "Exits 0 and prints the holder when active; exits 1 and prints `inactive` when not." + "\n\n"
        + DocsPage.presence
    )

    @OptionGroup var options: PlaceOptions
    @Argument(help: "The presence's name.") var name: String
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
      try await Self.reporting {
        let report = try await options.withPlace(creating: false) { place in
          try await PresenceReport.of(place.presence(name))
        }
        if json {
          try printJSON(report)
        } else {
          try printLine(report.text)
        }
        if !report.active { throw ExitCode(1) }
      }
    }
  }

  struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "List every presence in the container with its holder.", discussion: DocsPage.presence)

    @OptionGroup var options: PlaceOptions
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
      try await Self.reporting {
        let reports = try await options.withPlace(creating: false) { place in try await Self.reports(place) }
        if json { return try printJSON(reports) }
        if reports.isEmpty { try printLine("no presences") }
        for report in reports {
          try printLine("\(CommandLineText.visible(report.name))\t\(report.text)")
        }
      }
    }

    private static func reports(_ place: some CommandPlace) async throws -> [PresenceReport] {
      try await place.presenceReports().map { try $0.report.get() }
    }
  }
}
