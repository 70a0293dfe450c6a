#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  /// A durable, named queue of messages to one receiver on any host, which need not be running:
  /// the analogue of `Mailbox` (in `LiaisonStore`) for a fleet, with the same promises.
  ///
  /// ```swift
  /// let inbox = try await place.mailbox("invoices")
  /// try await inbox.send(Invoice(number: 7), id: "invoice-7")   // stored once, even if retried
  ///
  /// // On the receiving host, the one receiver:
  /// let receiver = try await inbox.receiver()
  /// for try await envelope in receiver.messages(Invoice.self) {
  ///   try await handle(envelope.payload)
  ///   try await receiver.acknowledge(envelope)
  /// }
  /// ```
  ///
  /// **Delivery.** In the order the sends committed (FIFO), to one receiver at a time, **at least
  /// once**: a message is removed only when the receiver acknowledges it. A receiver that dies
  /// before acknowledging leaves its messages to the next receiver, which can start at once when
  /// the process died, and within the container's detection bound when its host died or its
  /// network was cut (the server ends the dead receiver's session then).
  ///
  /// **Sending** is one statement: the messages are stored and the receiver notified in one
  /// commit; nobody polls. Once `send` returns, the message survives a crash of the server (it is
  /// committed and on the server's disk, even where `synchronous_commit` is `off`). A send may carry its own `id`: a second send with an id that waits, or was
  /// acknowledged within the last ``acknowledgedIDRetention``, stores nothing, and its receipt
  /// says so (``/Liaison/MailboxReceipt/isStored``).
  ///
  /// **Timeouts.** A write's `timeout` bounds its wait for other processes' writes of the same
  /// mailbox (`nil`: as long as they take); when it passes, the write throws
  /// ``/Liaison/LiaisonError/Code/timedOut`` and nothing is written.
  ///
  /// **Payloads** are any `Codable` value, stored as JSON, or `Data`, stored as its bytes. A
  /// payload the receiver cannot decode as the type it asks for is quarantined, as locally.
  ///
  /// **One receiver, or several consumers?** One receiver at a time is the rule, as locally: it
  /// gives FIFO order and lets a receiver read ahead with no lock per message. Work that many
  /// workers should share is better sent to several mailboxes (one per worker or per shard):
  /// `SELECT … FOR UPDATE SKIP LOCKED` would give up the order, and costs a write per message
  /// taken.
  public final class PostgresMailbox: Sendable, CoordinationMailbox {
    /// The mailbox's name.
    public let name: LiaisonName
    /// The name this handle's messages are sent under (the envelope's `sender`).
    public let sender: String
    let container: PostgresContainer

    /// The sizes a mailbox may reach (see ``/Liaison/MailboxLimits``).
    public typealias Limits = MailboxLimits

    /// How long the id of an acknowledged message is remembered, so that a send retried with the
    /// same id is still recognised: 7 days, as locally.
    public static let acknowledgedIDRetention = OutgoingMessage.acknowledgedIDRetention

    init(container: PostgresContainer, name: LiaisonName, sender: String) throws(LiaisonError) {
      try MailboxEnvelope<MailboxPayload>.checkSender(sender, mailbox: name)
      self.container = container
      self.name = name
      self.sender = sender
    }

    // MARK: Sending

    /// Stores `payload` at the end of the mailbox and notifies the receiver: one statement, one
    /// commit. Never waits for the receiver.
    ///
    /// - Parameters:
    ///   - payload: a `Codable` value (stored as JSON, with the container's encoder) or `Data`
    ///     (stored as its bytes).
    ///   - id: the message's id, 1 to 256 bytes; when a message with this id waits or was
    ///     acknowledged recently (``acknowledgedIDRetention``), nothing is stored. `nil` makes a
    ///     new unique id.
    ///   - timeout: how long to wait for other processes' writes of the mailbox at most; `nil`
    ///     waits as long as they take.
    /// - Returns: the message's id, and whether this send stored it.
    /// - Throws: ``/Liaison/LiaisonError/Code/tooLarge`` when the payload or the mailbox would exceed
    ///   the mailbox's ``limits()``; ``/Liaison/LiaisonError/Code/invalidArgument`` for an empty or too
    ///   long id, or a value that cannot be encoded; ``/Liaison/LiaisonError/Code/timedOut`` when
    ///   `timeout` passes (nothing is stored); ``/Liaison/LiaisonError/Code/unavailable`` when
    ///   the server cannot be reached (the message may then have been stored or not: send it
    ///   again with the same `id` to be sure it is stored once).
    @discardableResult
    public func send<Payload: Encodable>(_ payload: Payload, id: String? = nil, timeout: Duration? = nil)
      async throws(LiaisonError) -> MailboxReceipt
    {
      let message = try OutgoingMessage(payload, id: id, mailbox: name, encoder: container.makeEncoder())
      return try await store([message], timeout: timeout)[0]
    }

    /// Stores every payload, in order, in one statement (all or none), and notifies the receiver
    /// once: the fast way to send many messages. Each gets a new unique id.
    ///
    /// - Returns: the messages' receipts, in order.
    /// - Throws: as ``send(_:id:timeout:)``; nothing is stored then.
    @discardableResult
    public func sendAll<Payload: Encodable>(_ payloads: some Sequence<Payload>, timeout: Duration? = nil)
      async throws(LiaisonError) -> [MailboxReceipt]
    {
      let encoder = container.makeEncoder()
      var messages: [OutgoingMessage] = []
      for payload in payloads {
        messages.append(try OutgoingMessage(payload, id: nil, mailbox: name, encoder: encoder))
      }
      guard !messages.isEmpty else { return [] }
      return try await store(messages, timeout: timeout)
    }

    /// Sends JSON text as it is, for tools that do not know the payload's type (the `liaison send`
    /// command). Any JSON value is accepted, including a bare string or number.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when `json` is not valid JSON; as
    ///   ``send(_:id:timeout:)`` otherwise.
    @discardableResult
    public func sendJSON(_ json: Data, id: String? = nil, timeout: Duration? = nil) async throws(LiaisonError)
      -> MailboxReceipt
    {
      let value = try StoredValue(json: json, what: "The message for mailbox '\(name)'")
      return try await store([OutgoingMessage(value, id: id, mailbox: name)], timeout: timeout)[0]
    }

    /// Stores `messages` in one statement; a message whose given id waits or was acknowledged
    /// within the retention is not stored again. Ids made here are new: those messages are
    /// always stored, so only a send of one message can store fewer than it was given.
    private func store(_ messages: [OutgoingMessage], timeout: Duration?) async throws(LiaisonError)
      -> [MailboxReceipt]
    {
      let retention = Double(Self.acknowledgedIDRetention.components.seconds)
      let ids = messages.map(\.id)
      let rows: [PostgresRow]
      do {
        rows = try await container.connector.write(
          """
          SELECT liaison.mailbox_send(\(container.namespace.rawValue), \(name.rawValue), \(sender),
            \(container.connector.clock.wallSeconds), \(retention), \(ids), \(messages.map(\.givenID)),
            \(messages.map { Int16($0.value.kind.rawValue) }), \(messages.map { ByteBuffer(bytes: $0.value.bytes) }))
          """, doing: "send to the mailbox '\(name)'", timeout: timeout)
      } catch  where PostgresErrors.sqlState(error.cause) == MailboxSchema.overLimit {
        throw LiaisonError(
          .tooLarge,
          "\(PostgresErrors.serverMessage(error.cause) ?? "The mailbox '\(name)' is full.") Nothing was sent: the "
            + "receiver must acknowledge messages (or remove quarantined ones) first, or the limits be raised "
            + "(setLimits).")
      }
      let added = (try? rows.first?.decode(Int32.self)).map { Int($0) } ?? messages.count
      // Only given ids can be refused, and a send with several messages gives none.
      let stored = messages.count == 1 ? added > 0 : true
      return ids.map { MailboxReceipt(id: $0, isStored: stored) }
    }

    // MARK: Limits

    /// The mailbox's limits: the ones last set by ``setLimits(_:timeout:)`` from any host, or the
    /// defaults.
    public func limits() async throws(LiaisonError) -> Limits {
      let rows = try await container.query(
        """
        SELECT maximum_message_size, maximum_messages, maximum_bytes FROM liaison.mailbox
        WHERE namespace = \(container.namespace.rawValue) AND name = \(name.rawValue)
        """, doing: "read the limits of the mailbox '\(name)'")
      guard let row = rows.first else { return Limits() }
      let (size, messages, bytes) = try decodeRow(name) {
        try row.decode((Int64, Int64, Int64).self, context: .default)
      }
      return Limits(maximumMessageSize: Int(size), maximumMessages: Int(messages), maximumBytes: Int(bytes))
    }

    /// Sets the mailbox's limits, for every sender on every host from their next send on.
    /// Messages already waiting stay, even over the new limits.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when a limit is not positive;
    ///   ``/Liaison/LiaisonError/Code/timedOut`` when `timeout` passes (nothing is written).
    public func setLimits(_ limits: Limits, timeout: Duration? = nil) async throws(LiaisonError) {
      try limits.check(mailbox: name)
      _ = try await container.connector.write(
        """
        INSERT INTO liaison.mailbox AS b (namespace, name, maximum_message_size, maximum_messages, maximum_bytes)
        VALUES (\(container.namespace.rawValue), \(name.rawValue), \(limits.maximumMessageSize),
          \(limits.maximumMessages), \(limits.maximumBytes))
        ON CONFLICT (namespace, name) DO UPDATE SET maximum_message_size = excluded.maximum_message_size,
          maximum_messages = excluded.maximum_messages, maximum_bytes = excluded.maximum_bytes
        """, doing: "set the limits of the mailbox '\(name)'", timeout: timeout)
    }

    // MARK: Looking without receiving

    /// The first `limit` messages in their stored form, quarantined ones included (with their
    /// reason), without receiving them.
    public func peek(limit: Int = 100) async throws(LiaisonError) -> [MailboxEntry] {
      let rows = try await container.query(
        """
        SELECT \(unescaped: MailboxRow.columns) FROM liaison.mailbox_message
        WHERE namespace = \(container.namespace.rawValue) AND mailbox = \(name.rawValue)
        ORDER BY position LIMIT \(max(1, limit))
        """, doing: "look into the mailbox '\(name)'")
      return try rows.map { row throws(LiaisonError) in
        let message = try MailboxRow(row, mailbox: name)
        return MailboxEntry(
          id: message.id, sentAt: message.sentAt, sender: message.sender,
          payload: message.payload?.peekedPayload ?? .data(Data()),
          quarantineReason: message.quarantineReason ?? message.damage ?? message.payload?.damage)
      }
    }

    /// How many messages wait to be received and acknowledged, not counting quarantined ones.
    public func count() async throws(LiaisonError) -> Int {
      let rows = try await container.query(
        """
        SELECT m.messages - coalesce(r.removed_messages, 0) - m.quarantined - coalesce(r.quarantined, 0)
        FROM liaison.mailbox m LEFT JOIN liaison.mailbox_receipt r ON r.namespace = m.namespace AND r.name = m.name
        WHERE m.namespace = \(container.namespace.rawValue) AND m.name = \(name.rawValue)
        """, doing: "count the messages of the mailbox '\(name)'")
      guard let row = rows.first else { return 0 }
      return Int(try decodeRow(name) { try row.decode(Int64.self) })
    }

    // MARK: Quarantine

    /// Puts quarantined messages back at the end of the queue (in the order they were sent), for
    /// a receiver that can now read them; a running receiver is notified. Needs no receiver.
    ///
    /// - Parameters:
    ///   - ids: the ids of the messages to requeue; `nil` requeues every quarantined message. An
    ///     id that names no quarantined message is skipped.
    ///   - timeout: how long to wait for other processes' writes of the mailbox at most.
    /// - Returns: how many messages were requeued.
    @discardableResult
    public func requeueQuarantined(ids: [String]? = nil, timeout: Duration? = nil) async throws(LiaisonError) -> Int {
      let rows = try await container.connector.write(
        "SELECT liaison.mailbox_requeue(\(container.namespace.rawValue), \(name.rawValue), \(ids))",
        doing: "requeue the quarantined messages of the mailbox '\(name)'", timeout: timeout)
      guard let row = rows.first else { return 0 }
      return Int(try decodeRow(name) { try row.decode(Int32.self) })
    }

    // MARK: Receiving

    /// Becomes the one receiver of this mailbox, across every host, without waiting: it holds
    /// the mailbox's receive claim (a lock of its own in the namespace) until
    /// ``PostgresMailboxReceiver/close()``, or until its session ends. Or use
    /// `withReceiver(isolation:_:)`, which closes it when its body ends.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/alreadyClaimed`` when another receiver has the
    ///   mailbox; ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached.
    public func receiver() async throws(LiaisonError) -> PostgresMailboxReceiver {
      try await receiver(timeout: .zero)
    }

    /// Becomes the one receiver of this mailbox, waiting at most `timeout` for the receiver that
    /// holds the claim to end (`nil`: as long as it takes): a standby receiver, which takes over
    /// when the active one dies (after the detection bound).
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/alreadyClaimed`` when another receiver has the
    ///   mailbox and `timeout` is zero; ``/Liaison/LiaisonError/Code/timedOut`` when it still has
    ///   it after `timeout`.
    public func receiver(timeout: Duration?) async throws(LiaisonError) -> PostgresMailboxReceiver {
      let lock = PostgresLock(container: container, name: LiaisonName(reserved: "mailbox", name))
      let held: PostgresLockGuard
      if timeout == .zero {
        guard let taken = try await lock.tryLock(.exclusive) else {
          throw LiaisonError(
            .alreadyClaimed,
            "The mailbox '\(name)' already has a receiver (in another process or on another host, or this one). "
              + "Close it first, or try again once it has ended.")
        }
        held = taken
      } else {
        held = try await lock.lock(.exclusive, timeout: timeout)
      }
      do {
        return try await PostgresMailboxReceiver(mailbox: self, held: held)
      } catch {
        await held.unlock()
        throw error
      }
    }
  }

  extension PostgresContainer {
    /// The mailbox called `name`.
    ///
    /// - Parameters:
    ///   - name: the mailbox's name, which follows the naming rule (``/Liaison/LiaisonName/rule``).
    ///   - sender: the name this handle's messages carry as their sender; by default the
    ///     process's name.
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidName`` when `name` breaks the naming rule;
    ///   ``/Liaison/LiaisonError/Code/invalidArgument`` for an empty or too long `sender`;
    ///   ``/Liaison/LiaisonError/Code/closed`` once the container is closed.
    public func mailbox(
      _ name: String, sender: String = ProcessInfo.processInfo.processName
    ) async throws(LiaisonError) -> PostgresMailbox {
      let mailbox = try PostgresMailbox(container: self, name: try LiaisonName(name), sender: sender)
      try connector.checkOpen()
      return mailbox
    }

    /// Every mailbox of the namespace that holds messages, by name: how many wait, how many are
    /// quarantined, and their payload bytes.
    public func mailboxes() async throws(LiaisonError) -> [MailboxInfo] {
      let rows = try await query(
        """
        SELECT name, messages, quarantined, bytes FROM (
          SELECT m.name, m.messages - coalesce(r.removed_messages, 0) AS messages,
            m.quarantined + coalesce(r.quarantined, 0) AS quarantined, m.bytes - coalesce(r.removed_bytes, 0) AS bytes
          FROM liaison.mailbox m LEFT JOIN liaison.mailbox_receipt r ON r.namespace = m.namespace AND r.name = m.name
          WHERE m.namespace = \(namespace.rawValue)) AS held
        WHERE messages > 0 ORDER BY name
        """, doing: "list the mailboxes")
      return rows.compactMap { row in
        guard
          let (text, messages, quarantined, bytes) = try? row.decode(
            (String, Int64, Int64, Int64).self, context: .default),
          let name = try? LiaisonName(text)
        else { return nil }  // not written by Liaison
        return MailboxInfo(
          name: name, waiting: Int(messages - quarantined), quarantined: Int(quarantined), bytes: Int(bytes))
      }
    }
  }

  /// A message as read from `liaison.mailbox_message`, not trusted: a row another program wrote
  /// (an unknown kind) is quarantined with the reason, never a crash.
  typealias MailboxRow = ReceivedMessage

  extension MailboxRow {
    static let columns = "position, id, sent_at, sender, kind, payload, quarantine_reason"

    init(_ row: PostgresRow, mailbox: LiaisonName) throws(LiaisonError) {
      let (position, id, sentAt, sender, kind, payload, reason) = try decodeRow(mailbox) {
        try row.decode((Int64, String, Double, String, Int16, Data, String?).self, context: .default)
      }
      self.init(
        position: position, id: id, sentAt: sentAt, sender: sender, kind: kind, payload: payload,
        quarantineReason: reason)
    }

    /// The message of a receiver's read (its columns after the server's start time), or `nil`
    /// for the read's row of nulls when no message waits.
    init?(afterServerStart row: PostgresRow, mailbox: LiaisonName) throws(LiaisonError) {
      let (_, position, id, sentAt, sender, kind, payload, reason) = try decodeRow(mailbox) {
        try row.decode((Double, Int64?, String?, Double?, String?, Int16?, Data?, String?).self, context: .default)
      }
      guard let position, let id, let sentAt, let sender, let kind, let payload else { return nil }
      self.init(
        position: position, id: id, sentAt: sentAt, sender: sender, kind: kind, payload: payload,
        quarantineReason: reason)
    }

    init(
      position: Int64, id: String, sentAt: Double, sender: String, kind: Int16, payload: Data,
      quarantineReason: String? = nil
    ) {
      let stored = StoredValue.Kind(rawValue: Int(kind)).map { StoredValue(kind: $0, bytes: payload) }
      self.init(
        position: position, id: id, sender: sender, sentAt: Date(timeIntervalSince1970: sentAt), payload: stored,
        quarantineReason: quarantineReason,
        damage: stored == nil ? "not written by Liaison (an unknown kind of payload)" : nil)
    }
  }

  /// The messages a small send carries in its notification (`liaison.mailbox_send`), after the
  /// mailbox's name: `{"first": …, "count": …, "sentAt": …, "sender": …, "messages": [{"position":
  /// …, "id": …, "kind": …, "payload": BASE64}, …]}`. The send took the positions `first` to
  /// `first + count - 1`, in one commit; `messages` are the rows it stored there (a given id
  /// that waits, or was acknowledged within the retention, took a position and stored nothing).
  struct CarriedMessages: Decodable, Sendable {
    struct Message: Decodable, Sendable {
      let position: Int64
      let id: String
      let kind: Int16
      let payload: Data
    }

    let first: Int64
    let count: Int64
    let sentAt: Double
    let sender: String
    let messages: [Message]

    /// The messages of a notification's detail; `nil` when it carries none, or none readable
    /// (the receiver then reads them from the table, as after a plain notification).
    init?(_ detail: Substring) {
      guard detail.first == "{", let carried = try? JSONDecoder().decode(Self.self, from: Data(detail.utf8))
      else { return nil }
      self = carried
    }

    /// The last position the send took.
    var last: Int64 { first + count - 1 }

    var rows: [MailboxRow] {
      messages.map {
        MailboxRow(
          position: $0.position, id: $0.id, sentAt: sentAt, sender: sender, kind: $0.kind, payload: $0.payload)
      }
    }
  }
#endif
