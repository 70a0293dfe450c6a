import ArgumentParser
import Foundation
import Liaison
import LiaisonCommandLine
import LiaisonStore

#if Postgres
  import LiaisonPostgres
#endif

/// What `defaults`, `send`, `receive`, `peek`, `requeue` and `status` need of a place, on top of
/// ``CommandPlace``: the stored values of either backend, in the value types they share.
protocol CommandStores: Sendable {
  /// A defaults domain of the place.
  associatedtype DefaultsDomain: CommandDefaults
  /// A mailbox of the place.
  associatedtype MailboxHandle: CommandMailbox

  /// The defaults domain called `name` (see ``LiaisonName`` for the rule names follow), waiting
  /// at most `timeout` for the store where opening it waits for another process's write.
  ///
  /// - Throws: a usage error for a `timeout` where the place has no such wait to bound.
  func defaultsDomain(_ name: String, timeout: Duration?) async throws -> DefaultsDomain
  /// Every defaults domain that has values, with how many keys each has, by name; creates nothing.
  func defaultsDomainList() async throws -> [(domain: LiaisonName, keyCount: Int)]
  /// The mailbox called `name`, whose messages sent through it carry `sender`, waiting at most
  /// `timeout` for the store where opening it waits for another process's write.
  ///
  /// - Throws: a usage error for a `timeout` where the place has no such wait to bound.
  func mailboxHandle(_ name: String, sender: String, timeout: Duration?) async throws -> MailboxHandle
  /// Every mailbox that holds messages, by name; creates nothing.
  func mailboxList() async throws -> [MailboxInfo]

  /// What `status` names the place by.
  var placeName: PlaceName { get }
  /// Every lock with its state as `status` shows it; `nil` when the place cannot list its locks.
  func lockStates() async throws -> [(name: String, state: Result<String, any Error>)]?
  /// Every signal that has been posted or set, with its state.
  func signalReports() async throws -> [(name: String, state: Result<UInt64, any Error>)]
  /// The place's shared databases; `nil` when the place has none.
  func databaseReports() async throws -> [StatusCommand.DatabaseReport]?
}

/// A place by name: a folder, or a namespace in a PostgreSQL database.
enum PlaceName {
  case container(String)
  case namespace(String)
}

/// A defaults domain as the `defaults` commands use it.
protocol CommandDefaults: Sendable {
  /// The notifications of the domain's changes.
  associatedtype ChangeNotifications: AsyncSequence & Sendable where ChangeNotifications.Element == SignalNotification

  /// The stored form of the key called `name`; `nil` when it has no value.
  func storedValue(of name: LiaisonName) async throws -> DefaultsRawValue?
  /// Every value of the domain by key, each row read on its own.
  func storedRows() async throws -> [(key: String, value: Result<DefaultsRawValue, LiaisonError>)]
  /// Stores JSON text for the key called `name`, waiting at most `timeout` for another
  /// process's write.
  func write(json: Data, for name: LiaisonName, timeout: Duration?) async throws
  /// Stores JSON text for the key called `name` if its value is `expected` now (`nil`: if it has
  /// none), atomically; returns whether it did.
  func write(json: Data, for name: LiaisonName, replacing expected: DefaultsRawValue?, timeout: Duration?)
    async throws -> Bool
  /// Deletes the key called `name`, or every key when `name` is `nil`, waiting at most `timeout`
  /// for another process's write.
  func delete(_ name: LiaisonName?, timeout: Duration?) async throws
  /// The domain's changes, from now on.
  func changeNotifications() async throws -> ChangeNotifications
}

/// A mailbox as `send`, `receive`, `peek` and `requeue` use it.
protocol CommandMailbox: Sendable {
  /// The mailbox's one receiver.
  associatedtype ClaimedReceiver: CommandReceiver

  /// The largest message the mailbox takes, in bytes.
  func maximumMessageSize() async throws -> Int
  /// Sends JSON text, waiting at most `timeout` for another process's write; returns the
  /// message's id.
  func send(json: Data, id: String?, timeout: Duration?) async throws -> String
  /// The first `limit` messages, quarantined ones included, without receiving them.
  func entries(limit: Int) async throws -> [MailboxEntry]
  /// Puts the quarantined messages (those with `ids`, or all) back in the queue; returns how many.
  func requeue(ids: [String]?) async throws -> Int
  /// Becomes the mailbox's receiver, without waiting.
  ///
  /// - Throws: ``LiaisonError/Code/alreadyClaimed`` when another receiver has the mailbox.
  func claimReceiver() async throws -> ClaimedReceiver
}

/// A mailbox's receiver as `receive` uses it.
protocol CommandReceiver: Sendable {
  /// Up to `limit` messages in their stored form: those waiting now, or when `waiting`, at
  /// least one, waiting for it.
  func batch(limit: Int, waiting: Bool) async throws -> [MailboxEnvelope<MailboxPayload>]
  /// Acknowledges (removes) the messages.
  func acknowledge(batch: [MailboxEnvelope<MailboxPayload>]) async throws
  /// Ends the receiver: unacknowledged messages go to the next one.
  func end() async
}

// MARK: - A folder

extension SharedContainer: CommandStores {
  func defaultsDomain(_ name: String, timeout: Duration?) async throws -> SharedDefaults {
    try await defaults(name, timeout: timeout)
  }

  func defaultsDomainList() async throws -> [(domain: LiaisonName, keyCount: Int)] { try defaultsDomains() }

  func mailboxHandle(_ name: String, sender: String, timeout: Duration?) async throws -> Mailbox {
    try await mailbox(name, sender: sender, timeout: timeout)
  }

  func mailboxList() async throws -> [MailboxInfo] { try mailboxes() }

  var placeName: PlaceName { .container(directory) }

  /// Every lock's state from one read of the kernel's table of locks, taking none of them.
  func lockStates() async throws -> [(name: String, state: Result<String, any Error>)]? {
    let table = FileLockTable.read()
    return try locks().map { lock in
      (lock.name.rawValue, Result<String, any Error> { "\(try table.map { try lock.probe(in: $0) } ?? .unknown)" })
    }
  }

  func signalReports() async throws -> [(name: String, state: Result<UInt64, any Error>)] {
    try signalNames().map { name in
      (name.rawValue, Result<UInt64, any Error> { try signal(name.rawValue).state })
    }
  }

  func databaseReports() async throws -> [StatusCommand.DatabaseReport]? {
    try sharedDatabases().map {
      StatusCommand.DatabaseReport(
        name: $0.name.rawValue, file: $0.path, bytes: $0.size, schemaVersion: $0.migrations.last,
        migrations: $0.migrations.count)
    }
  }
}

extension SharedDefaults: CommandDefaults {
  func storedValue(of name: LiaisonName) async throws -> DefaultsRawValue? { try rawValue(for: name) }

  func storedRows() async throws -> [(key: String, value: Result<DefaultsRawValue, LiaisonError>)] {
    try rowsReadOneByOne()
  }

  func write(json: Data, for name: LiaisonName, timeout: Duration?) async throws {
    try await setJSON(json, for: name, timeout: timeout)
  }

  func write(json: Data, for name: LiaisonName, replacing expected: DefaultsRawValue?, timeout: Duration?)
    async throws -> Bool
  {
    try await setJSON(json, for: name, replacing: expected, timeout: timeout)
  }

  func delete(_ name: LiaisonName?, timeout: Duration?) async throws {
    if let name { try await remove(named: name, timeout: timeout) } else { try await removeAll(timeout: timeout) }
  }

  func changeNotifications() async throws -> SignalNotifications { try changes() }
}

extension Mailbox: CommandMailbox {
  func maximumMessageSize() async throws -> Int { try limits().maximumMessageSize }

  func send(json: Data, id: String?, timeout: Duration?) async throws -> String {
    try await sendJSON(json, id: id, timeout: timeout).id
  }

  func entries(limit: Int) async throws -> [MailboxEntry] { try peek(limit: limit) }

  func requeue(ids: [String]?) async throws -> Int { try await requeueQuarantined(ids: ids) }

  func claimReceiver() async throws -> MailboxReceiver { try receiver() }
}

extension MailboxReceiver: CommandReceiver {
  func batch(limit: Int, waiting: Bool) async throws -> [MailboxEnvelope<MailboxPayload>] {
    waiting ? try await receiveStored(limit: limit) : try receiveAvailableStored(limit: limit)
  }

  func acknowledge(batch: [MailboxEnvelope<MailboxPayload>]) async throws { try await acknowledge(batch) }

  func end() async { close() }
}

// MARK: - PostgreSQL

#if Postgres
  extension PostgresContainer: CommandStores {
    typealias DefaultsDomain = PostgresDefaults
    typealias MailboxHandle = PostgresMailbox

    /// `timeout` bounds nothing here: opening a domain on PostgreSQL waits for no write.
    func defaultsDomain(_ name: String, timeout: Duration?) async throws -> PostgresDefaults {
      try await defaults(name)
    }

    func defaultsDomainList() async throws -> [(domain: LiaisonName, keyCount: Int)] { try await defaultsDomains() }

    /// `timeout` bounds nothing here: opening a mailbox on PostgreSQL waits for no write.
    func mailboxHandle(_ name: String, sender: String, timeout: Duration?) async throws -> PostgresMailbox {
      try await mailbox(name, sender: sender)
    }

    func mailboxList() async throws -> [MailboxInfo] { try await mailboxes() }

    var placeName: PlaceName { .namespace(namespace.rawValue) }

    /// `nil`: a lock on PostgreSQL is a session lock of the server's, which keeps no list of them
    /// by name.
    func lockStates() async throws -> [(name: String, state: Result<String, any Error>)]? { nil }

    func signalReports() async throws -> [(name: String, state: Result<UInt64, any Error>)] {
      try await signalStates().map { ($0.name.rawValue, .success($0.state)) }
    }

    /// `nil`: shared databases are SQLite files in a folder.
    func databaseReports() async throws -> [StatusCommand.DatabaseReport]? { nil }
  }

  extension PostgresDefaults: CommandDefaults {
    typealias Changes = PostgresSignalNotifications

    func storedValue(of name: LiaisonName) async throws -> DefaultsRawValue? { try await rawValue(for: name) }

    func storedRows() async throws -> [(key: String, value: Result<DefaultsRawValue, LiaisonError>)] {
      try await rowsReadOneByOne()
    }

    func write(json: Data, for name: LiaisonName, timeout: Duration?) async throws {
      try await setJSON(json, for: name, timeout: timeout)
    }

    func write(json: Data, for name: LiaisonName, replacing expected: DefaultsRawValue?, timeout: Duration?)
      async throws -> Bool
    {
      try await setJSON(json, for: name, replacing: expected, timeout: timeout)
    }

    func delete(_ name: LiaisonName?, timeout: Duration?) async throws {
      if let name { try await remove(named: name, timeout: timeout) } else { try await removeAll(timeout: timeout) }
    }

    func changeNotifications() async throws -> PostgresSignalNotifications { try await changes() }
  }

  extension PostgresMailbox: CommandMailbox {
    typealias Receiver = PostgresMailboxReceiver

    func maximumMessageSize() async throws -> Int { try await limits().maximumMessageSize }

    func send(json: Data, id: String?, timeout: Duration?) async throws -> String {
      try await sendJSON(json, id: id, timeout: timeout).id
    }

    func entries(limit: Int) async throws -> [MailboxEntry] { try await peek(limit: limit) }

    func requeue(ids: [String]?) async throws -> Int { try await requeueQuarantined(ids: ids) }

    func claimReceiver() async throws -> PostgresMailboxReceiver { try await receiver(timeout: .zero) }
  }

  extension PostgresMailboxReceiver: CommandReceiver {
    func batch(limit: Int, waiting: Bool) async throws -> [MailboxEnvelope<MailboxPayload>] {
      let timeout: Duration? = waiting ? nil : .zero
      return try await receiveStored(limit: limit, timeout: timeout)
    }

    func acknowledge(batch: [MailboxEnvelope<MailboxPayload>]) async throws { try await acknowledge(batch) }

    func end() async { await close() }
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
