#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  /// The one receiver of a ``PostgresMailbox``, across every host: receives its messages in order
  /// and acknowledges them.
  ///
  /// It holds the mailbox's receive claim, a lock on a connection of its own, and runs every
  /// statement on that connection: a receiver whose claim was lost (its connection closed, or
  /// stopped answering within the detection bound) can neither read nor acknowledge, and every
  /// call then throws the loss (``/Liaison/LiaisonError/Code/lost``). Messages it delivered and did not
  /// acknowledge go to the next receiver, as after ``close()``.
  ///
  /// It waits for messages without polling: the server notifies the container's listening
  /// connection at each send's commit, and after a reconnect of that connection the receiver
  /// looks again, so a send made meanwhile is not missed. Each message is delivered once to a
  /// receiver, even when several tasks receive from it at the same time.
  public final class PostgresMailboxReceiver: Sendable {
    /// The mailbox this receiver receives from.
    public let mailbox: PostgresMailbox
    private let held: PostgresLockGuard
    /// Rung by every notification of a send (and after a reconnect of the listener).
    private let wakeUps = WakeUps()
    private let subscription: Int
    private let reading = Locked(Reading())
    private let closed = Locked(false)
    /// When acknowledged ids were last forgotten (``PostgresMailbox/acknowledgedIDRetention``):
    /// at the receiver's start, then at most hourly.
    private let lastPruned = Locked(Date.distantPast)

    private struct Reading: Sendable {
      /// The position of the last message read from the server.
      var cursor: Int64 = 0
      /// Messages read and not yet delivered, in order.
      var readAhead: [MailboxRow] = []

      /// Takes the messages a send carried in its notification, when they are the next ones:
      /// the send's first position follows the cursor. Sends take their positions in the order
      /// they commit, and notifications arrive in that order, so no message lies between. Any
      /// other notification leaves its messages to the next read.
      mutating func take(_ carried: CarriedMessages) {
        guard carried.first == cursor + 1 else { return }
        readAhead += carried.rows
        cursor = carried.last
      }
    }

    init(mailbox: PostgresMailbox, held: PostgresLockGuard) async throws {
      self.mailbox = mailbox
      self.held = held
      let wakeUps = wakeUps
      let reading = reading
      subscription = try await mailbox.container.listener.subscribe(
        kind: "m", namespace: mailbox.container.namespace, name: mailbox.name
      ) { event in
        if let carried = event.flatMap({ CarriedMessages($0.detail) }) { reading.withLock { $0.take(carried) } }
        wakeUps.ring()
      }
      // A lost claim (or a closed receiver) ends every wait at once.
      Task { [held] in
        _ = await held.waitForLoss()
        wakeUps.close()
      }
      try await pruneAcknowledgedIDs()
    }

    deinit {
      mailbox.container.listener.unsubscribe(subscription)
      wakeUps.close()
      let held = held
      Task { await held.unlock() }
    }

    /// Ends this receiver: messages it delivered and did not acknowledge go to the next receiver.
    /// Releasing the receiver does the same.
    public func close() async {
      closed.withLock { $0 = true }
      wakeUps.close()
      await held.unlock()
    }

    /// Why the receiver's claim was lost, once it was (code ``/Liaison/LiaisonError/Code/lost``);
    /// `nil` while it receives, and after ``close()``.
    public var loss: LiaisonError? { held.loss }

    /// Waits until the receiver's claim is lost and returns why; `nil` once it is closed
    /// instead, or when the task is cancelled.
    public func waitForLoss() async -> LiaisonError? { await held.waitForLoss() }

    // MARK: Receiving

    /// The messages, decoded as `Payload`, as an `AsyncSequence` that waits for new ones: the
    /// receiver's main loop. Acknowledge each with ``acknowledge(_:)-(MailboxEnvelope<Payload>)``
    /// once handled.
    ///
    /// A message that cannot be decoded as `Payload` is quarantined and skipped. The sequence
    /// throws if the server cannot be reached or the claim is lost, and when the receiver is
    /// closed; cancelling the task ends it.
    ///
    /// - Parameters:
    ///   - type: the type to decode the payloads as.
    ///   - batchSize: how many messages one read from the server fetches at most.
    public func messages<Payload: Decodable & Sendable>(
      _ type: Payload.Type = Payload.self, batchSize: Int = 64
    ) -> PostgresMailboxMessages<Payload> {
      PostgresMailboxMessages(receiver: self, batchSize: max(1, batchSize))
    }

    /// Up to `limit` messages, waiting (without polling) until there is at least one.
    ///
    /// - Throws: `CancellationError` when the task is cancelled while waiting; a
    ///   ``/Liaison/LiaisonError`` as ``receiveAvailable(_:limit:)``.
    public func receive<Payload: Decodable & Sendable>(
      _ type: Payload.Type = Payload.self, limit: Int = 64
    ) async throws -> [MailboxEnvelope<Payload>] {
      let decode = Self.decoding(Payload.self)
      return try await waitForMessages { try await self.deliver(limit: limit, readAhead: limit, decode: decode) }
    }

    /// Up to `limit` of the messages waiting now, without waiting; empty when there are none.
    /// Messages that cannot be decoded as `Payload` are quarantined on the way.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/closed`` when the receiver was closed;
    ///   ``/Liaison/LiaisonError/Code/lost`` when its claim was lost;
    ///   ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached.
    public func receiveAvailable<Payload: Decodable & Sendable>(
      _ type: Payload.Type = Payload.self, limit: Int = 64
    ) async throws -> [MailboxEnvelope<Payload>] {
      try await deliver(limit: limit, readAhead: limit, decode: Self.decoding(Payload.self))
    }

    /// The messages in their stored form, which never needs quarantine: for tools that do not
    /// know the payload type (the `liaison receive` command).
    package func receiveAvailableStored(limit: Int) async throws -> [MailboxEnvelope<MailboxPayload>] {
      try await deliver(limit: limit, readAhead: limit) { .success($0.payload) }
    }

    /// ``receiveAvailableStored(limit:)``, waiting until there is at least one message.
    package func receiveStored(limit: Int) async throws -> [MailboxEnvelope<MailboxPayload>] {
      try await waitForMessages { try await self.deliver(limit: limit, readAhead: limit) { .success($0.payload) } }
    }

    /// One message for ``PostgresMailboxMessages``, reading `batchSize` ahead.
    func next<Payload: Decodable & Sendable>(_ type: Payload.Type, batchSize: Int) async throws
      -> MailboxEnvelope<Payload>
    {
      let decode = Self.decoding(Payload.self)
      return try await waitForMessages { try await self.deliver(limit: 1, readAhead: batchSize, decode: decode) }[0]
    }

    private static func decoding<Payload: Decodable>(_ type: Payload.Type)
      -> (StoredValue) -> Result<Payload, UndecodableMessage>
    {
      let decoder = JSONDecoder()
      return { payload in
        payload.decodeMessage(as: Payload.self, using: decoder).mapError {
          UndecodableMessage(reason: "cannot be read as \(Payload.self): \($0.reason)")
        }
      }
    }

    /// Calls `look` until it finds messages, waiting for a notification in between. A send
    /// between a look and the wait is counted by ``WakeUps``: the wait returns at once.
    private func waitForMessages<Payload>(
      _ look: () async throws -> [MailboxEnvelope<Payload>]
    ) async throws -> [MailboxEnvelope<Payload>] {
      while true {
        let seen = wakeUps.count
        let envelopes = try await look()
        if !envelopes.isEmpty { return envelopes }
        guard await wakeUps.wait(after: seen) else {
          try Task.checkCancellation()
          try checkHeld()
          throw CancellationError()
        }
      }
    }

    /// Up to `limit` messages not yet delivered by this receiver, decoded by `decode`; those it
    /// cannot decode are quarantined, and the look goes on past them, so that no envelope means
    /// that no message waits. Reads `readAhead` messages from the server when it reads.
    private func deliver<Payload>(
      limit: Int, readAhead: Int, decode: (StoredValue) -> Result<Payload, UndecodableMessage>
    ) async throws -> [MailboxEnvelope<Payload>] {
      try checkHeld()
      let limit = max(1, limit)
      let name = mailbox.name
      while true {
        var taken = reading.withLock { reading -> [MailboxRow] in
          let taken = Array(reading.readAhead.prefix(limit))
          reading.readAhead.removeFirst(taken.count)
          return taken
        }
        if taken.isEmpty {
          let after = reading.withLock { $0.cursor }
          let rows = try await run(
            """
            SELECT \(unescaped: MailboxRow.columns) FROM liaison.mailbox_message
            WHERE namespace = \(mailbox.container.namespace.rawValue) AND mailbox = \(name.rawValue)
              AND position > \(after) AND quarantine_reason IS NULL
            ORDER BY position LIMIT \(max(limit, readAhead))
            """, doing: "receive from the mailbox '\(name)'"
          ).map(MailboxRow.init)
          // Another task of this receiver may have read the same rows meanwhile: what it read
          // is not read again. Positions follow the order of commits, so nothing is skipped.
          taken = reading.withLock { reading -> [MailboxRow] in
            reading.readAhead += rows.filter { $0.position > reading.cursor }
            reading.cursor = max(reading.cursor, rows.last?.position ?? 0)
            let taken = Array(reading.readAhead.prefix(limit))
            reading.readAhead.removeFirst(taken.count)
            return taken
          }
          if taken.isEmpty && rows.isEmpty { return [] }
        }
        var envelopes: [MailboxEnvelope<Payload>] = []
        var quarantine: [(position: Int64, reason: String)] = []
        for row in taken {
          guard let payload = row.payload else {
            quarantine.append((row.position, row.damage ?? "not written by Liaison"))
            continue
          }
          switch decode(payload) {
          case .success(let decoded):
            envelopes.append(
              MailboxEnvelope(
                id: row.id, sentAt: row.sentAt, sender: row.sender, payload: decoded, position: row.position,
                mailbox: name))
          case .failure(let undecodable):
            quarantine.append((row.position, undecodable.reason))
          }
        }
        if !quarantine.isEmpty {
          _ = try await run(
            """
            SELECT liaison.mailbox_quarantine(\(mailbox.container.namespace.rawValue), \(name.rawValue),
              \(quarantine.map(\.position)), \(quarantine.map(\.reason)))
            """, doing: "quarantine messages of the mailbox '\(name)'", committing: true)
        }
        if Task.isCancelled && !envelopes.isEmpty {
          // The caller will not see them: they stay this receiver's to deliver next.
          let handedBack = taken.filter { row in envelopes.contains { $0.position == row.position } }
          reading.withLock { $0.readAhead = (handedBack + $0.readAhead).sorted { $0.position < $1.position } }
          throw CancellationError()
        }
        if !envelopes.isEmpty { return envelopes }
      }
    }

    // MARK: Acknowledging

    /// Removes a handled message for good: it is never delivered again, to any receiver.
    /// Acknowledging a message already removed does nothing.
    public func acknowledge<Payload>(_ envelope: MailboxEnvelope<Payload>) async throws {
      try await acknowledge([envelope])
    }

    /// Removes handled messages for good, in one statement.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument``, acknowledging nothing, when an envelope
    ///   comes from another mailbox; ``/Liaison/LiaisonError/Code/lost`` when the receiver's claim was
    ///   lost (the messages then go to the next receiver).
    public func acknowledge<Payload>(_ envelopes: [MailboxEnvelope<Payload>]) async throws {
      try checkHeld()
      guard !envelopes.isEmpty else { return }
      try checkOwn(envelopes, doing: "acknowledged")
      _ = try await run(
        """
        SELECT count(*) FROM liaison.mailbox_remove(\(mailbox.container.namespace.rawValue),
          \(mailbox.name.rawValue), \(envelopes.map(\.position)), \(envelopes.map(\.id)), \(Date().timeIntervalSince1970))
        """, doing: "acknowledge messages of the mailbox '\(mailbox.name)'", committing: true)
      let acknowledged = Set(envelopes.map(\.position))
      reading.withLock { $0.readAhead.removeAll { acknowledged.contains($0.position) } }
      let due = lastPruned.withLock { $0.timeIntervalSinceNow < -3600 }
      if due { try await pruneAcknowledgedIDs() }
    }

    /// Hands delivered messages back unacknowledged: this receiver delivers them again, before
    /// the messages sent after them, without recreating them. A message already acknowledged is
    /// skipped.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument``, handing nothing back, when an envelope
    ///   comes from another mailbox.
    public func redeliver<Payload>(_ envelopes: [MailboxEnvelope<Payload>]) async throws {
      try checkHeld()
      guard !envelopes.isEmpty else { return }
      try checkOwn(envelopes, doing: "handed back")
      let ids = Dictionary(envelopes.map { ($0.position, $0.id) }, uniquingKeysWith: { first, _ in first })
      let rows = try await run(
        """
        SELECT \(unescaped: MailboxRow.columns) FROM liaison.mailbox_message
        WHERE namespace = \(mailbox.container.namespace.rawValue) AND mailbox = \(mailbox.name.rawValue)
          AND position = ANY (\(Array(ids.keys)))
        """, doing: "hand messages of the mailbox '\(mailbox.name)' back"
      ).map(MailboxRow.init).filter { ids[$0.position] == $0.id }
      reading.withLock { reading in
        let waiting = Set(reading.readAhead.map(\.position))
        reading.readAhead = (reading.readAhead + rows.filter { !waiting.contains($0.position) }).sorted {
          $0.position < $1.position
        }
      }
    }

    /// Hands one delivered message back unacknowledged: see
    /// ``redeliver(_:)-([MailboxEnvelope<Payload>])``.
    public func redeliver<Payload>(_ envelope: MailboxEnvelope<Payload>) async throws {
      try await redeliver([envelope])
    }

    /// Removes every quarantined message of the mailbox; their ids are remembered like those of
    /// acknowledged messages.
    ///
    /// - Returns: how many were removed.
    @discardableResult
    public func removeQuarantined() async throws -> Int {
      try checkHeld()
      let rows = try await run(
        """
        SELECT count(*) FROM liaison.mailbox_remove(\(mailbox.container.namespace.rawValue),
          \(mailbox.name.rawValue), NULL, NULL, \(Date().timeIntervalSince1970))
        """, doing: "remove the quarantined messages of the mailbox '\(mailbox.name)'", committing: true)
      return try rows.first.map { Int(try $0.decode(Int64.self)) } ?? 0
    }

    // MARK: The claim's connection

    private func checkOwn<Payload>(_ envelopes: [MailboxEnvelope<Payload>], doing verb: String) throws {
      guard let stranger = envelopes.first(where: { $0.mailbox != mailbox.name }) else { return }
      throw LiaisonError(
        .invalidArgument,
        "The envelope of message '\(stranger.id)' was delivered by mailbox '\(stranger.mailbox)', not by mailbox "
          + "'\(mailbox.name)': acknowledge (or hand back) each envelope with a receiver of its own mailbox. Nothing "
          + "was \(verb).")
    }

    private func checkHeld() throws(LiaisonError) {
      if closed.withLock({ $0 }) {
        throw LiaisonError(
          .closed, "The receiver of mailbox '\(mailbox.name)' was closed; make a new one with receiver().")
      }
      if let loss = held.loss { throw loss }
    }

    /// Runs `query` in the claim's session: only a receiver that still holds its claim reads and
    /// acknowledges. `committing` for a write, whose return promises that it was made.
    private func run(_ query: PostgresQuery, doing what: String, committing: Bool = false) async throws
      -> [PostgresRow]
    {
      try checkHeld()
      return try await held.run(query, doing: what, committing: committing)
    }

    private func pruneAcknowledgedIDs() async throws {
      let before = Date().timeIntervalSince1970 - Double(PostgresMailbox.acknowledgedIDRetention.components.seconds)
      _ = try await run(
        """
        DELETE FROM liaison.mailbox_acknowledged WHERE namespace = \(mailbox.container.namespace.rawValue)
          AND mailbox = \(mailbox.name.rawValue) AND acknowledged_at < \(before)
        """, doing: "forget old acknowledged ids of the mailbox '\(mailbox.name)'", committing: true)
      lastPruned.withLock { $0 = Date() }
    }
  }

  /// The messages of a ``PostgresMailboxReceiver``, from
  /// ``PostgresMailboxReceiver/messages(_:batchSize:)``: an `AsyncSequence` that waits for new
  /// ones and ends when the iterating task is cancelled.
  public struct PostgresMailboxMessages<Payload: Decodable & Sendable>: AsyncSequence, Sendable {
    public typealias Element = MailboxEnvelope<Payload>
    let receiver: PostgresMailboxReceiver
    let batchSize: Int

    public func makeAsyncIterator() -> AsyncIterator {
      AsyncIterator(receiver: receiver, batchSize: batchSize)
    }

    /// The iterator of ``PostgresMailboxMessages``.
    public struct AsyncIterator: AsyncIteratorProtocol {
      let receiver: PostgresMailboxReceiver
      let batchSize: Int

      /// The next message; `nil` (the end) when the task is cancelled.
      ///
      /// - Throws: the ``/Liaison/LiaisonError`` that ended the receiver, or of a server that cannot
      ///   be reached.
      public mutating func next() async throws -> MailboxEnvelope<Payload>? {
        do {
          return try await receiver.next(Payload.self, batchSize: batchSize)
        } catch is CancellationError {
          return nil
        }
      }
    }
  }
#endif
