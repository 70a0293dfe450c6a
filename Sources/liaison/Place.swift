import ArgumentParser
import Foundation
import Liaison

#if Postgres
  import LiaisonPostgres
#endif

/// Where a command coordinates: a folder (`--container PATH`) or a PostgreSQL database
/// (`--postgres URL` and `--namespace NAME`), for the commands that work on either.
///
/// The command line wins over the environment: `--container` or `--postgres` on the line is
/// used; else `$LIAISON_POSTGRES_URL` if set; else `$LIAISON_CONTAINER`; else the per-user
/// folder. The URL is read with libpq's conventions (see `PostgresContainer.init(url:…)`): what it
/// leaves out comes from `PGHOST`, `PGUSER`, `PGPASSWORD`, … and `~/.pgpass`, so a password need
/// not appear on the command line. A command adopts it with `@OptionGroup var options: PlaceOptions` and
/// `options.withPlace(creating:) { place in … }`, written once against ``CommandPlace``.
struct PlaceOptions: ParsableArguments {
  /// The variable that names a database when the command line names no place.
  static let postgresVariable = "LIAISON_POSTGRES_URL"
  /// The variable that names the namespace when `--namespace` is not given.
  static let namespaceVariable = "LIAISON_NAMESPACE"
  /// The namespace when neither `--namespace` nor `$LIAISON_NAMESPACE` names one.
  static let defaultNamespace = "default"

  @OptionGroup var folder: ContainerOptions

  @Option(
    name: .long,
    help: ArgumentHelp(
      "The PostgreSQL database to coordinate in, instead of a folder (default: $\(postgresVariable)).",
      discussion: """
        libpq's conventions: what the URL leaves out comes from PGHOST, PGPORT, PGUSER, PGDATABASE, PGAPPNAME, … \
        (the URL wins), the password from the URL, else PGPASSWORD, else ~/.pgpass or $PGPASSFILE (mode 0600). \
        Leave the password out of the URL: it shows in ps and shell history. Several hosts: \
        postgres://u@h1,h2/db?target_session_attrs=read-write.
        """,
      valueName: "url"))
  var postgres: String?

  @Option(
    name: .long,
    help: ArgumentHelp(
      "The namespace in the database (default: $\(namespaceVariable), else '\(defaultNamespace)').",
      valueName: "name"))
  var namespace: String?

  /// Where the options and the environment say the command works.
  enum Choice: Equatable {
    case folder
    case postgres(url: String, namespace: String)
  }

  /// Reads the options and the environment.
  ///
  /// - Throws: a usage error for `--container` with `--postgres`, and for `--namespace` with a
  ///   folder.
  func choice(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Choice {
    func nonEmpty(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
    if folder.container != nil && postgres != nil {
      throw CLIError(
        "Give either --container (a folder) or --postgres (a database), not both.", status: ExitStatus.usage)
    }
    let url = folder.container == nil ? postgres ?? nonEmpty(Self.postgresVariable) : nil
    guard let url else {
      if namespace != nil {
        throw CLIError(
          "--namespace names a namespace in a PostgreSQL database: give --postgres URL (or set "
            + "$\(Self.postgresVariable)) with it, or leave it out for a folder.",
          status: ExitStatus.usage)
      }
      return .folder
    }
    return .postgres(url: url, namespace: namespace ?? nonEmpty(Self.namespaceVariable) ?? Self.defaultNamespace)
  }

  /// Opens the place and runs `body` with it; the place lasts until `body` returns.
  ///
  /// - Parameter creating: whether the command writes: a folder is then created if missing
  ///   (see ``ContainerOptions/open()``); a command that only reads fails when there is none.
  func withPlace<Result>(creating: Bool, _ body: (any CommandPlace) async throws -> Result) async throws -> Result {
    switch try choice() {
    case .folder:
      return try await body(creating ? folder.open() : folder.openExisting())
    case .postgres(let url, let namespace):
      #if Postgres
        let place: PostgresContainer
        do {
          place = try await PostgresContainer(url: url, namespace: namespace)
        } catch {
          // A `catch … where` here, after a typed throw that initialises `place`, crashes Swift
          // 6.3.1's SIL passes: the condition is a guard instead.
          guard error.code == .invalidName else { throw error }
          throw CLIError(
            "The namespace '\(namespace)' is not a valid name: \(error.message) (--namespace or "
              + "$\(Self.namespaceVariable)).",
            status: ExitStatus.usage)
        }
        // Closed before the command exits, whatever happened: its connections, and the tasks
        // that keep them (a held lock's heartbeat, the listener), end here.
        let result: Result
        do {
          result = try await body(place)
        } catch {
          await place.close()
          throw error
        }
        await place.close()
        return result
      #else
        _ = (url, namespace)
        throw CLIError(
          "This liaison was built without PostgreSQL, so --postgres and $\(Self.postgresVariable) are not "
            + "available: build it with `swift build --traits Postgres`, or give a folder (--container).",
          status: ExitStatus.usage)
      #endif
    }
  }
}

/// A place as the `liaison` commands use it: the coordination protocols, plus the few things
/// each backend does its own way. The commands are written once against it.
protocol CommandPlace: CoordinationPlace, CommandStores {
  /// Runs `command` while `held` holds its lock, and returns the status to exit with.
  func run(_ command: [String], holding held: LockType.Guard, grace: Duration) async throws -> Int32
  /// Runs `command` while `claim` holds its presence, and returns the status to exit with.
  func run(_ command: [String], claiming claim: PresenceType.Claim, grace: Duration) async throws -> Int32
  /// Posts the signal `name`, setting its state first when `state` is given.
  func post(signal name: String, state: UInt64?) async throws
  /// Sets the state of the signal `name` without notifying anybody.
  func setState(ofSignal name: String, to state: UInt64) async throws
  /// The state of the signal `name`, or `nil` when it has never been posted or set.
  func recordedState(ofSignal name: String) async throws -> UInt64?
  /// How many posts the signal `name` has had (0 when it has never been posted); creates nothing.
  func sequence(ofSignal name: String) async throws -> UInt64
  /// Every presence of the place.
  func presences() async throws -> [PresenceType]
  /// Every presence of the place as `presence list` and `status` show it, each read on its own
  /// (one that cannot be read does not stop the others), and one at a time: a listing keeps no
  /// descriptor open per presence.
  func presenceReports() async throws -> [(name: String, report: Result<PresenceReport, any Error>)]
}

extension CommandPlace {
  func presenceReports() async throws -> [(name: String, report: Result<PresenceReport, any Error>)] {
    var reports: [(name: String, report: Result<PresenceReport, any Error>)] = []
    for presence in try await presences() {
      do {
        reports.append((presence.name.rawValue, .success(try await PresenceReport.of(presence))))
      } catch {
        reports.append((presence.name.rawValue, .failure(error)))
      }
    }
    return reports
  }
}

extension SharedContainer: CommandPlace {
  /// Runs the command in liaison's place, holding the lock's descriptor (see ``execute(_:)``):
  /// a folder lock cannot be lost while its process lives, and the command holds it itself.
  func run(_ command: [String], holding held: LockGuard, grace: Duration) async throws -> Int32 {
    try held.passToExecutedProgram()
    return execute(command)
  }

  /// Runs the command in liaison's place, holding the claim's descriptor.
  func run(_ command: [String], claiming claim: PresenceClaim, grace: Duration) async throws -> Int32 {
    try claim.passToExecutedProgram()
    return execute(command)
  }

  func post(signal name: String, state: UInt64?) async throws {
    let signal = try self.signal(name)
    if let state { try signal.post(state: state) } else { try signal.post() }
  }

  func setState(ofSignal name: String, to state: UInt64) async throws {
    try signal(name).setState(state)
  }

  func recordedState(ofSignal name: String) async throws -> UInt64? {
    guard try signalNames().contains(try LiaisonName(name)) else { return nil }
    return try signal(name).state
  }

  /// Judges every claim by one read of the kernel's table of locks, taking no lock.
  func presenceReports() async throws -> [(name: String, report: Result<PresenceReport, any Error>)] {
    let table = FileLockTable.read()
    var reports: [(name: String, report: Result<PresenceReport, any Error>)] = []
    let folder = try existingPrivateFolder(.presence)
    // One presence at a time: each keeps a descriptor while it lives.
    for name in try presenceNames() {
      let presence = try self.presence(name.rawValue)
      do {
        let report = try await PresenceReport.of(name: presence.name) { try presence.holder(in: table) }
        // A file that is empty and free was never claimed (a claim that failed on a full disk
        // leaves one): left out.
        if !report.active, try folder?.inspectFile(name.rawValue)?.st_size == 0 { continue }
        reports.append((presence.name.rawValue, .success(report)))
      } catch {
        reports.append((presence.name.rawValue, .failure(error)))
      }
    }
    return reports
  }

  func sequence(ofSignal name: String) async throws -> UInt64 {
    guard try signalNames().contains(try LiaisonName(name)) else { return 0 }
    return try signal(name).sequence
  }
}

#if Postgres
  extension PostgresContainer: CommandPlace {
    /// Runs the command as a child of liaison, which holds the lock through its connection and
    /// stops the command when the lock is lost (see ``superviseCommand(_:holding:socket:grace:waitForLoss:)``).
    /// The command inherits the connection's socket: it holds the lock too, even if liaison dies.
    func run(_ command: [String], holding held: PostgresLockGuard, grace: Duration) async throws -> Int32 {
      let what = "the lock '\(held.lock.name)'"
      let status = await superviseCommand(
        command, holding: what, socket: try socket(held.sessionSocket, of: what, loss: held.loss), grace: grace,
        waitForLoss: { await lossOrRelease(held.waitForLoss) })
      // Not unlocked: a process the command started with the socket may hold it still (as with a
      // folder's lock); liaison exits next, and the server ends the session once nobody holds it.
      held.leaveToSocketHolders()
      return status
    }

    /// Runs the command as a child of liaison, which holds the claim through its connection, as
    /// ``run(_:holding:grace:)`` does.
    func run(_ command: [String], claiming claim: PostgresPresenceClaim, grace: Duration) async throws -> Int32 {
      let what = "the presence '\(claim.presence.name)'"
      let status = await superviseCommand(
        command, holding: what, socket: try socket(claim.sessionSocket, of: what, loss: claim.loss),
        grace: grace, waitForLoss: { await lossOrRelease(claim.waitForLoss) })
      claim.leaveToSocketHolders()
      return status
    }

    /// The socket of a hold's session, for its command to inherit.
    private func socket(_ socket: CInt?, of what: String, loss: LiaisonError?) throws -> CInt {
      if let loss { throw loss }
      if holdsAreLeases {
        throw CLIError(
          "Through a pooler in transaction mode (pool_mode=transaction), \(what) is a lease that liaison renews: "
            + "were liaison killed, the lease would end while the command still ran. Nothing was run. To run a "
            + "command under it, connect to the server directly or through the pooler in session mode.",
          status: ExitStatus.usage)
      }
      guard let socket else {
        throw CLIError(
          "Could not find the socket of the connection that holds \(what), so the command would not hold it if "
            + "liaison died; nothing was run. This is a bug in liaison: please report it.",
          status: ExitStatus.failure)
      }
      return socket
    }

    func post(signal name: String, state: UInt64?) async throws {
      let signal = try self.signal(name)
      if let state { try await signal.post(state: state) } else { try await signal.post() }
    }

    func setState(ofSignal name: String, to state: UInt64) async throws {
      try await signal(name).setState(state)
    }

    func recordedState(ofSignal name: String) async throws -> UInt64? {
      try await signal(name).recordedState()
    }

    func sequence(ofSignal name: String) async throws -> UInt64 {
      try await signal(name).sequence
    }
  }

  /// What `wait` (a hold's `waitForLoss`) returns: the loss, or `nil` once released or cancelled.
  private func lossOrRelease(_ wait: () async throws(LiaisonError) -> LiaisonError?) async -> LiaisonError? {
    do {
      return try await wait()
    } catch {
      return nil
    }
  }
#endif
