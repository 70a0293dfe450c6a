import ArgumentParser
import Foundation
import Liaison
import LiaisonCommandLine
import LiaisonStore

#if Postgres
  import LiaisonPostgres
#endif

/// What `defaults`, `send`, `receive`, `peek`, `requeue` and `status` need of a place beyond
/// ``CoordinationStore``: listings that create nothing, an opening bounded by `--timeout`, the
/// stored forms of values and messages for a tool that knows no payload type, and what `status`
/// shows. Each backend already has these; the conformances below only name them.
protocol CommandStores: CoordinationStore where DefaultsType: CommandDefaults, MailboxType.Receiver: CommandReceiver {
  /// The defaults domain called `domain`, waiting at most `timeout` for another process's write
  /// of the store where opening it waits for one.
  func defaults(_ domain: String, timeout: Duration?) async throws(LiaisonError) -> DefaultsType
  /// The mailbox called `name`, as ``defaults(_:timeout:)`` opens a domain.
  func mailbox(_ name: String, sender: String, timeout: Duration?) async throws(LiaisonError) -> MailboxType
  /// Every defaults domain that has values, with how many keys each has, by name; creates nothing.
  func defaultsDomains() async throws(LiaisonError) -> [(domain: LiaisonName, keyCount: Int)]
  /// Every mailbox that holds messages, by name; creates nothing.
  func mailboxes() async throws(LiaisonError) -> [MailboxInfo]

  /// What `status` names the place by.
  var placeName: PlaceName { get }
  /// Every lock with its state as `status` shows it; `nil` when the place cannot list its locks.
  func lockStates() async throws -> [(name: String, state: Result<String, any Error>)]?
  /// Every signal that has been posted or set, with its state.
  func signalReports() async throws -> [(name: String, state: Result<UInt64, any Error>)]
  /// The place's shared databases; `nil` when the place has none.
  func databaseReports() async throws -> [StatusCommand.DatabaseReport]?
  /// The parts whose signal cannot be read (a folder's files; none on PostgreSQL).
  func storeSignalProblems() async throws -> [(part: String, name: String, error: any Error)]
}

extension CommandStores {
  /// Opening a domain or a mailbox on PostgreSQL waits for no other process's write: `timeout`
  /// bounds nothing there.
  func defaults(_ domain: String, timeout: Duration?) async throws(LiaisonError) -> DefaultsType {
    try await defaults(domain)
  }

  func mailbox(_ name: String, sender: String, timeout: Duration?) async throws(LiaisonError) -> MailboxType {
    try await mailbox(name, sender: sender)
  }
}

/// A place by name: a folder, or a namespace in a PostgreSQL database.
enum PlaceName {
  case container(String)
  case namespace(String)
}

/// A defaults domain as `defaults read` lists it.
protocol CommandDefaults: CoordinationDefaults {
  /// Every value of the domain by key, each row read on its own, so that a row another program
  /// wrote is reported by its key instead of hiding the others.
  func rowsReadOneByOne() async throws(LiaisonError) -> [(key: String, value: Result<DefaultsRawValue, LiaisonError>)]
}

/// A mailbox's receiver as `receive` uses it: messages in their stored form, which a tool that
/// knows no payload type prints as they are, and never quarantines.
protocol CommandReceiver: CoordinationReceiver {
  /// Up to `limit` messages in their stored form, as ``CoordinationReceiver/receive(_:limit:timeout:)``
  /// waits for them.
  func receiveStored(limit: Int, timeout: Duration?) async throws(LiaisonError) -> [MailboxEnvelope<MailboxPayload>]
}

// MARK: - A folder

extension SharedDefaults: CommandDefaults {}
extension MailboxReceiver: CommandReceiver {}

extension SharedContainer: CommandStores {
  var placeName: PlaceName { .container(directory) }

  /// Every lock's state from one read of the kernel's table of locks, taking none of them. A
  /// lock whose first fencing token was never written (its counter made empty, as a `liaison
  /// lock` that failed on a full disk leaves it) and that is free is left out.
  func lockStates() async throws -> [(name: String, state: Result<String, any Error>)]? {
    let table = FileLockTable.read()
    let counters = try existingPrivateFolder(.locks).flatMap { folder throws(LiaisonError) in
      try PrivateFolder.openIfExists(FencingCounter.folderName, in: folder.descriptor, parentPath: folder.path)
    }
    return try locks().filter { lock throws(LiaisonError) in
      guard try counters?.inspectFile(lock.name.rawValue)?.st_size == 0, let table else { return true }
      return try lock.probe(in: table) != .unlocked
    }.map { lock in
      (lock.name.rawValue, Result<String, any Error> { "\(try table.map { try lock.probe(in: $0) } ?? .unknown)" })
    }
  }

  /// A signal whose file is empty was never posted nor set (a post that failed on a full disk
  /// leaves one): it is left out.
  func signalReports() async throws -> [(name: String, state: Result<UInt64, any Error>)] {
    let folder = try existingPrivateFolder(.signals)
    return try signalNames().filter { name throws(LiaisonError) in
      try folder?.inspectFile(name.rawValue).map { $0.st_size > 0 } ?? false
    }.map { name in
      (name.rawValue, Result<UInt64, any Error> { try signal(name.rawValue).state })
    }
  }

  /// The signal files of the defaults domains, mailboxes and shared databases that cannot be
  /// read, each by its part and name: such a part cannot be used (opening it reads its signal).
  func storeSignalProblems() async throws -> [(part: String, name: String, error: any Error)] {
    let folders: [(ContainerLayout.Folder, String)] = [
      (.storeSignals, "defaults"), (.mailboxSignals, "mailboxes"), (.databaseSignals, "databases"),
    ]
    var problems: [(part: String, name: String, error: any Error)] = []
    for (layout, part) in folders {
      guard let folder = try existingPrivateFolder(layout) else { continue }
      for name in try folder.names() {
        do {
          _ = try Signal(name: name, folder: folder, container: self).state
        } catch {
          problems.append((part, name.rawValue, error))
        }
      }
    }
    return problems
  }

  func databaseReports() async throws -> [StatusCommand.DatabaseReport]? {
    try sharedDatabases().map {
      StatusCommand.DatabaseReport(
        name: $0.name.rawValue, file: $0.path, bytes: $0.size, schemaVersion: $0.migrations.last,
        migrations: $0.migrations.count)
    }
  }
}

// MARK: - PostgreSQL

#if Postgres
  extension PostgresDefaults: CommandDefaults {}
  extension PostgresMailboxReceiver: CommandReceiver {}

  extension PostgresContainer: CommandStores {
    var placeName: PlaceName { .namespace(namespace.rawValue) }

    /// `nil`: a lock on PostgreSQL is a session lock of the server's, which keeps no list of them
    /// by name.
    func lockStates() async throws -> [(name: String, state: Result<String, any Error>)]? { nil }

    func signalReports() async throws -> [(name: String, state: Result<UInt64, any Error>)] {
      try await signalStates().map { ($0.name.rawValue, .success($0.state)) }
    }

    /// `nil`: shared databases are SQLite files in a folder.
    func databaseReports() async throws -> [StatusCommand.DatabaseReport]? { nil }
    func storeSignalProblems() async throws -> [(part: String, name: String, error: any Error)] { [] }
  }
#endif

// MARK: - Waiting for a store

/// `--timeout SECONDS` of the commands that write a store (`defaults write` and `delete`,
/// `send`): how long to wait, in all, for other processes' writes of the store.
///
/// A folder's store is written under a lock that one writer holds at a time, and that a writer
/// stopped in the middle of a write (by a debugger, or SIGSTOP) keeps: without a timeout, the
/// command waits for it as long as it takes.
struct StoreTimeoutOption: ParsableArguments {
  @Option(
    parsing: .unconditional,
    help: ArgumentHelp(
      "Give up after this many seconds of waiting for another process's write of the store, with status "
        + "\(ExitStatus.busy) (default: wait as long as it takes).",
      valueName: "seconds"),
    transform: CommandLineValue.timeout)
  var timeout: Duration?

  /// Runs `body`, which passes `timeLeft()` to each of its waits for the store (opening it, then
  /// writing), so that they share the one timeout; a wait that times out ends the command with
  /// status 75 and a message naming the store it waited for.
  ///
  /// - Parameter store: what the store holds, for the message: "defaults", "mailboxes".
  func waiting<Result>(
    forThe store: String, _ body: (_ timeLeft: () -> Duration?) async throws -> Result
  ) async throws -> Result {
    let start = ContinuousClock.now
    let timeout = timeout
    do {
      return try await body { timeout.map { max(.zero, $0 - (ContinuousClock.now - start)) } }
    } catch let error as LiaisonError where error.code == .timedOut {
      throw CLIError(
        "Gave up after \(timeout ?? .zero) (--timeout) waiting for another process's write of the \(store) store"
          + (error.path.map { " '\($0)'" } ?? "") + " to end: a process stopped while writing (by a debugger or "
          + "SIGSTOP) holds its lock. Nothing was written. Try again later, or give a longer --timeout.",
        status: ExitStatus.busy)
    }
  }
}
