import ArgumentParser
import Liaison
import LiaisonStore

struct StatusCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "status",
    abstract:
      "Show everything in the container at a glance: presences, locks, signals, defaults, mailboxes and databases.",
    discussion: """
      Lock states come from a non-blocking probe that takes and releases each free lock for a \
      moment; a process trying the lock at that very moment may find it taken. Whatever cannot \
      be read (a damaged file, a store in use by a newer version) is listed under Problems with \
      the reason, after everything else; the command then exits \(ExitStatus.failure). Creates \
      nothing.

      \(DocsPage.command)
      """
  )

  @OptionGroup var options: ContainerOptions
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
    let container: String
    var presences: [PresenceReport] = []
    var locks: [LockReport] = []
    var signals: [SignalReport] = []
    var defaults: [DomainReport] = []
    var mailboxes: [MailboxReport] = []
    var databases: [DatabaseReport] = []
    var problems: [ProblemReport] = []

    /// Runs `body`, noting a `LiaisonError` it throws as a problem of `part` (and `name`).
    mutating func reading<T>(_ part: String, name: String? = nil, _ body: () throws -> T) -> T? {
      do {
        return try body()
      } catch {
        let message = (error as? LiaisonError)?.message ?? "\(error)"
        problems.append(ProblemReport(part: part, name: name, error: message))
        return nil
      }
    }
  }

  func run() async throws {
    let container = try await Self.reporting { try options.openExisting() }
    var report = Report(container: container.directory)
    for presence in report.reading("presences", { try container.presences() }) ?? [] {
      if let item = report.reading("presences", name: presence.name.rawValue, { try PresenceReport(presence) }) {
        report.presences.append(item)
      }
    }
    for lock in report.reading("locks", { try container.locks() }) ?? [] {
      if let state = report.reading("locks", name: lock.name.rawValue, { try lock.probe() }) {
        report.locks.append(LockReport(name: lock.name.rawValue, state: "\(state)"))
      }
    }
    for name in report.reading("signals", { try container.signalNames() }) ?? [] {
      if let state = report.reading("signals", name: name.rawValue, { try container.signal(name.rawValue).state }) {
        report.signals.append(SignalReport(name: name.rawValue, state: state))
      }
    }
    report.defaults =
      report.reading("defaults") {
        try container.defaultsDomains().map { DomainReport(name: $0.domain.rawValue, keys: $0.keyCount) }
      } ?? []
    report.mailboxes =
      report.reading("mailboxes") {
        try container.mailboxes().map {
          MailboxReport(name: $0.name.rawValue, waiting: $0.waiting, quarantined: $0.quarantined, bytes: $0.bytes)
        }
      } ?? []
    report.databases =
      report.reading("databases") {
        try container.sharedDatabases().map {
          DatabaseReport(
            name: $0.name.rawValue, file: $0.path, bytes: $0.size, schemaVersion: $0.migrations.last,
            migrations: $0.migrations.count)
        }
      } ?? []
    if json {
      try printJSON(report)
    } else {
      printText(report)
    }
    if !report.problems.isEmpty { throw ExitCode(ExitStatus.failure) }
  }

  private func printText(_ report: Report) {
    print("Container \(report.container)")
    print("Presences:" + (report.presences.isEmpty ? " none" : ""))
    for presence in report.presences {
      print("  \(presence.name)\t\(presence.text)")
    }
    print("Locks:" + (report.locks.isEmpty ? " none" : ""))
    for lock in report.locks {
      print("  \(lock.name)\t\(lock.state)")
    }
    print("Signals:" + (report.signals.isEmpty ? " none" : ""))
    for signal in report.signals {
      print("  \(signal.name)\tstate \(signal.state)")
    }
    print("Defaults:" + (report.defaults.isEmpty ? " none" : ""))
    for domain in report.defaults {
      print("  \(domain.name)\t\(domain.keys) key" + (domain.keys == 1 ? "" : "s"))
    }
    print("Mailboxes:" + (report.mailboxes.isEmpty ? " none" : ""))
    for mailbox in report.mailboxes {
      print("  \(mailbox.name)\t\(mailbox.waiting) waiting\t\(mailbox.quarantined) quarantined\t\(mailbox.bytes) bytes")
    }
    print("Databases:" + (report.databases.isEmpty ? " none" : ""))
    for database in report.databases {
      print(
        "  \(database.name)\t\(database.bytes) bytes\tschema \(database.schemaVersion ?? "none") "
          + "(\(database.migrations) migrations)\t\(database.file)")
    }
    if !report.problems.isEmpty {
      print("Problems:")
      for problem in report.problems {
        print("  \(problem.part)" + (problem.name.map { " \($0)" } ?? "") + ": \(problem.error)")
      }
    }
  }
}
