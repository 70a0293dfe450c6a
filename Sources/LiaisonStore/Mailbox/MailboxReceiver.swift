import Foundation
import GRDB
import Liaison

/// The one receiver of a mailbox: receives its messages in order and acknowledges them.
///
/// A mailbox has **one receiver at a time**, across every process: ``Mailbox/receiver()`` takes
/// the mailbox's receive lock and throws ``/Liaison/LiaisonError/Code/alreadyClaimed`` at once when another
/// receiver (in any process, this one included) holds it. It does not wait, because two parts of a
/// program that both believe they are the receiver is a mistake to report, not to queue behind;
/// the lock comes free the moment the receiver is closed or its process dies, so a restarted
/// receiver takes over at once.
///
/// Each message is delivered to a receiver once, even when several tasks receive from it at the
/// same time; a message it does not acknowledge is delivered again to the next receiver (after a
/// crash, or ``close()``). ``close()`` ends the receiver: a receive waiting then throws
/// ``/Liaison/LiaisonError/Code/closed``, as does every later call. ``/Liaison/SharedContainer/suspend()`` gives the
/// lock up (iOS must not suspend a process that holds one) and ends the receiver too: a receive
/// waiting then throws ``/Liaison/LiaisonError/Code/suspended`` at once, as does every later call: make a
/// new receiver after `resume()`.
public final class MailboxReceiver: Sendable {
  /// The mailbox this receiver receives from.
  public let mailbox: Mailbox
  private let held: LockGuard
  /// The claim's fencing token, in every envelope (``MailboxEnvelope/claimToken``).
  private let claimToken: UInt64
  /// Woken by every send: subscribed once, before the first look at the mailbox.
  private let wakeUps: SignalWaiter
  /// What this receiver has read from the store and not yet delivered, and the receive path.
  private let reading: MailboxReceiving
  /// Ends the receiver when the container is suspended.
  private let suspension: SuspensionHandlers
  /// When acknowledged ids were last forgotten (``/Liaison/MailboxReceipt/acknowledgedIDRetention``): at the
  /// receiver's start, then at most hourly, so that a receiver running for weeks keeps the table
  /// small.
  private let lastPruned: Locked<Double>
  /// Whether ``close()`` ended the receiver (rather than a suspension of the container).
  private let closed = Locked(false)

  init(mailbox: Mailbox, held: LockGuard) throws(LiaisonError) {
    self.mailbox = mailbox
    self.held = held
    lastPruned = Locked(mailbox.container.clock.wallSeconds)
    claimToken = try held.fencingToken()
    reading = MailboxReceiving(mailbox: mailbox.name, claimToken: claimToken)
    guard let signal = mailbox.signal else {
      // Only in a read-only container, where the receiver's lock was refused before.
      throw LiaisonError.readOnly(nil, "receive from the mailbox", path: mailbox.store.path)
    }
    let wakeUps = try SignalWaiter(signal, clock: mailbox.container.clock)
    self.wakeUps = wakeUps
    suspension = mailbox.container.registerSuspensionHandlers(
      suspend: {
        held.unlock()
        wakeUps.close()
      },
      resume: {})
  }

  /// How many receives wait for a send now (the tests wait for a receive to be waiting).
  package var waitingForSends: Int { wakeUps.waitingCount }

  /// Ends this receiver: messages it delivered and did not acknowledge go to the next receiver.
  /// Releasing the receiver does the same.
  public func close() {
    closed.withLock { $0 = true }
    held.unlock()
    wakeUps.close()
  }

  // MARK: Receiving

  /// The next message, decoded as `Payload`, waiting (without polling) until there is one; `nil`
  /// when the task is cancelled: what ``/Liaison/CoordinationReceiver/messages(_:batchSize:)``,
  /// the receiver's main loop, calls. Reads up to `batchSize` messages from the store at once;
  /// those read ahead stay with the receiver, whichever call asks next, and so does a message
  /// taken when the task is cancelled: the loop ends without it, and the next call delivers it.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/closed`` once closed; ``/Liaison/LiaisonError/Code/suspended``
  ///   when a suspension of the container ended the receiver; a ``/Liaison/LiaisonError`` when the
  ///   store fails.
  public func nextMessage<Payload: Decodable & Sendable>(_ type: Payload.Type = Payload.self, batchSize: Int = 64)
    async throws(LiaisonError) -> MailboxEnvelope<Payload>?
  {
    let decode = MailboxReceiving.decoding(Payload.self, using: mailbox.container.makeDecoder())
    let batchSize = max(1, batchSize)
    do {
      return try await reading.receive(limit: 1, readAhead: batchSize, decode: decode, from: self).first
    } catch let error where error.code == .cancelled {
      return nil
    }
  }

  /// Up to `limit` messages, waiting (without polling) until there is at least one, at most
  /// `timeout`: `nil` waits as long as it takes; `.zero` returns the messages waiting now, perhaps
  /// none.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/timedOut`` when `timeout` passes with no message;
  ///   ``/Liaison/LiaisonError/Code/cancelled`` when the task is cancelled (the messages it would
  ///   have returned are delivered next); a
  ///   ``/Liaison/LiaisonError`` as ``receiveAvailable(_:limit:)``.
  public func receive<Payload: Decodable & Sendable>(
    _ type: Payload.Type = Payload.self, limit: Int = 64, timeout: Duration? = nil
  ) async throws(LiaisonError) -> [MailboxEnvelope<Payload>] {
    try await receive(
      limit: limit, timeout: timeout,
      decode: MailboxReceiving.decoding(Payload.self, using: mailbox.container.makeDecoder()))
  }

  /// ``receive(_:limit:timeout:)`` with the messages in their stored form, which never needs
  /// quarantine: for tools that do not know the payload type (the `liaison receive` command).
  package func receiveStored(limit: Int, timeout: Duration?) async throws(LiaisonError)
    -> [MailboxEnvelope<MailboxPayload>]
  {
    try await receive(limit: limit, timeout: timeout) { $0.storedPayload }
  }

  /// Up to `limit` messages decoded by `decode`, waiting as ``receive(_:limit:timeout:)`` does.
  private func receive<Payload>(
    limit: Int, timeout: Duration?, decode: (StoredValue) -> Result<Payload, UndecodableMessage>
  ) async throws(LiaisonError) -> [MailboxEnvelope<Payload>] {
    try ProcessLock.check(timeout)
    if timeout == .zero { return try await reading.deliver(limit: limit, readAhead: limit, decode: decode, from: self) }
    let deadline = timeout.map { mailbox.container.clock.now + $0 }
    return try await reading.receive(limit: limit, readAhead: limit, decode: decode, from: self, until: deadline)
  }

  /// Up to `limit` of the messages waiting now, without waiting; empty when there are none.
  /// Messages that cannot be decoded as `Payload` are quarantined on the way and not returned.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/closed`` when the receiver was closed;
  ///   ``/Liaison/LiaisonError/Code/suspended`` when it was ended by a suspension of the container;
  ///   ``/Liaison/LiaisonError/Code/corruptFile`` when the store is damaged.
  public func receiveAvailable<Payload: Decodable & Sendable>(
    _ type: Payload.Type = Payload.self, limit: Int = 64
  ) throws(LiaisonError) -> [MailboxEnvelope<Payload>] {
    try checkHeld()
    let decode = MailboxReceiving.decoding(Payload.self, using: mailbox.container.makeDecoder())
    let delivery = try reading.deliverNow(limit: limit, readAhead: limit, decode: decode, read: readNow)
    try setAside(delivery.quarantine)
    return delivery.envelopes
  }

  /// The messages after position `after`, at most `limit` and ``MailboxLimits/readAheadBytes``
  /// of payloads.
  private func readNow(after: Int64, limit: Int) throws(LiaisonError) -> [MessageRow] {
    let store = mailbox.store
    let name = mailbox.name
    return try store.readOneStatement { db in
      try MessageRow.fetch(
        db, store.statements, mailbox: name, after: after, limit: limit, maximumBytes: MailboxLimits.readAheadBytes,
        includingQuarantined: false, path: store.path)
    }
  }

  /// Marks undecodable messages as quarantined, with the reason.
  @available(*, noasync)
  private func setAside(_ messages: [QuarantinedMessage]) throws(LiaisonError) {
    guard !messages.isEmpty else { return }
    try mailbox.store.write { db in try quarantine(messages, db) }
  }

  private func setAside(_ messages: [QuarantinedMessage]) async throws(LiaisonError) {
    guard !messages.isEmpty else { return }
    try await mailbox.store.write { db in try quarantine(messages, db) }
  }

  private func quarantine(_ messages: [QuarantinedMessage], _ db: Database) throws {
    let name = mailbox.name
    var totals = try MailboxTotals.fetch(db, mailbox.store.statements, mailbox: name)
    let statement = try db.cachedStatement(
      sql: """
        UPDATE mailbox_message SET quarantine_reason = ?
        WHERE mailbox = ? AND position = ? AND quarantine_reason IS NULL
        """)
    for message in messages {
      try statement.execute(arguments: [message.reason, name.rawValue, message.position])
      totals.quarantined += db.changesCount
    }
    try totals.save(db, mailbox.store.statements, mailbox: name)
  }

  // MARK: Acknowledging

  /// Removes a handled message for good: it is never delivered again, to any receiver.
  /// Acknowledging a message already removed does nothing.
  ///
  /// - Parameters:
  ///   - envelope: the message, as ``/Liaison/CoordinationReceiver/messages(_:batchSize:)`` or ``receive(_:limit:timeout:)`` delivered it.
  ///   - timeout: how long to wait at most for another process's write of the store; `nil` waits
  ///     as long as it takes.
  @available(*, noasync, message: "Use `try await acknowledge(_:timeout:)`, which does not block the cooperative pool.")
  public func acknowledge<Payload>(_ envelope: MailboxEnvelope<Payload>, timeout: Duration? = nil) throws(LiaisonError)
  {
    try acknowledge([envelope], timeout: timeout)
  }

  /// Removes a handled message for good, waiting for other processes' writes of the store
  /// without blocking the cooperative pool.
  public func acknowledge<Payload>(_ envelope: MailboxEnvelope<Payload>, timeout: Duration? = nil)
    async throws(LiaisonError)
  {
    try await acknowledge([envelope], timeout: timeout)
  }

  /// Removes handled messages for good, in one transaction.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument``, acknowledging nothing, when an envelope
  ///   comes from another mailbox (or another container's mailbox of the same name);
  ///   ``/Liaison/LiaisonError/Code/timedOut``, acknowledging nothing, when another process's write of
  ///   the store lasts longer than `timeout`.
  @available(*, noasync, message: "Use `try await acknowledge(_:timeout:)`, which does not block the cooperative pool.")
  public func acknowledge<Payload>(
    _ envelopes: [MailboxEnvelope<Payload>], timeout: Duration? = nil
  ) throws(LiaisonError) {
    guard let removal = try removal(of: envelopes) else { return }
    try mailbox.store.write(timeout: timeout, removal)
    reading.acknowledged(envelopes)
  }

  /// Removes handled messages for good, in one transaction, waiting for other processes' writes
  /// of the store without blocking the cooperative pool.
  public func acknowledge<Payload>(_ envelopes: [MailboxEnvelope<Payload>], timeout: Duration? = nil)
    async throws(LiaisonError)
  {
    guard let removal = try removal(of: envelopes) else { return }
    try await mailbox.store.write(timeout: timeout, removal)
    reading.acknowledged(envelopes)
  }

  /// The transaction that acknowledges `envelopes`; `nil` when there are none.
  private func removal<Payload>(
    of envelopes: [MailboxEnvelope<Payload>]
  ) throws(LiaisonError) -> ((Database) throws -> Void)? {
    try checkHeld()
    guard !envelopes.isEmpty else { return nil }
    let name = mailbox.name
    try reading.checkOwn(envelopes, doing: "acknowledged")
    let ids = Dictionary(envelopes.map { ($0.position, $0.id) }, uniquingKeysWith: { first, _ in first })
    let now = mailbox.container.clock.wallSeconds
    let prune = lastPruned.withLock { last in
      guard now - last >= 3600 else { return false }
      last = now
      return true
    }
    // Removed by runs of consecutive positions: a batch as received is usually one run.
    var runs: [ClosedRange<Int64>] = []
    for position in envelopes.map({ $0.position }).sorted() {
      if let last = runs.last, position <= last.upperBound + 1 {
        runs[runs.count - 1] = last.lowerBound...max(last.upperBound, position)
      } else {
        runs.append(position...position)
      }
    }
    return { [self] db in
      let statements = mailbox.store.statements
      var totals = try MailboxTotals.fetch(db, statements, mailbox: name)
      let remember = try Self.rememberAcknowledged(db)
      for run in runs {
        let removed = try MailboxStatements.remove(run, in: name, db, statements)
        for row in removed {
          // A position names a message only in its own store: one from another container's
          // mailbox of the same name removes another message. The transaction is rolled back.
          if let position = row.position, row.id != ids[position] {
            throw reading.foreignEnvelope(
              id: ids[position] ?? "?", from: "another container's mailbox '\(name)'", doing: "acknowledged")
          }
          totals.messages -= 1
          totals.bytes -= row.bytes
          if row.givenID, let id = row.id {
            try remember.execute(arguments: [name.rawValue, id, now])
          }
        }
      }
      try totals.save(db, statements, mailbox: name)
      if prune { try Mailbox.forgetOldAcknowledgedIDs(db, now: now) }
    }
  }

  /// Hands delivered messages back unacknowledged: this receiver delivers them again, before the
  /// messages sent after them (in their order), without recreating them — same id, same position.
  /// For a message that cannot be handled yet (a service down, a file not yet there): the
  /// receiver goes on with the next delivery and meets the message again.
  ///
  /// A message already acknowledged, or removed, is skipped. Handing a message back does not
  /// count as a delivery for at-least-once: it stays in the mailbox until acknowledged.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument``, handing nothing back, when an envelope
  ///   comes from another mailbox; ``/Liaison/LiaisonError/Code/closed`` or
  ///   ``/Liaison/LiaisonError/Code/suspended`` when the receiver is ended.
  public func redeliver<Payload>(_ envelopes: [MailboxEnvelope<Payload>]) throws(LiaisonError) {
    try checkHeld()
    guard !envelopes.isEmpty else { return }
    let name = mailbox.name
    let store = mailbox.store
    try reading.checkOwn(envelopes, doing: "handed back")
    let waiting = reading.waitingPositions
    let wanted = envelopes.filter { !waiting.contains($0.position) }
    let rows = try store.readOneStatement { db in
      try wanted.compactMap { envelope in
        try MessageRow.fetch(db, mailbox: name, at: envelope.position, path: store.path).flatMap {
          $0.id == envelope.id ? $0 : nil  // removed, and the position reused by another container
        }
      }
    }
    reading.handBack(rows)
  }

  /// Hands one delivered message back unacknowledged: see ``redeliver(_:)-([MailboxEnvelope<Payload>])``.
  public func redeliver<Payload>(_ envelope: MailboxEnvelope<Payload>) throws(LiaisonError) {
    try redeliver([envelope])
  }

  /// Removes every quarantined message of the mailbox. Their ids are remembered like those of
  /// acknowledged messages, so that a retried send with one of them stores nothing.
  ///
  /// - Parameter timeout: how long to wait at most for another process's write of the store;
  ///   `nil` waits as long as it takes.
  /// - Returns: how many were removed.
  @available(
    *, noasync, message: "Use `try await removeQuarantined(timeout:)`, which does not block the cooperative pool."
  )
  @discardableResult
  public func removeQuarantined(timeout: Duration? = nil) throws(LiaisonError) -> Int {
    try checkHeld()
    return try mailbox.store.write(timeout: timeout, removingQuarantined)
  }

  /// Removes every quarantined message of the mailbox, waiting for other processes' writes of
  /// the store without blocking the cooperative pool.
  @discardableResult
  public func removeQuarantined(timeout: Duration? = nil) async throws(LiaisonError) -> Int {
    try checkHeld()
    return try await mailbox.store.write(timeout: timeout, removingQuarantined)
  }

  private func removingQuarantined(_ db: Database) throws -> Int {
    let name = mailbox.name
    let now = mailbox.container.clock.wallSeconds
    var totals = try MailboxTotals.fetch(db, mailbox.store.statements, mailbox: name)
    let removed = try Row.fetchAll(
      db,
      sql: """
        DELETE FROM mailbox_message WHERE mailbox = ? AND quarantine_reason IS NOT NULL
        RETURNING given_id, id, length(payload)
        """,
      arguments: [name.rawValue])
    let remember = try Self.rememberAcknowledged(db)
    for row in removed where Bool.fromDatabaseValue(row[0] as DatabaseValue) == true {
      try remember.execute(arguments: [name.rawValue, row[1] as DatabaseValue, now])
    }
    totals.messages -= removed.count
    totals.quarantined -= removed.count
    totals.bytes -= removed.reduce(0) { $0 + (Int.fromDatabaseValue($1[2] as DatabaseValue) ?? 0) }
    try totals.save(db, mailbox.store.statements, mailbox: name)
    return removed.count
  }

  private func checkHeld() throws(LiaisonError) {
    guard !held.isHeld else { return }
    if closed.withLock({ $0 }) {
      throw LiaisonError(
        .closed,
        "The receiver of mailbox '\(mailbox.name)' was closed: its messages not acknowledged go to the next "
          + "receiver. Make a new receiver with `mailbox.receiver()`.")
    }
    throw LiaisonError(
      .suspended,
      "The receiver of mailbox '\(mailbox.name)' gave up its lock when the container was suspended. After "
        + "`container.resume()`, make a new receiver with `mailbox.receiver()`.")
  }
}

extension Mailbox {
  /// Becomes the mailbox's one receiver, at once or not at all.
  ///
  /// Acknowledged ids older than ``/Liaison/MailboxReceipt/acknowledgedIDRetention`` are forgotten here, unless another
  /// process is writing the store (and at most hourly by a running receiver's acknowledgements).
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/alreadyClaimed`` when another receiver, in any process, holds
  ///   the mailbox.
  public func receiver() throws(LiaisonError) -> MailboxReceiver {
    guard let held = try receiveLock().tryLock() else {
      throw LiaisonError(
        .alreadyClaimed,
        "The mailbox '\(name)' already has a receiver (in another process, or another MailboxReceiver in this one). "
          + "A mailbox has one receiver at a time: close the other receiver, or let its process end.")
    }
    return try receiver(holding: held)
  }

  /// Becomes the mailbox's one receiver, waiting at most `timeout` (`nil`: as long as it takes;
  /// `.zero`: not at all, as ``receiver()``) for the receiver that has it to end: a standby
  /// receiver, which takes over the moment the active one is closed or its process dies. The
  /// wait sleeps in the kernel and does not block a thread of the cooperative pool.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/alreadyClaimed`` when another receiver has the
  ///   mailbox and `timeout` is zero; ``/Liaison/LiaisonError/Code/timedOut`` when it still has
  ///   it after `timeout`; ``/Liaison/LiaisonError/Code/cancelled`` when the task is cancelled.
  public func receiver(timeout: Duration?) async throws(LiaisonError) -> MailboxReceiver {
    if timeout == .zero { return try receiver() }
    return try receiver(holding: try await receiveLock().lock(.exclusive, timeout: timeout))
  }

  /// The lock that the mailbox's receiver holds.
  private func receiveLock() throws(LiaisonError) -> ProcessLock {
    ProcessLock(name: name, folder: try container.privateFolder(.mailboxReceivers), container: container)
  }

  /// The receiver that `held`, the receive lock, makes.
  private func receiver(holding held: LockGuard) throws(LiaisonError) -> MailboxReceiver {
    // Only when no other process writes the store: becoming the receiver never waits.
    let now = container.clock.wallSeconds
    do {
      try store.write(timeout: .zero) { db in try Self.forgetOldAcknowledgedIDs(db, now: now) }
    } catch let error where error.code == .timedOut {}
    return try MailboxReceiver(mailbox: self, held: held)
  }

  /// Forgets the ids acknowledged longer ago than ``/Liaison/MailboxReceipt/acknowledgedIDRetention``,
  /// in every mailbox.
  static func forgetOldAcknowledgedIDs(_ db: Database, now: Double) throws {
    let oldest = now - Double(MailboxReceipt.acknowledgedIDRetention.components.seconds)
    try db.execute(sql: "DELETE FROM mailbox_acknowledged WHERE acknowledged_at < ?", arguments: [oldest])
  }
}

extension MailboxReceiver {
  /// The statement that remembers an acknowledged (or removed) message's given id for
  /// ``/Liaison/MailboxReceipt/acknowledgedIDRetention``, so that a retried send of it stores nothing: arguments
  /// mailbox, id, time.
  static func rememberAcknowledged(_ db: Database) throws -> Statement {
    try db.cachedStatement(
      sql: "INSERT OR REPLACE INTO mailbox_acknowledged (mailbox, id, acknowledged_at) VALUES (?, ?, ?)")
  }
}

/// The folder's part of the receive path: reads from the store, quarantines in it, and waits for
/// the mailbox's signal.
extension MailboxReceiver: MailboxReceiveStorage {
  package func checkReceiving() throws(LiaisonError) { try checkHeld() }

  package func read(after position: Int64, limit: Int) async throws(LiaisonError) -> [MessageRow]? {
    try readNow(after: position, limit: limit)
  }

  package func quarantine(_ messages: [QuarantinedMessage]) async throws(LiaisonError) {
    try await setAside(messages)
  }

  /// The signal remembers a send between a look and the wait: no mark is needed.
  package var wakeUpMark: UInt64 { 0 }

  package func waitForSend(after mark: UInt64, until deadline: LiaisonClock.Instant?) async
    -> SignalWaiter.Outcome
  {
    await wakeUps.wait(until: deadline)
  }
}
