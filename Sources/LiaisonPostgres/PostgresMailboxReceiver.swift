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
  ///
  /// A receiver dropped without ``close()`` is closed too, in the background: its claim's
  /// connection is closed, which ends its session (the container's
  /// ``PostgresContainer/close()`` waits for that); its unacknowledged messages go to the next
  /// receiver.
  public final class PostgresMailboxReceiver: Sendable, CoordinationReceiver {
    /// The mailbox this receiver receives from.
    public let mailbox: PostgresMailbox
    private let held: PostgresLockGuard
    /// Rung by every notification of a send (and after a reconnect of the listener).
    private let wakeUps = WakeUps()
    private let subscription: Int
    /// What this receiver has read and not yet delivered, and the receive path.
    private let reading: MailboxReceiving
    /// When the server that the last read reached started (`pg_postmaster_start_time()`, in
    /// seconds since 1970).
    private let serverStarted = Locked<Double?>(nil)
    /// The claim's fencing token, in every envelope (``/Liaison/MailboxEnvelope/claimToken``).
    private let claimToken: UInt64
    private let closed = Locked(false)
    /// Forgets the mailbox's acknowledged ids past ``PostgresMailbox/acknowledgedIDRetention``.
    private let forgetting: ForgettingAcknowledgedIDs

    init(mailbox: PostgresMailbox, held: PostgresLockGuard) async throws(LiaisonError) {
      self.mailbox = mailbox
      self.held = held
      claimToken = try await held.fencingToken()
      reading = MailboxReceiving(mailbox: mailbox.name, claimToken: claimToken)
      forgetting = ForgettingAcknowledgedIDs(mailbox: mailbox)
      let wakeUps = wakeUps
      let reading = reading
      subscription = try await mailbox.container.listener.subscribe(
        kind: "m", namespace: mailbox.container.namespace, name: mailbox.name
      ) { event in
        // A send's messages, when they are the next ones: sends take their positions in the order
        // they commit, and notifications arrive in that order, so no message lies between.
        if let carried = event.flatMap({ CarriedMessages($0.detail) }) {
          reading.addCarried(first: carried.first, last: carried.last, carried.rows)
        }
        wakeUps.ring()
      }
      // A lost claim (or a closed receiver) ends every wait at once.
      held.whenEnded { wakeUps.close() }
      forgetting.startIfDue()
    }

    /// The safety net of a receiver dropped without ``close()``: dropping `held` closes the
    /// claim's connection (see ``PostgresLockGuard``).
    deinit {
      mailbox.container.listener.unsubscribe(subscription)
      wakeUps.close()
      forgetting.stop()
    }

    /// Ends this receiver: messages it delivered and did not acknowledge go to the next receiver.
    /// Releasing the receiver does the same.
    public func close() async {
      closed.withLock { $0 = true }
      wakeUps.close()
      forgetting.stop()
      await held.unlock()
    }

    /// Why the receiver's claim was lost, once it was (code ``/Liaison/LiaisonError/Code/lost``);
    /// `nil` while it receives, and after ``close()``.
    public var loss: LiaisonError? { held.loss }

    /// Waits until the receiver's claim is lost and returns why; `nil` once it is closed instead.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/cancelled`` when the task is cancelled first.
    public func waitForLoss() async throws(LiaisonError) -> LiaisonError? { try await held.waitForLoss() }

    // MARK: Receiving

    /// The next message, decoded as `Payload` (with the container's decoder), waiting (without
    /// polling) until there is one; `nil` when the task is cancelled: what
    /// ``/Liaison/CoordinationReceiver/messages(_:batchSize:)``, the receiver's main loop, calls.
    /// Reads up to `batchSize` messages from the server at once; those read ahead stay with the
    /// receiver, whichever call asks next, and so does a message taken when the task is
    /// cancelled: the loop ends without it, and the next call delivers it. A message that cannot
    /// be decoded is quarantined and skipped.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/closed`` once closed; ``/Liaison/LiaisonError/Code/lost``
    ///   when its claim was lost; ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot
    ///   be reached.
    public func nextMessage<Payload: Decodable & Sendable>(
      _ type: Payload.Type = Payload.self, batchSize: Int = 64
    ) async throws(LiaisonError) -> MailboxEnvelope<Payload>? {
      let batchSize = max(1, batchSize)
      let decode = MailboxReceiving.decoding(Payload.self, using: mailbox.container.makeDecoder())
      do throws(LiaisonError) {
        return try await reading.receive(limit: 1, readAhead: batchSize, decode: decode, from: self)[0]
      } catch let error where error.code == .cancelled {
        return nil
      }
    }

    /// Up to `limit` messages, waiting (without polling) until there is at least one, at most
    /// `timeout`. Messages that cannot be decoded as `Payload` are quarantined on the way.
    ///
    /// - Parameters:
    ///   - type: the type to decode the payloads as (with the container's decoder).
    ///   - limit: how many messages at most.
    ///   - timeout: how long to wait for a message; `nil` waits as long as it takes, `.zero`
    ///     returns those waiting now (perhaps none).
    /// - Throws: ``/Liaison/LiaisonError/Code/timedOut`` when `timeout` passes with no message;
    ///   ``/Liaison/LiaisonError/Code/cancelled`` when the task is cancelled (the messages it
    ///   would have returned are delivered next);
    ///   ``/Liaison/LiaisonError/Code/closed`` once the receiver was closed;
    ///   ``/Liaison/LiaisonError/Code/lost`` when its claim was lost;
    ///   ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached.
    public func receive<Payload: Decodable & Sendable>(
      _ type: Payload.Type = Payload.self, limit: Int = 64, timeout: Duration? = nil
    ) async throws(LiaisonError) -> [MailboxEnvelope<Payload>] {
      try await receiving(limit: limit, timeout: timeout) { [self] in
        MailboxReceiving.decoding(Payload.self, using: mailbox.container.makeDecoder())
      }
    }

    /// The messages in their stored form, which never needs quarantine, as ``receive(_:limit:timeout:)``
    /// does: for tools that do not know the payload type (the `liaison receive` command).
    package func receiveStored(limit: Int, timeout: Duration?) async throws(LiaisonError)
      -> [MailboxEnvelope<MailboxPayload>]
    {
      try await receiving(limit: limit, timeout: timeout) { { $0.storedPayload } }
    }

    /// Up to `limit` messages, decoded by what `decoder` makes, waiting at most `timeout`.
    private func receiving<Payload: Sendable>(
      limit: Int, timeout: Duration?,
      decoder: @escaping @Sendable () -> (StoredValue) -> Result<Payload, UndecodableMessage>
    ) async throws(LiaisonError) -> [MailboxEnvelope<Payload>] {
      if timeout == .zero {
        return try await reading.deliver(limit: limit, readAhead: limit, decode: decoder(), from: self)
      }
      let what = "waiting for a message of the mailbox '\(mailbox.name)'"
      return try await withTimeout(timeout, what, on: mailbox.container.connector.clock) {
        [self] () async throws(LiaisonError) in
        try await reading.receive(limit: limit, readAhead: limit, decode: decoder(), from: self)
      }
    }

    /// The messages after position `after`, at most `limit` and ``MailboxLimits/readAheadBytes``
    /// of payloads; `nil` when the read reached another server than the last one (a restart, or a
    /// failover to a standby), which only a lease can: a session's claim ends with its server. The
    /// receive path then reads again from the first message: a failover to a standby that had not
    /// yet received the last sends' commits loses them, and the next sends take their positions
    /// again, which a cursor kept would skip. Messages read ahead go too (read again if they still
    /// exist): those delivered and not acknowledged are delivered again, as to a next receiver.
    package func read(after: Int64, limit: Int) async throws(LiaisonError) -> [ReceivedMessage]? {
      let name = mailbox.name
      var binds = PostgresBindings()
      binds.append(mailbox.container.namespace.rawValue)
      binds.append(name.rawValue)
      // The position and sizes are numbers of this process's own, written in the statement.
      let messages = """
        SELECT \(MailboxRow.columns) FROM (
          SELECT \(MailboxRow.columns),
            sum(octet_length(payload)) OVER (ORDER BY position) - octet_length(payload) AS bytes_before
          FROM liaison.mailbox_message
          WHERE namespace = $1 AND mailbox = $2 AND position > \(after) AND quarantine_reason IS NULL
          ORDER BY position LIMIT \(limit)) AS ahead
        WHERE bytes_before < \(MailboxLimits.readAheadBytes)
        """
      let doing = "receive from the mailbox '\(name)'"
      guard mailbox.container.connector.holdsAreLeases else {
        return try await run(PostgresQuery(unsafeSQL: messages + " ORDER BY position", binds: binds), doing: doing)
          .map { row throws(LiaisonError) in try MailboxRow(row, mailbox: name) }
      }
      // One row at least, which names the server (a row of nulls when no message waits).
      let read = try await run(
        PostgresQuery(
          unsafeSQL: "SELECT extract(epoch FROM pg_postmaster_start_time())::float8, ahead.* FROM (SELECT) AS server "
            + "LEFT JOIN LATERAL (\(messages)) AS ahead ON true ORDER BY ahead.position", binds: binds),
        doing: doing)
      guard let first = read.first else { return [] }
      let started = try decodeRow(name) { try first.makeRandomAccess()[0].decode(Double.self, context: .default) }
      let sameServer = serverStarted.withLock { serverStarted in
        defer { serverStarted = started }
        return serverStarted == nil || serverStarted == started
      }
      guard sameServer else { return nil }
      var rows: [MailboxRow] = []
      for row in read {
        if let message = try MailboxRow(afterServerStart: row, mailbox: name) { rows.append(message) }
      }
      return rows
    }

    // MARK: Acknowledging

    /// Removes a handled message for good: it is never delivered again, to any receiver.
    /// Acknowledging a message already removed does nothing.
    public func acknowledge<Payload>(_ envelope: MailboxEnvelope<Payload>, timeout: Duration? = nil)
      async throws(LiaisonError)
    {
      try await acknowledge([envelope], timeout: timeout)
    }

    /// Removes handled messages for good, in one statement.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument``, acknowledging nothing, when an envelope
    ///   comes from another mailbox; ``/Liaison/LiaisonError/Code/lost`` when the receiver's claim was
    ///   lost (the messages then go to the next receiver); ``/Liaison/LiaisonError/Code/timedOut``
    ///   when `timeout` passes while other processes' writes hold the mailbox (nothing is
    ///   acknowledged; the receiver goes on).
    public func acknowledge<Payload>(_ envelopes: [MailboxEnvelope<Payload>], timeout: Duration? = nil)
      async throws(LiaisonError)
    {
      try checkHeld()
      guard !envelopes.isEmpty else { return }
      try reading.checkOwn(envelopes, doing: "acknowledged")
      let now = mailbox.container.connector.clock.wallSeconds
      _ = try await run(
        """
        SELECT count(*) FROM liaison.mailbox_remove(\(mailbox.container.namespace.rawValue),
          \(mailbox.name.rawValue), \(envelopes.map(\.position)), \(envelopes.map(\.id)), \(now))
        """, doing: "acknowledge messages of the mailbox '\(mailbox.name)'", committing: true, timeout: timeout)
      reading.acknowledged(envelopes)
      forgetting.startIfDue()
    }

    /// Hands delivered messages back unacknowledged: this receiver delivers them again, before
    /// the messages sent after them, without recreating them. A message already acknowledged is
    /// skipped.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument``, handing nothing back, when an envelope
    ///   comes from another mailbox.
    public func redeliver<Payload>(_ envelopes: [MailboxEnvelope<Payload>]) async throws(LiaisonError) {
      try checkHeld()
      guard !envelopes.isEmpty else { return }
      try reading.checkOwn(envelopes, doing: "handed back")
      let ids = Dictionary(envelopes.map { ($0.position, $0.id) }, uniquingKeysWith: { first, _ in first })
      let rows = try await run(
        """
        SELECT \(unescaped: MailboxRow.columns) FROM liaison.mailbox_message
        WHERE namespace = \(mailbox.container.namespace.rawValue) AND mailbox = \(mailbox.name.rawValue)
          AND position = ANY (\(Array(ids.keys)))
        """, doing: "hand messages of the mailbox '\(mailbox.name)' back"
      ).map { row throws(LiaisonError) in try MailboxRow(row, mailbox: mailbox.name) }.filter {
        ids[$0.position] == $0.id
      }
      reading.handBack(rows)
    }

    /// Hands one delivered message back unacknowledged: see
    /// ``redeliver(_:)-([MailboxEnvelope<Payload>])``.
    public func redeliver<Payload>(_ envelope: MailboxEnvelope<Payload>) async throws(LiaisonError) {
      try await redeliver([envelope])
    }

    /// Removes every quarantined message of the mailbox; their ids are remembered like those of
    /// acknowledged messages.
    ///
    /// - Parameter timeout: how long to wait for other processes' writes of the mailbox at most.
    /// - Returns: how many were removed.
    @discardableResult
    public func removeQuarantined(timeout: Duration? = nil) async throws(LiaisonError) -> Int {
      try checkHeld()
      let now = mailbox.container.connector.clock.wallSeconds
      let rows = try await run(
        """
        SELECT count(*) FROM liaison.mailbox_remove(\(mailbox.container.namespace.rawValue),
          \(mailbox.name.rawValue), NULL, NULL, \(now))
        """, doing: "remove the quarantined messages of the mailbox '\(mailbox.name)'", committing: true,
        timeout: timeout)
      guard let row = rows.first else { return 0 }
      return Int(try decodeRow(mailbox.name) { try row.decode(Int64.self) })
    }

    // MARK: The claim's connection

    private func checkHeld() throws(LiaisonError) {
      if closed.withLock({ $0 }) {
        throw LiaisonError(
          .closed, "The receiver of mailbox '\(mailbox.name)' was closed; make a new one with receiver().")
      }
      if let loss = held.loss { throw loss }
    }

    /// Runs `query` in the claim's session: only a receiver that still holds its claim reads and
    /// acknowledges. `committing` for a write, whose return promises that it was made.
    private func run(
      _ query: PostgresQuery, doing what: String, committing: Bool = false, timeout: Duration? = nil
    ) async throws(LiaisonError) -> [PostgresRow] {
      try checkHeld()
      return try await held.run(query, doing: what, committing: committing, timeout: timeout)
    }
  }

  /// The server's part of the receive path: reads and quarantines on the claim's connection, and
  /// waits for the notifications of sends.
  extension PostgresMailboxReceiver: MailboxReceiveStorage {
    package func checkReceiving() throws(LiaisonError) { try checkHeld() }

    package func quarantine(_ messages: [QuarantinedMessage]) async throws(LiaisonError) {
      _ = try await run(
        """
        SELECT liaison.mailbox_quarantine(\(mailbox.container.namespace.rawValue), \(mailbox.name.rawValue),
          \(messages.map(\.position)), \(messages.map(\.reason)))
        """, doing: "quarantine messages of the mailbox '\(mailbox.name)'", committing: true)
    }

    package var wakeUpMark: UInt64 { wakeUps.count }

    /// Waits for a notification after `mark`; `deadline` is left to the caller's timeout.
    package func waitForSend(after mark: UInt64, until deadline: LiaisonClock.Instant?) async
      -> SignalWaiter.Outcome
    {
      await wakeUps.wait(after: mark) ? .posted : .ended
    }
  }

  /// Forgets a mailbox's acknowledged ids once they are older than
  /// ``PostgresMailbox/acknowledgedIDRetention``: in the container's background work, on idle
  /// connections, in batches of ``batch`` that the index of ids by age finds without reading the
  /// others (in the index's order: a bitmap scan read all of them at every batch); at a
  /// receiver's start, then at most hourly while it acknowledges, until the receiver closes.
  /// Housekeeping, off the claim's path: a receiver starts, and an acknowledgement returns,
  /// whatever it does (with millions of old ids, a single `DELETE` outlasted the reply bound at
  /// every start, and the receiver could never start). It never waits: ids that another
  /// transaction holds are skipped until the next time, and a batch has no reply bound (a loaded
  /// server is slow, not gone; a dead one is noticed by the connection's keepalives). A failed
  /// batch is logged and tried again a minute later.
  final class ForgettingAcknowledgedIDs: Sendable {
    /// How many ids one statement forgets at most: about 10 ms of the server's.
    static let batch = 10_000
    private let mailbox: PostgresMailbox
    private let state = Locked(State())

    private struct State: Sendable {
      /// When forgetting is due next (`nil`: now).
      var due: LiaisonClock.Instant?
      /// The forgetting running now.
      var running: Task<Void, Never>?
      var stopped = false
    }

    init(mailbox: PostgresMailbox) { self.mailbox = mailbox }

    /// Starts forgetting in the background, unless it runs, is not yet due, or was stopped.
    func startIfDue() {
      let clock = mailbox.container.connector.clock
      state.withLock { state in
        guard !state.stopped, state.running == nil, state.due.map({ $0 <= clock.now }) ?? true else { return }
        state.running = mailbox.container.connector.background.start { [self] in
          await forgetAll()
          self.state.withLock { state in
            state.running = nil
            state.due = clock.now + .seconds(3600)
          }
        }
      }
    }

    /// Ends the forgetting that runs, if any, and starts no other: the receiver is closed.
    func stop() {
      state.withLock { state in
        state.stopped = true
        state.running?.cancel()
      }
    }

    /// Forgets batch after batch until one forgets fewer than ``batch``, or the task is cancelled.
    private func forgetAll() async {
      let connector = mailbox.container.connector
      let before = connector.clock.wallSeconds - Double(PostgresMailbox.acknowledgedIDRetention.components.seconds)
      while !Task.isCancelled {
        do {
          let rows = try await connector.write(
            """
            WITH forgotten AS (
              DELETE FROM liaison.mailbox_acknowledged WHERE ctid = ANY (ARRAY(
                SELECT ctid FROM liaison.mailbox_acknowledged
                WHERE namespace = \(mailbox.container.namespace.rawValue) AND mailbox = \(mailbox.name.rawValue)
                  AND acknowledged_at < \(before)
                ORDER BY acknowledged_at LIMIT \(Self.batch) FOR UPDATE SKIP LOCKED))
              RETURNING 1)
            SELECT count(*) FROM forgotten
            """, doing: "forget old acknowledged ids of the mailbox '\(mailbox.name)'", timeout: nil)
          guard let count = try rows.first?.decode(Int64.self), count >= Self.batch else { return }
        } catch {
          connector.logger.warning("\(error)")
          try? await connector.clock.sleep(for: .seconds(60))
        }
      }
    }
  }

#endif
