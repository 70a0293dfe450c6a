import ArgumentParser
import Liaison
import LiaisonCommandLine
import LiaisonStore

struct StatusCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "status",
    abstract:
      "Show everything in the container at a glance: presences, locks, signals, defaults, mailboxes and databases.",
    discussion: """
      Looking takes no lock, so it never makes another process's lock or claim fail or wait: \
      lock states come from the kernel's table of locks (/proc/locks, Linux; "unknown" where \
      there is none, as on Apple platforms). Whatever cannot \
      be read (a damaged file, a store in use by a newer version) is listed under Problems with \
      the reason, after everything else; the command then exits \(ExitStatus.failure). Creates \
      nothing.

      On PostgreSQL (--postgres), shows the namespace's presences, signals, defaults and \
      mailboxes; its locks are session locks that the server does not list by name, and shared \
      databases live in folders, so both are "not available on PostgreSQL" (and left out of the \
      JSON).

      \(DocsPage.command)
      """
  )

  @OptionGroup var options: PlaceOptions
  @Flag(help: "Print JSON.") var json = false

  struct LockReport: Encodable {
    let name: String
    let state: String
  }

  struct SignalReport: Encodable {
    let name: String
    let state: UInt64
  }

  struct DomainReport: Encodable {
    let name: String
    let keys: Int
  }

  struct MailboxReport: Encodable {
    let name: String
    let waiting: Int
    let quarantined: Int
    let bytes: Int
  }

  struct DatabaseReport: Encodable {
    let name: String
    let file: String
    let bytes: Int
    let schemaVersion: String?
    let migrations: Int
  }

  /// Something that could not be read: a whole part, or one item of it.
  struct ProblemReport: Encodable {
    /// `presences`, `locks`, `signals`, `defaults`, `mailboxes` or `databases`.
    let part: String
    /// The item's name, when the problem is one item's.
    let name: String?
    let error: String
  }

  struct Report: Encodable {
    /// The folder, for a folder.
    var container: String?
    /// The namespace, for a PostgreSQL database (whose URL is not shown: it may hold a password).
    var namespace: String?
    var presences: [PresenceReport] = []
    /// `nil` (and left out of the JSON) where the place cannot list them: locks on PostgreSQL.
    var locks: [LockReport]? = []
    var signals: [SignalReport] = []
    var defaults: [DomainReport] = []
    var mailboxes: [MailboxReport] = []
    /// `nil` (and left out of the JSON) where the place has none: on PostgreSQL.
    var databases: [DatabaseReport]? = []
    var problems: [ProblemReport] = []

    /// Runs `body`, noting an error it throws as a problem of `part` (and `name`).
    mutating func reading<T>(_ part: String, name: String? = nil, _ body: () async throws -> T) async -> T? {
      do {
        return try await body()
      } catch {
        problems.append(ProblemReport(part: part, name: name, error: Self.message(error)))
        return nil
      }
    }

    /// Notes `result`'s error, if any, as a problem of `part`'s item `name`.
    mutating func reading<T>(_ part: String, name: String, _ result: Result<T, any Error>) -> T? {
      switch result {
      case .success(let value): return value
      case .failure(let error):
        problems.append(ProblemReport(part: part, name: name, error: Self.message(error)))
        return nil
      }
    }

    private static func message(_ error: any Error) -> String { (error as? LiaisonError)?.message ?? "\(error)" }
  }

  func run() async throws {
    try await Self.reporting {
      let report = try await options.withPlace(creating: false) { place in await Self.report(place) }
      if json {
        try printJSON(report)
      } else {
        for line in Self.text(report) { try printLine(line) }
      }
      if !report.problems.isEmpty { throw ExitCode(ExitStatus.failure) }
    }
  }

  /// Everything in `place`, and what could not be read.
  private static func report(_ place: some CommandPlace) async -> Report {
    var report = Report()
    switch place.placeName {
    case .container(let directory): report.container = directory
    case .namespace(let namespace): report.namespace = namespace
    }
    for presence in await report.reading("presences", { try await place.presenceReports() }) ?? [] {
      if let item = report.reading("presences", name: presence.name, presence.report) {
        report.presences.append(item)
      }
    }
    if let listed = await report.reading("locks", { try await place.lockStates() }) {
      if let listed {
        for lock in listed {
          if let state = report.reading("locks", name: lock.name, lock.state) {
            report.locks?.append(LockReport(name: lock.name, state: state))
          }
        }
      } else {
        report.locks = nil
      }
    }
    for signal in await report.reading("signals", { try await place.signalReports() }) ?? [] {
      if let state = report.reading("signals", name: signal.name, signal.state) {
        report.signals.append(SignalReport(name: signal.name, state: state))
      }
    }
    report.defaults =
      await report.reading("defaults") {
        try await place.defaultsDomains().map { DomainReport(name: $0.domain.rawValue, keys: $0.keyCount) }
      } ?? []
    report.mailboxes =
      await report.reading("mailboxes") {
        try await place.mailboxes().map {
          MailboxReport(name: $0.name.rawValue, waiting: $0.waiting, quarantined: $0.quarantined, bytes: $0.bytes)
        }
      } ?? []
    if let databases = await report.reading("databases", { try await place.databaseReports() }) {
      report.databases = databases
    }
    for problem in await report.reading("signals", { try await place.storeSignalProblems() }) ?? [] {
      _ = report.reading(problem.part, name: problem.name, Result<Void, any Error>.failure(problem.error))
    }
    return report
  }

  /// What `status` shows for a part that PostgreSQL has no equivalent of.
  static let notOnPostgres = "not available on PostgreSQL"

  /// The lines of the text output, every name, path and message escaped
  /// (``CommandLineText/visible(_:)``).
  private static func text(_ report: Report) -> [String] {
    func shown(_ field: String) -> String { CommandLineText.visible(field) }
    var lines: [String] = []
    if let container = report.container { lines.append("Container \(shown(container))") }
    if let namespace = report.namespace { lines.append("Namespace \(shown(namespace)) (PostgreSQL)") }
    lines.append("Presences:" + (report.presences.isEmpty ? " none" : ""))
    for presence in report.presences {
      lines.append("  \(shown(presence.name))\t\(presence.text)")
    }
    lines.append("Locks:" + (report.locks.map { $0.isEmpty ? " none" : "" } ?? " \(Self.notOnPostgres)"))
    for lock in report.locks ?? [] {
      lines.append("  \(shown(lock.name))\t\(lock.state)")
    }
    lines.append("Signals:" + (report.signals.isEmpty ? " none" : ""))
    for signal in report.signals {
      lines.append("  \(shown(signal.name))\tstate \(signal.state)")
    }
    lines.append("Defaults:" + (report.defaults.isEmpty ? " none" : ""))
    for domain in report.defaults {
      lines.append("  \(shown(domain.name))\t\(domain.keys) key" + (domain.keys == 1 ? "" : "s"))
    }
    lines.append("Mailboxes:" + (report.mailboxes.isEmpty ? " none" : ""))
    for mailbox in report.mailboxes {
      lines.append(
        "  \(shown(mailbox.name))\t\(mailbox.waiting) waiting\t\(mailbox.quarantined) quarantined\t"
          + "\(mailbox.bytes) bytes")
    }
    lines.append("Databases:" + (report.databases.map { $0.isEmpty ? " none" : "" } ?? " \(Self.notOnPostgres)"))
    for database in report.databases ?? [] {
      lines.append(
        "  \(shown(database.name))\t\(database.bytes) bytes\tschema \(shown(database.schemaVersion ?? "none")) "
          + "(\(database.migrations) migrations)\t\(shown(database.file))")
    }
    if !report.problems.isEmpty {
      lines.append("Problems:")
      for problem in report.problems {
        lines.append("  \(problem.part)" + (problem.name.map { " \(shown($0))" } ?? "") + ": \(shown(problem.error))")
      }
    }
    return lines
  }
}
