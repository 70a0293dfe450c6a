import Foundation
import GRDB
import Liaison

/// A durable, named queue of messages to one receiver, which need not be running: the share
/// extension's "the user saved this link" for the app, whenever the app next starts.
///
/// ```swift
/// // In the share extension:
/// let inbox = try container.mailbox("inbox")
/// try inbox.send(SavedLink(url: url), id: draftID)   // stored once, even if the extension retries
///
/// // In the app, the one receiver:
/// let receiver = try inbox.receiver()
/// for try await envelope in receiver.messages(SavedLink.self) {
///   try save(envelope.payload)
///   try receiver.acknowledge(envelope)                // never delivered again
/// }
/// ```
///
/// **Delivery.** Messages are delivered in the order their sends returned (FIFO), to one receiver
/// at a time, **at least once**: a message is removed only when the receiver acknowledges it, so
/// one delivered to a receiver that dies before acknowledging is delivered again to the next
/// receiver. Within one receiver each message is delivered once.
///
/// **Sending** never waits for the receiver: a send is one short write to an SQLite database in
/// the container's private folder (the store), then a ring of the mailbox's ``/Liaison/Signal``, which wakes
/// the receiver — nobody polls. Once `send` returns, the message survives any crash of any
/// process. A send may carry its own `id`: a second send with an id that is waiting, or was
/// acknowledged within the last ``/Liaison/MailboxReceipt/acknowledgedIDRetention``, stores nothing, so a sender that does
/// not know whether its send went through simply sends again.
///
/// **Payloads** are any `Codable` value, stored as JSON, or `Data`, stored as its bytes. A payload
/// the receiver cannot decode as the type it asks for is **quarantined**: kept with the reason,
/// shown by ``peek(limit:)`` and `liaison peek`, never delivered again, and the receiver goes on
/// with the next message.
public final class Mailbox: Sendable {
  /// The mailbox's name.
  public let name: LiaisonName
  /// The name this handle's messages are sent under (the envelope's `sender`).
  public let sender: String
  let store: StoreDatabase
  let container: SharedContainer
  /// The mailbox's signal, which a send rings; `nil` only in a container read-only for this
  /// process where no writer has opened the mailbox yet (it is empty, and nothing is received).
  let signal: Signal?

  /// The sizes a mailbox may reach (see ``/Liaison/MailboxLimits``).
  public typealias Limits = MailboxLimits

  init(name: LiaisonName, sender: String, container: SharedContainer) throws(LiaisonError) {
    try MailboxEnvelope<MailboxPayload>.checkSender(sender, mailbox: name)
    self.name = name
    self.sender = sender
    self.container = container
    store = try StoreDatabase.shared(container, name: Self.storeName, migrator: Self.migrator)
    signal = try store.signal(name, in: .mailboxSignals, container: container)
    // A sender killed between its commit and its ring left a message that wakes nobody; when it
    // (or any process) opens the mailbox again, this ring makes a waiting receiver look.
    ring()
  }

  // MARK: Sending

  /// Stores `payload` at the end of the mailbox and wakes the receiver. Never waits for the
  /// receiver; once this returns, the message survives any crash.
  ///
  /// - Parameters:
  ///   - payload: a `Codable` value (stored as JSON) or `Data` (stored as its bytes).
  ///   - id: the message's id, 1 to 256 bytes; when a message with this id is waiting or was
  ///     acknowledged recently (``/Liaison/MailboxReceipt/acknowledgedIDRetention``), nothing is stored. `nil` makes a
  ///     new unique id.
  ///   - timeout: how long to wait at most for another process's write of the store; `nil` waits
  ///     as long as it takes.
  /// - Returns: the message's id, and whether this send stored it (`false`: a message with this
  ///   id was already sent).
  /// - Throws: ``/Liaison/LiaisonError/Code/tooLarge`` when the payload or the mailbox would exceed the
  ///   mailbox's ``limits()``; ``/Liaison/LiaisonError/Code/invalidArgument`` for an empty or too long id, or a value
  ///   that cannot be encoded; ``/Liaison/LiaisonError/Code/timedOut`` when another process's write of
  ///   the store lasts longer than `timeout` (`nil` waits as long as it takes).
  @available(*, noasync, message: "Use `try await send(_:id:timeout:)`, which does not block the cooperative pool.")
  @discardableResult
  public func send<Payload: Encodable>(
    _ payload: Payload, id: String? = nil, timeout: Duration? = nil
  ) throws(LiaisonError) -> MailboxReceipt {
    try commit([OutgoingMessage(payload, id: id, mailbox: name, encoder: container.makeEncoder())], timeout: timeout)[0]
  }

  /// Stores a message, like the blocking ``send(_:id:timeout:)``, but waits for other
  /// processes' writes of the store without blocking the cooperative pool.
  ///
  /// - Throws: as the blocking form, and ``/Liaison/LiaisonError/Code/cancelled`` when the task is
  ///   cancelled while waiting (nothing is stored then).
  @discardableResult
  public func send<Payload: Encodable>(
    _ payload: Payload, id: String? = nil, timeout: Duration? = nil
  ) async throws(LiaisonError) -> MailboxReceipt {
    try await commit(
      [OutgoingMessage(payload, id: id, mailbox: name, encoder: container.makeEncoder())], timeout: timeout)[0]
  }

  /// Stores every payload, in order, in one transaction (all or none), and wakes the receiver
  /// once: the fast way to send many messages. Each gets a new unique id.
  ///
  /// - Returns: the messages' receipts, in order.
  /// - Throws: as ``send(_:id:timeout:)-6co73``; nothing is stored then.
  @available(*, noasync, message: "Use `try await sendAll(_:timeout:)`, which does not block the cooperative pool.")
  @discardableResult
  public func sendAll<Payload: Encodable>(
    _ payloads: some Sequence<Payload>, timeout: Duration? = nil
  ) throws(LiaisonError) -> [MailboxReceipt] {
    let messages = try outgoing(payloads)
    guard !messages.isEmpty else { return [] }
    return try commit(messages, timeout: timeout)
  }

  /// Stores every payload in one transaction, like the blocking ``sendAll(_:timeout:)``, but
  /// waits for other processes' writes without blocking the cooperative pool.
  @discardableResult
  public func sendAll<Payload: Encodable>(
    _ payloads: some Sequence<Payload>, timeout: Duration? = nil
  ) async throws(LiaisonError) -> [MailboxReceipt] {
    let messages = try outgoing(payloads)
    guard !messages.isEmpty else { return [] }
    return try await commit(messages, timeout: timeout)
  }

  private func outgoing<Payload: Encodable>(_ payloads: some Sequence<Payload>) throws(LiaisonError)
    -> [OutgoingMessage]
  {
    var messages: [OutgoingMessage] = []
    let encoder = container.makeEncoder()
    for payload in payloads { messages.append(try OutgoingMessage(payload, id: nil, mailbox: name, encoder: encoder)) }
    return messages
  }

  /// Sends JSON text as it is, for tools that do not know the payload's type (the `liaison send`
  /// command). Any JSON value is accepted, including a bare string or number.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when `json` is not valid JSON; as
  ///   ``send(_:id:timeout:)-6co73`` otherwise.
  @available(*, noasync, message: "Use `try await sendJSON(_:id:timeout:)`, which does not block the cooperative pool.")
  @discardableResult
  public func sendJSON(_ json: Data, id: String? = nil, timeout: Duration? = nil) throws(LiaisonError)
    -> MailboxReceipt
  {
    try commit([try outgoing(json: json, id: id)], timeout: timeout)[0]
  }

  /// Sends JSON text as it is, waiting for other processes' writes without blocking the
  /// cooperative pool.
  @discardableResult
  public func sendJSON(_ json: Data, id: String? = nil, timeout: Duration? = nil) async throws(LiaisonError)
    -> MailboxReceipt
  {
    try await commit([try outgoing(json: json, id: id)], timeout: timeout)[0]
  }

  private func outgoing(json: Data, id: String?) throws(LiaisonError) -> OutgoingMessage {
    try OutgoingMessage(
      StoredValue(json: json, what: "The message for mailbox '\(name)'"), id: id, mailbox: name)
  }

  /// Every send: the messages in one transaction, then one ring. Returns their receipts.
  @available(*, noasync)
  private func commit(_ messages: [OutgoingMessage], timeout: Duration?) throws(LiaisonError) -> [MailboxReceipt] {
    let stored = try store.write(timeout: timeout) { db in try insert(messages, db) }
    ring()
    return zip(messages, stored).map { MailboxReceipt(id: $0.id, isStored: $1) }
  }

  private func commit(_ messages: [OutgoingMessage], timeout: Duration?) async throws(LiaisonError)
    -> [MailboxReceipt]
  {
    let stored = try await store.write(timeout: timeout) { db in try insert(messages, db) }
    ring()
    return zip(messages, stored).map { MailboxReceipt(id: $0.id, isStored: $1) }
  }

  /// Stores the messages that are not yet stored, within the limits, in the caller's transaction;
  /// returns, for each, whether it was stored (`false`: its given id was already sent).
  private func insert(_ messages: [OutgoingMessage], _ db: Database) throws -> [Bool] {
    let now = container.clock.wallSeconds
    var totals = try MailboxTotals.fetch(db, store.statements, mailbox: name)
    let limits = totals.limits
    var stored: [Bool] = []
    stored.reserveCapacity(messages.count)
    for message in messages {
      if message.givenID, try MailboxStatements.isKnown(message.id, in: name, db, store.statements) {
        stored.append(false)
        continue
      }
      stored.append(true)
      try message.value.checkSize(
        limits.maximumMessageSize, what: "A message for mailbox '\(name)'",
        advice: "Send large data as a file, and its name in the message.")
      totals.messages += 1
      totals.bytes += message.value.bytes.count
      guard totals.messages <= limits.maximumMessages, totals.bytes <= limits.maximumBytes else {
        throw LiaisonError(
          .tooLarge,
          "The mailbox '\(name)' is full: it would hold \(totals.messages) messages, \(totals.bytes) bytes; its limits "
            + "are \(limits.maximumMessages) messages, \(limits.maximumBytes) bytes. Nothing was sent: the receiver "
            + "must acknowledge messages (or remove quarantined ones) first.")
      }
      totals.nextPosition += 1
      try MailboxStatements.insert(
        message, at: totals.nextPosition, in: name, sender: sender, sentAt: now, db, store.statements)
    }
    try totals.save(db, store.statements, mailbox: name)
    return stored
  }

  /// Wakes the receiver. A failed ring only delays it until its next wake-up; the message is
  /// stored.
  func ring() { signal?.ring(state: { nil }) }

  // MARK: Limits

  /// The mailbox's limits: the ones last set by ``setLimits(_:timeout:)-9sdnm`` from any process, or
  /// the defaults.
  public func limits() throws(LiaisonError) -> Limits {
    try store.read { db in try MailboxTotals.fetch(db, store.statements, mailbox: name).limits }
  }

  /// Sets the mailbox's limits, for every sender in every process from their next send on.
  /// Messages already waiting stay, even over the new limits; further sends are refused until
  /// the mailbox is back within them.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when a limit is not positive;
  ///   ``/Liaison/LiaisonError/Code/timedOut`` when another process holds the store longer than `timeout`.
  @available(*, noasync, message: "Use `try await setLimits(_:timeout:)`, which does not block the pool.")
  public func setLimits(_ limits: Limits, timeout: Duration? = nil) throws(LiaisonError) {
    try limits.check(mailbox: name)
    try store.write(timeout: timeout) { db in try save(limits, db) }
  }

  /// Sets the mailbox's limits, waiting for other processes' writes of the store without
  /// blocking the cooperative pool.
  public func setLimits(_ limits: Limits, timeout: Duration? = nil) async throws(LiaisonError) {
    try limits.check(mailbox: name)
    try await store.write(timeout: timeout) { db in try save(limits, db) }
  }

  private func save(_ limits: Limits, _ db: Database) throws {
    var totals = try MailboxTotals.fetch(db, store.statements, mailbox: name)
    totals.limits = limits
    try totals.saveWithLimits(db, store.statements, mailbox: name)
  }

  // MARK: Inspecting

  /// The first `limit` messages in delivery order, quarantined ones included (with their reason),
  /// without receiving them: for tools and diagnostics. Needs no receiver.
  public func peek(limit: Int = 100) throws(LiaisonError) -> [MailboxEntry] {
    guard limit > 0 else { return [] }
    return try store.readOneStatement { db in
      try MessageRow.fetch(
        db, store.statements, mailbox: name, after: 0, limit: limit, includingQuarantined: true, path: store.path
      )
      .map { row in
        MailboxEntry(
          id: row.id, sentAt: row.sentAt, sender: row.sender, payload: row.payload?.peekedPayload ?? .data(Data()),
          quarantineReason: row.quarantineReason ?? row.damage ?? row.payload?.damage)
      }
    }
  }

  /// How many messages wait to be received and acknowledged, not counting quarantined ones.
  public func count() throws(LiaisonError) -> Int {
    let totals = try store.readOneStatement { db in try MailboxTotals.fetch(db, store.statements, mailbox: name) }
    return totals.messages - totals.quarantined
  }

  // MARK: Quarantine

  /// Puts quarantined messages back in the queue, for a receiver that can now read them (after
  /// an app update that brings back the payload type they were sent as).
  ///
  /// ```swift
  /// let receiver = try inbox.receiver()
  /// try inbox.requeueQuarantined()          // every message the previous version set aside
  /// for try await envelope in receiver.messages(SavedLinkV2.self) { … }
  /// ```
  ///
  /// Each requeued message goes to the **end** of the queue (in the order they were sent), keeps
  /// its id, sender and sending time, and loses its quarantine reason; a running receiver is
  /// woken and receives it like a new message. A receiver that still cannot decode it
  /// quarantines it again. Needs no receiver: `liaison requeue` runs it beside a running app.
  ///
  /// - Parameters:
  ///   - ids: the ids of the messages to requeue; `nil` requeues every quarantined message. An
  ///     id that names no quarantined message is skipped.
  ///   - timeout: how long to wait at most for another process's write of the store; `nil` waits
  ///     as long as it takes. The `async` twin waits without blocking the cooperative pool.
  /// - Returns: how many messages were requeued.
  @available(*, noasync, message: "Use `try await requeueQuarantined(ids:timeout:)`, which does not block the pool.")
  @discardableResult
  public func requeueQuarantined(ids: [String]? = nil, timeout: Duration? = nil) throws(LiaisonError) -> Int {
    let wanted = ids.map(Set.init)
    let requeued = try store.write(timeout: timeout) { db in try requeue(wanted, db) }
    if requeued > 0 { ring() }
    return requeued
  }

  /// Puts quarantined messages back in the queue, waiting for other processes' writes of the
  /// store without blocking the cooperative pool.
  @discardableResult
  public func requeueQuarantined(ids: [String]? = nil, timeout: Duration? = nil) async throws(LiaisonError) -> Int {
    let wanted = ids.map(Set.init)
    let requeued = try await store.write(timeout: timeout) { db in try requeue(wanted, db) }
    if requeued > 0 { ring() }
    return requeued
  }

  private func requeue(_ wanted: Set<String>?, _ db: Database) throws -> Int {
    var totals = try MailboxTotals.fetch(db, store.statements, mailbox: name)
    let quarantined = try Row.fetchAll(
      db,
      sql: """
        SELECT position, id FROM mailbox_message WHERE mailbox = ? AND quarantine_reason IS NOT NULL
        ORDER BY position
        """,
      arguments: [name.rawValue])
    let move = try db.cachedStatement(
      sql: "UPDATE mailbox_message SET position = ?, quarantine_reason = NULL WHERE mailbox = ? AND position = ?")
    var count = 0
    for row in quarantined {
      guard let position = Int64.fromDatabaseValue(row[0] as DatabaseValue) else { continue }
      if let wanted, !wanted.contains(String.fromDatabaseValue(row[1] as DatabaseValue) ?? "") { continue }
      totals.nextPosition += 1
      try move.execute(arguments: [totals.nextPosition, name.rawValue, position])
      count += 1
    }
    totals.quarantined -= count
    try totals.save(db, store.statements, mailbox: name)
    return count
  }
}

extension SharedContainer {
  /// The mailbox called `name`.
  ///
  /// - Parameters:
  ///   - name: the mailbox's name, which follows the naming rule (``/Liaison/LiaisonName/rule``).
  ///   - sender: the name this handle's messages carry as their sender; by default the
  ///     process's name.
  ///   - timeout: how long the first opening in this process waits at most while another process
  ///     writes or migrates the store; `nil` waits as long as it takes. The `async` twin waits
  ///     without blocking a thread of the cooperative pool.
  /// - Throws: ``/Liaison/LiaisonError/Code/invalidName`` when `name` breaks the naming rule;
  ///   ``/Liaison/LiaisonError/Code/corruptFile`` when the store is damaged; ``/Liaison/LiaisonError/Code/timedOut``
  ///   when another process holds the store longer than `timeout`.
  @available(*, noasync, message: "Use `try await mailbox(_:sender:timeout:)`, which does not block the pool.")
  public func mailbox(
    _ name: String, sender: String = ProcessInfo.processInfo.processName, timeout: Duration? = nil
  ) throws(LiaisonError) -> Mailbox {
    let name = try LiaisonName(name)
    // Opened (and registered in this process) first, so that the handle finds it open.
    _ = try StoreDatabase.shared(self, name: Mailbox.storeName, migrator: Mailbox.migrator, timeout: timeout)
    return try Mailbox(name: name, sender: sender, container: self)
  }

  /// The mailbox called `name`, its messages sent under `sender`, waiting for another process's
  /// write or migration of the store without blocking a thread of the cooperative pool.
  public func mailbox(_ name: String, sender: String) async throws(LiaisonError) -> Mailbox {
    try await mailbox(name, sender: sender, timeout: nil)
  }

  /// The mailbox called `name`, waiting at most `timeout` for another process's write or
  /// migration of the store, without blocking a thread of the cooperative pool.
  public func mailbox(
    _ name: String, sender: String = ProcessInfo.processInfo.processName, timeout: Duration? = nil
  ) async throws(LiaisonError) -> Mailbox {
    let name = try LiaisonName(name)
    _ = try await StoreDatabase.shared(self, name: Mailbox.storeName, migrator: Mailbox.migrator, timeout: timeout)
    return try Mailbox(name: name, sender: sender, container: self)
  }

  /// Every mailbox that holds messages, by name: how many wait, how many are quarantined, and
  /// their payload bytes. Opens no store that does not exist yet.
  public func mailboxes() throws(LiaisonError) -> [MailboxInfo] {
    guard let store = try StoreDatabase.existing(self, name: Mailbox.storeName, migrator: Mailbox.migrator) else {
      return []
    }
    return try store.read { db in
      try Row.fetchAll(
        db, sql: "SELECT mailbox, messages, quarantined, bytes FROM mailbox_totals WHERE messages > 0 ORDER BY mailbox"
      ).compactMap { row in
        guard let text = String.fromDatabaseValue(row[0] as DatabaseValue), let name = LiaisonName(storedName: text),
          let messages = Int.fromDatabaseValue(row[1] as DatabaseValue),
          let quarantined = Int.fromDatabaseValue(row[2] as DatabaseValue),
          let bytes = Int.fromDatabaseValue(row[3] as DatabaseValue)
        else { return nil }
        return MailboxInfo(name: name, waiting: messages - quarantined, quarantined: quarantined, bytes: bytes)
      }
    }
  }
}

/// A mailbox's running totals and its next position, kept in the same transactions as its
/// messages, so that a send checks the limits without counting.
struct MailboxTotals {
  var nextPosition: Int64 = 0
  var messages = 0
  var bytes = 0
  var quarantined = 0
  /// The mailbox's limits, stored in the same row (the defaults until set).
  var limits = Mailbox.Limits()

  /// The totals as saved; counted from the messages when there are none yet (a new mailbox) or
  /// when another program left values Liaison never stores. (Taking those as 0 restarted the
  /// positions: every later send then failed on a position already taken.)
  static func fetch(_ db: Database, _ statements: PreparedStatements, mailbox: LiaisonName) throws -> MailboxTotals {
    let saved = try statements.run(MailboxStatements.totals, in: db) { row -> (MailboxTotals?, Mailbox.Limits)? in
      row.bind(1, text: mailbox.rawValue)
      guard try row.step() else { return nil }
      let limits = Self.limits(row)
      // `Int(exactly:)`: a value another program left that does not fit (a 32-bit watch) is
      // counted again from the messages, never a trap.
      guard let nextPosition = row.integer(0), let messages = row.integer(1).flatMap({ Int(exactly: $0) }),
        let bytes = row.integer(2).flatMap({ Int(exactly: $0) }),
        let quarantined = row.integer(3).flatMap({ Int(exactly: $0) })
      else { return (nil, limits) }
      return (
        MailboxTotals(
          nextPosition: nextPosition, messages: messages, bytes: bytes, quarantined: quarantined, limits: limits),
        limits
      )
    }
    if let totals = saved?.0 { return totals }
    let limits = saved?.1 ?? Mailbox.Limits()
    let counted = try db.cachedStatement(
      sql: """
        SELECT max(position), count(*), total(length(payload)), count(quarantine_reason)
        FROM mailbox_message WHERE mailbox = ?
        """)
    guard let counts = try Row.fetchOne(counted, arguments: [mailbox.rawValue]) else {
      return MailboxTotals(limits: limits)
    }
    return MailboxTotals(
      nextPosition: Int64.fromDatabaseValue(counts[0] as DatabaseValue) ?? 0,
      messages: Int.fromDatabaseValue(counts[1] as DatabaseValue) ?? 0,
      bytes: Int(Double.fromDatabaseValue(counts[2] as DatabaseValue) ?? 0),
      quarantined: Int.fromDatabaseValue(counts[3] as DatabaseValue) ?? 0, limits: limits)
  }

  /// The limits in columns 4-6 of a totals row; the default for one that is unset (`NULL`) or that
  /// another program left at what Liaison never stores (not a positive whole number).
  private static func limits(_ row: some StoredColumns) -> Mailbox.Limits {
    func limit(_ column: Int32, _ fallback: Int) -> Int {
      guard let value = row.integer(column), value > 0, let limit = Int(exactly: value) else { return fallback }
      return limit
    }
    let defaults = Mailbox.Limits()
    return Mailbox.Limits(
      maximumMessageSize: limit(4, defaults.maximumMessageSize), maximumMessages: limit(5, defaults.maximumMessages),
      maximumBytes: limit(6, defaults.maximumBytes))
  }

  /// Saves the totals and the limits.
  func saveWithLimits(_ db: Database, _ statements: PreparedStatements, mailbox: LiaisonName) throws {
    try save(db, statements, mailbox: mailbox)
    try db.execute(
      sql: """
        UPDATE mailbox_totals SET maximum_message_size = ?, maximum_messages = ?, maximum_bytes = ?
        WHERE mailbox = ?
        """,
      arguments: [limits.maximumMessageSize, limits.maximumMessages, limits.maximumBytes, mailbox.rawValue])
  }

  func save(_ db: Database, _ statements: PreparedStatements, mailbox: LiaisonName) throws {
    try statements.run(MailboxStatements.saveTotals, in: db) { statement in
      statement.bind(1, text: mailbox.rawValue)
      statement.bind(2, integer: nextPosition)
      statement.bind(3, integer: Int64(messages))
      statement.bind(4, integer: Int64(bytes))
      statement.bind(5, integer: Int64(quarantined))
      try statement.execute()
    }
  }
}

/// A stored message, read without trusting the row: a row that another program wrote (a column
/// holding what Liaison never stores) comes back with `damage` saying what is wrong, so that the
/// receiver quarantines it instead of the whole mailbox failing.
package typealias MessageRow = ReceivedMessage

extension MessageRow {
  static func fetch(
    _ db: Database, _ statements: PreparedStatements, mailbox: LiaisonName, after position: Int64, limit: Int,
    maximumBytes: Int = .max, includingQuarantined: Bool, path: String
  ) throws -> [MessageRow] {
    try statements.run(MailboxStatements.messages, in: db) { statement in
      statement.bind(1, text: mailbox.rawValue)
      statement.bind(2, integer: position)
      statement.bind(3, integer: includingQuarantined ? 1 : 0)
      statement.bind(4, integer: Int64(limit))
      var rows: [MessageRow] = []
      var bytes = 0
      // At most `limit` rows, and no more once they hold `maximumBytes` of payload.
      while bytes < maximumBytes, try statement.step() {
        let row = try MessageRow(columns: statement, path: path)
        bytes += row.payload?.bytes.count ?? 0
        rows.append(row)
      }
      return rows
    }
  }

  /// The message at `position`, unless it is quarantined or gone.
  static func fetch(_ db: Database, mailbox: LiaisonName, at position: Int64, path: String) throws -> MessageRow? {
    let statement = try db.cachedStatement(
      sql: """
        SELECT position, id, sender, sent_at, kind, payload, quarantine_reason FROM mailbox_message
        WHERE mailbox = ? AND position = ? AND quarantine_reason IS NULL
        """)
    return try Row.fetchOne(statement, arguments: [mailbox.rawValue, position]).map {
      try MessageRow(row: $0, path: path)
    }
  }

  /// Reads a row of the columns position, id, sender, sent_at, kind, payload, quarantine_reason.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/corruptFile`` only when the position cannot be read (such a
  ///   row cannot even be set aside).
  init(columns row: some StoredColumns, path: String) throws(LiaisonError) {
    guard let position = row.integer(0) else { throw foreignRow(path) }
    var damage: [String] = []
    func column<T>(_ value: T?, _ name: String, _ fallback: T) -> T {
      if let value { return value }
      damage.append("its \(name) is not what Liaison stores")
      return fallback
    }
    let id = column(row.text(1), "id", "?")
    let sender = column(row.text(2), "sender", "?")
    let sentAt = column(row.number(3), "sending time", 0.0)
    let payload = try? StoredValue(columns: row, kindColumn: 4, valueColumn: 5, path: path)
    if payload == nil { damage.append("its payload or kind is not what Liaison stores") }
    self.init(
      position: position, id: id, sender: sender, sentAt: Date(timeIntervalSince1970: sentAt.isFinite ? sentAt : 0),
      payload: payload, quarantineReason: row.isNull(6) ? nil : (row.text(6) ?? "unknown"),
      damage: damage.isEmpty ? nil : "not written by Liaison: " + damage.joined(separator: ", "))
  }

  /// ``init(columns:path:)`` for a GRDB row, for the fuzzer.
  package init(row: Row, path: String) throws(LiaisonError) {
    try self.init(columns: row, path: path)
  }
}

/// A message row that Liaison did not write.
private func foreignRow(_ path: String) -> LiaisonError {
  LiaisonError(
    .corruptFile,
    "A message in '\(path)' was not written by Liaison (a column holds what Liaison never stores). Stop every "
      + "process of the container and move the store aside to keep its data; a new one is made on next use.",
    path: path)
}

extension Mailbox: SuspendablePart {
  package func waitUntilResumed() async {
    let resumed = Locked<CheckedContinuation<Void, Never>?>(nil)
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        resumed.withLock { $0 = continuation }
        if Task.isCancelled { Self.takeContinuation(resumed)?.resume() }
        // The action stays with the container until its resume if the task is cancelled first;
        // it then finds the continuation gone and does nothing.
        container.afterResume { Self.takeContinuation(resumed)?.resume() }
      }
    } onCancel: {
      Self.takeContinuation(resumed)?.resume()
    }
  }

  /// The continuation, once: whoever takes it resumes it.
  private static func takeContinuation(
    _ resumed: Locked<CheckedContinuation<Void, Never>?>
  ) -> CheckedContinuation<Void, Never>? {
    resumed.withLock { continuation in
      defer { continuation = nil }
      return continuation
    }
  }
}
