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
      moment; a process's tryLock at that very moment may find it taken.
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

  struct Report: Encodable {
    let container: String
    let presences: [PresenceReport]
    let locks: [LockReport]
    let signals: [SignalReport]
    let defaults: [DomainReport]
    let mailboxes: [MailboxReport]
    let databases: [DatabaseReport]
  }

  func run() async throws {
    let report = try await Self.reporting {
      let container = try options.open()
      return Report(
        container: container.directory,
        presences: try container.presences().map(PresenceReport.init),
        locks: try container.locks().map { LockReport(name: $0.name.rawValue, state: "\(try $0.probe())") },
        signals: try container.signals().map { SignalReport(name: $0.name.rawValue, state: try $0.state) },
        defaults: try container.defaultsDomains().map { DomainReport(name: $0.domain.rawValue, keys: $0.keyCount) },
        mailboxes: try container.mailboxes().map {
          MailboxReport(name: $0.name.rawValue, waiting: $0.waiting, quarantined: $0.quarantined, bytes: $0.bytes)
        },
        databases: try container.sharedDatabases().map {
          DatabaseReport(
            name: $0.name.rawValue, file: $0.path, bytes: $0.size, schemaVersion: $0.migrations.last,
            migrations: $0.migrations.count)
        }
      )
    }
    if json { return try printJSON(report) }
    print("Container \(report.container)")
    print("Presences:" + (report.presences.isEmpty ? " none" : ""))
    for presence in report.presences {
      print("  \(presence.name)\t\(presence.holder.map { "active: \($0.text)" } ?? "inactive")")
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
  }
}
