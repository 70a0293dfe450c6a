#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A stored message as a receiver reads it, on either backend, not trusted: a row that another
/// program wrote comes back with ``damage`` saying what is wrong, so that the receiver
/// quarantines it instead of the whole mailbox failing. `MessageRow` in a folder's store,
/// `MailboxRow` on PostgreSQL.
package struct ReceivedMessage: Sendable {
  /// Where the message stands in the mailbox: messages are delivered in this order.
  package let position: Int64
  /// The message's id.
  package let id: String
  /// Who sent it.
  package let sender: String
  /// When it was sent, by the sender's clock.
  package let sentAt: Date
  /// The payload; `nil` when the row cannot be read as one.
  package let payload: StoredValue?
  /// Why the message was quarantined, if it was.
  package let quarantineReason: String?
  /// What is wrong with a row that Liaison did not write: it is quarantined.
  package let damage: String?

  package init(
    position: Int64, id: String, sender: String, sentAt: Date, payload: StoredValue?, quarantineReason: String?,
    damage: String?
  ) {
    self.position = position
    self.id = id
    self.sender = sender
    self.sentAt = sentAt
    self.payload = payload
    self.quarantineReason = quarantineReason
    self.damage = damage
  }
}

/// A message to quarantine, and why.
package typealias QuarantinedMessage = (position: Int64, reason: String)

/// What differs between a folder's receiver and a PostgreSQL one: how a batch is read, how
/// messages are quarantined, how the receiver waits for a send, and whether it still holds its
/// claim. ``MailboxReceiving`` does the rest, once for both.
package protocol MailboxReceiveStorage: Sendable {
  /// Throws when the receiver can no longer receive: closed, suspended, or its claim lost.
  func checkReceiving() throws(LiaisonError)
  /// The messages after `position`, in order, at most `limit` (and a bounded number of bytes);
  /// `nil` when the read must start again from the first message (see
  /// ``MailboxReceiving/restart()``).
  func read(after position: Int64, limit: Int) async throws(LiaisonError) -> [ReceivedMessage]?
  /// Marks messages as quarantined, with their reasons.
  func quarantine(_ messages: [QuarantinedMessage]) async throws(LiaisonError)
  /// A mark to take before a look at the mailbox, for ``waitForSend(after:until:)``.
  var wakeUpMark: UInt64 { get }
  /// Waits for a send made since `mark` was taken (or since the previous wait returned), at most
  /// until `deadline` (`nil`: no deadline).
  func waitForSend(after mark: UInt64, until deadline: LiaisonClock.Instant?) async -> SignalWaiter.Outcome
}

/// The one receive path of a mailbox's receiver, on every backend: what the receiver has read and
/// not yet delivered (its read-ahead), the sorting of what it reads into messages to deliver and
/// messages to quarantine, the hand-back of messages a cancelled task will not see, the wait for
/// sends in between, and what acknowledging and handing back do to the read-ahead. The backend's
/// part is a ``MailboxReceiveStorage``.
///
/// Each message is delivered once by a receiver, even when several tasks receive from it at the
/// same time: a task takes messages from the read-ahead under its lock, and a read that another
/// task's read overtook adds only what lies after the cursor.
package final class MailboxReceiving: Sendable {
  /// The mailbox, in every envelope.
  package let mailbox: LiaisonName
  /// The claim's fencing token, in every envelope.
  package let claimToken: UInt64
  private let state = Locked(ReadAhead())

  private struct ReadAhead: Sendable {
    /// The position of the last message read.
    var cursor: Int64 = 0
    /// Messages read and not yet delivered, in order; the next delivery starts with them,
    /// whichever task or call asks.
    var messages: ArraySlice<ReceivedMessage> = []

    init() {}
  }

  package init(mailbox: LiaisonName, claimToken: UInt64) {
    self.mailbox = mailbox
    self.claimToken = claimToken
  }

  /// What one look at the read-ahead found: messages to deliver, and messages to quarantine.
  package struct Delivery<Payload: Sendable> {
    package var envelopes: [MailboxEnvelope<Payload>] = []
    package var quarantine: [QuarantinedMessage] = []
    /// What the look took from the read-ahead: what it hands back when the task will not see
    /// the envelopes.
    var taken: ArraySlice<ReceivedMessage> = []

    init() {}
  }

  // MARK: The read-ahead

  /// The position of the last message read: where the next read starts.
  package var cursor: Int64 { state.withLock { $0.cursor } }

  /// Takes up to `limit` messages from the read-ahead, and sorts them into envelopes (decoded by
  /// `decode`) and messages to quarantine; `nil` when the read-ahead is empty (read first).
  package func take<Payload>(
    limit: Int, decode: (StoredValue) -> Result<Payload, UndecodableMessage>
  ) -> Delivery<Payload>? {
    let taken = state.withLock { state -> ArraySlice<ReceivedMessage>? in
      guard !state.messages.isEmpty else { return nil }
      let taken = state.messages.prefix(limit)
      state.messages.removeFirst(taken.count)
      return taken
    }
    guard let taken else { return nil }
    var delivery = Delivery<Payload>()
    delivery.taken = taken
    for message in taken {
      guard let payload = message.payload, message.damage == nil else {
        delivery.quarantine.append((message.position, message.damage ?? "not written by Liaison"))
        continue
      }
      switch decode(payload) {
      case .success(let payload):
        delivery.envelopes.append(
          MailboxEnvelope(
            id: message.id, sentAt: message.sentAt, sender: message.sender, payload: payload, claimToken: claimToken,
            position: message.position, mailbox: mailbox))
      case .failure(let undecodable):
        delivery.quarantine.append((message.position, undecodable.reason))
      }
    }
    return delivery
  }

  /// Adds what a read found after the cursor: another task of this receiver may have read the
  /// same messages meanwhile, and what it added is not added again (positions follow the order of
  /// commits, so nothing is skipped). `false` when the read found nothing.
  package func add(_ read: [ReceivedMessage]) -> Bool {
    guard let last = read.last else { return false }
    state.withLock { state in
      if state.messages.isEmpty && read[0].position > state.cursor {
        state.messages = read[...]
      } else {
        let cursor = state.cursor
        state.messages += read.filter { $0.position > cursor }
      }
      state.cursor = max(state.cursor, last.position)
    }
    return true
  }

  /// Adds the messages a send carried, when they are the next ones: the send's first position
  /// follows the cursor. Any other send's messages are left to the next read.
  package func addCarried(first: Int64, last: Int64, _ messages: [ReceivedMessage]) {
    state.withLock { state in
      guard first == state.cursor + 1 else { return }
      state.messages += messages
      state.cursor = last
    }
  }

  /// Forgets the cursor and the read-ahead: the next read starts from the first message, and
  /// the messages delivered and not acknowledged are delivered again, as to a next receiver.
  package func restart() {
    state.withLock { $0 = ReadAhead() }
  }

  /// Puts messages back into the read-ahead, in order, unless they wait there already: they are
  /// delivered next.
  package func handBack(_ messages: some Sequence<ReceivedMessage>) {
    state.withLock { state in
      let waiting = Set(state.messages.lazy.map { $0.position })
      state.messages = ArraySlice(
        (state.messages + messages.filter { !waiting.contains($0.position) }).sorted { $0.position < $1.position })
    }
  }

  /// The positions of the messages waiting in the read-ahead.
  package var waitingPositions: Set<Int64> { state.withLock { Set($0.messages.lazy.map { $0.position }) } }

  /// Drops acknowledged messages from the read-ahead (they were handed back, and are gone now).
  package func acknowledged<Payload>(_ envelopes: [MailboxEnvelope<Payload>]) {
    state.withLock { state in
      guard !state.messages.isEmpty else { return }
      let acknowledged = Set(envelopes.lazy.map { $0.position })
      state.messages.removeAll { acknowledged.contains($0.position) }
    }
  }

  /// Refuses envelopes that another mailbox's receiver delivered.
  ///
  /// - Throws: ``LiaisonError/Code/invalidArgument``, naming what was not done (`verb`).
  package func checkOwn<Payload>(_ envelopes: [MailboxEnvelope<Payload>], doing verb: String) throws(LiaisonError) {
    guard let stranger = envelopes.first(where: { $0.mailbox != mailbox }) else { return }
    throw foreignEnvelope(id: stranger.id, from: "mailbox '\(stranger.mailbox)'", doing: verb)
  }

  /// The error for an envelope of message `id` delivered by `origin`, not by this mailbox.
  package func foreignEnvelope(id: String, from origin: String, doing verb: String) -> LiaisonError {
    LiaisonError(
      .invalidArgument,
      "The envelope of message '\(id)' was delivered by \(origin), not by mailbox '\(mailbox)' of this "
        + "container: acknowledge (or hand back) each envelope with a receiver of its own mailbox. Nothing was "
        + "\(verb).")
  }

  // MARK: Delivering

  /// How a payload becomes a `Payload` (with `decoder` for JSON), or the reason to quarantine it.
  package static func decoding<Payload: Decodable>(_ type: Payload.Type, using decoder: JSONDecoder)
    -> (StoredValue) -> Result<Payload, UndecodableMessage>
  {
    let typeName = "\(Payload.self)"
    return { payload in
      let decoded: Result<Payload, UndecodableMessage> = payload.decodeMessage(using: decoder)
      return decoded.mapError { UndecodableMessage(reason: "cannot be read as \(typeName): \($0.reason)") }
    }
  }

  /// Up to `limit` messages not yet delivered, decoded by `decode`, without waiting; those it
  /// cannot decode are quarantined, and the look goes on past them, so that no envelope means
  /// that no message waits. Reads `readAhead` messages when it reads.
  ///
  /// When the task is cancelled, the messages it took go back to the read-ahead, to be delivered
  /// next, and it throws ``LiaisonError/Code/cancelled``: the caller will not see them.
  package func deliver<Payload, Storage: MailboxReceiveStorage>(
    limit: Int, readAhead: Int, decode: (StoredValue) -> Result<Payload, UndecodableMessage>, from storage: Storage
  ) async throws(LiaisonError) -> [MailboxEnvelope<Payload>] {
    try storage.checkReceiving()
    let limit = max(1, limit)
    var quarantine: [QuarantinedMessage] = []
    while true {
      guard let delivery = take(limit: limit, decode: decode) else {
        guard let read = try await storage.read(after: cursor, limit: max(limit, readAhead)) else {
          restart()  // another server: read again from the first message
          continue
        }
        if add(read) { continue }
        if !quarantine.isEmpty { try await storage.quarantine(quarantine) }
        return []
      }
      quarantine += delivery.quarantine
      if delivery.envelopes.isEmpty { continue }
      if !quarantine.isEmpty { try await storage.quarantine(quarantine) }
      if Task.isCancelled {
        let delivered = Set(delivery.envelopes.lazy.map { $0.position })
        handBack(delivery.taken.filter { delivered.contains($0.position) })
        throw LiaisonError.cancelled("receiving from the mailbox '\(mailbox)'")
      }
      return delivery.envelopes
    }
  }

  /// ``deliver(limit:readAhead:decode:from:)`` for synchronous code, with a synchronous `read`:
  /// returns the messages to quarantine too, for the caller to write.
  package func deliverNow<Payload>(
    limit: Int, readAhead: Int, decode: (StoredValue) -> Result<Payload, UndecodableMessage>,
    read: (_ after: Int64, _ limit: Int) throws(LiaisonError) -> [ReceivedMessage]
  ) throws(LiaisonError) -> Delivery<Payload> {
    let limit = max(1, limit)
    var quarantine: [QuarantinedMessage] = []
    while true {
      guard var delivery = take(limit: limit, decode: decode) else {
        if add(try read(cursor, max(limit, readAhead))) { continue }
        var none = Delivery<Payload>()
        none.quarantine = quarantine
        return none
      }
      quarantine += delivery.quarantine
      if delivery.envelopes.isEmpty { continue }
      delivery.quarantine = quarantine
      return delivery
    }
  }

  /// Delivers until there is at least one message, waiting for a send in between; no wait blocks
  /// a thread of the cooperative pool.
  ///
  /// - Parameter deadline: when to give up with ``LiaisonError/Code/timedOut`` (after one last
  ///   look); `nil`: never.
  /// - Throws: ``LiaisonError/Code/cancelled`` when the task is cancelled; what
  ///   ``MailboxReceiveStorage/checkReceiving()`` throws once the receiver is ended.
  package func receive<Payload, Storage: MailboxReceiveStorage>(
    limit: Int, readAhead: Int, decode: (StoredValue) -> Result<Payload, UndecodableMessage>, from storage: Storage,
    until deadline: LiaisonClock.Instant? = nil
  ) async throws(LiaisonError) -> [MailboxEnvelope<Payload>] {
    let what = "waiting for a message in the mailbox '\(mailbox)'"
    var timedOut = false
    while true {
      // A send between the look and the wait returns the wait at once.
      let mark = storage.wakeUpMark
      let envelopes = try await deliver(limit: limit, readAhead: readAhead, decode: decode, from: storage)
      if !envelopes.isEmpty { return envelopes }
      if timedOut { throw LiaisonError(.timedOut, "Gave up \(what): none came in time.") }
      switch await storage.waitForSend(after: mark, until: deadline) {
      case .posted: continue
      case .timedOut: timedOut = true
      case .ended:
        if !Task.isCancelled { try storage.checkReceiving() }  // closed, or the claim lost
        throw LiaisonError.cancelled(what)
      }
    }
  }
}
