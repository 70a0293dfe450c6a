#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A place with the stored parts as well: shared defaults and mailboxes, on top of a
/// ``CoordinationPlace``'s locks, presences and signals. A folder (`SharedContainer`, with
/// `LiaisonStore`), or a PostgreSQL database (`PostgresContainer`, in `LiaisonPostgres`).
///
/// Moving from one to the other is a change of the line that opens the place:
///
/// ```swift
/// func countLaunch(in place: some CoordinationStore) async throws {
///   let defaults = try await place.defaults("app")
///   try await defaults.update(DefaultsKey<Int>("launches")) { ($0 ?? 0) + 1 }
///   _ = try await place.mailbox("uploads", sender: "app").send("launched", id: nil, timeout: nil)
/// }
///
/// let place = try SharedContainer(directory: "/var/run/app")
/// // let place = try await PostgresContainer(url: "postgres://app@db/app", namespace: "app")
/// try await countLaunch(in: place)
/// ```
public protocol CoordinationStore: CoordinationPlace {
  /// The place's defaults type: `SharedDefaults` for a folder.
  associatedtype DefaultsType: CoordinationDefaults
  /// The place's mailbox type: `Mailbox` for a folder.
  associatedtype MailboxType: CoordinationMailbox

  /// The defaults domain called `domain` (see ``LiaisonName`` for the rule names follow).
  func defaults(_ domain: String) async throws(LiaisonError) -> DefaultsType
  /// The mailbox called `name`; the messages sent through it carry `sender` (1 to 256 bytes of
  /// UTF-8, see ``MailboxEnvelope/sender``).
  func mailbox(_ name: String, sender: String) async throws(LiaisonError) -> MailboxType
}

/// A domain of shared defaults: typed values by key, atomic across processes, observable.
/// `SharedDefaults`, or `PostgresDefaults`.
///
/// `timeout` bounds the wait for other processes' writes of the same values (`nil`: as long as
/// they take); when it passes, the write is given up with ``LiaisonError/Code/timedOut`` and
/// nothing is written.
public protocol CoordinationDefaults: Sendable {
  /// The notifications of changes: `SignalNotifications` for a `SharedDefaults`.
  associatedtype Changes: AsyncSequence & Sendable where Changes.Element == SignalNotification

  /// The domain's name.
  var domain: LiaisonName { get }
  /// The value of `key`; `nil` when it has none.
  ///
  /// - Throws: ``LiaisonError/Code/typeMismatch`` when the stored value is not a `Value`.
  func get<Value>(_ key: DefaultsKey<Value>) async throws(LiaisonError) -> Value?
  /// The stored form of the key called `name`; `nil` when it has none.
  func rawValue(for name: LiaisonName) async throws(LiaisonError) -> DefaultsRawValue?
  /// The names of the keys that have values, sorted.
  func keys() async throws(LiaisonError) -> [String]
  /// Every value of the domain in its stored form, by key.
  func snapshot() async throws(LiaisonError) -> [String: DefaultsRawValue]
  /// Stores `value` for `key`, and notifies every observer of the domain.
  ///
  /// - Throws: ``LiaisonError/Code/tooLarge`` beyond 1 MiB; ``LiaisonError/Code/timedOut``.
  func set<Value>(_ value: Value, for key: DefaultsKey<Value>, timeout: Duration?) async throws(LiaisonError)
  /// Stores JSON text for the key called `name` (checked to be JSON), for tools that do not know
  /// its type.
  func setJSON(_ json: Data, for name: LiaisonName, timeout: Duration?) async throws(LiaisonError)
  /// Stores JSON text for the key called `name` if its stored value is `expected` now (`nil`: if
  /// it has none), atomically; returns whether it did.
  func setJSON(_ json: Data, for name: LiaisonName, replacing expected: DefaultsRawValue?, timeout: Duration?)
    async throws(LiaisonError) -> Bool
  /// Removes the value of `key`.
  func remove<Value>(_ key: DefaultsKey<Value>, timeout: Duration?) async throws(LiaisonError)
  /// Removes the value of the key called `name`.
  func remove(named name: LiaisonName, timeout: Duration?) async throws(LiaisonError)
  /// Removes every value of the domain.
  func removeAll(timeout: Duration?) async throws(LiaisonError)
  /// Replaces the value of `key` with `transform(old)`, atomically across processes: no other
  /// write of the domain comes between the read and the write. Returning `nil` removes the
  /// value. `transform` runs in the caller's isolation (on the main actor, for a view's code).
  ///
  /// - Returns: the new value.
  /// - Throws: what `transform` throws (nothing is written then), or a ``LiaisonError``.
  func update<Value>(
    _ key: DefaultsKey<Value>, timeout: Duration?, isolation: isolated (any Actor)?,
    _ transform: (Value?) throws -> Value?
  ) async throws -> Value?
  /// Returns the value of `key` if `isFresh` says so; otherwise refreshes it **once across all
  /// processes** with `fetch`, under the key's refresh lock, and returns the new value.
  ///
  /// - Throws: ``LiaisonError/Code/timedOut`` when `timeout` passes while another process
  ///   refreshes; what `fetch` throws (nothing is stored then, and the next caller tries again).
  func refresh<Value>(
    _ key: DefaultsKey<Value>, timeout: Duration?, isFresh: (Value) -> Bool, using fetch: () async throws -> Value
  ) async throws -> Value
  /// The domain's changes: a notification after every write, by any process, from now on.
  func changes() async throws(LiaisonError) -> Changes
}

extension CoordinationDefaults {
  /// ``CoordinationDefaults/update(_:timeout:isolation:_:)`` without a timeout, in the caller's isolation: for code
  /// written against the protocol, which sees no default values.
  ///
  /// ```swift
  /// let launches = try await defaults.update(DefaultsKey<Int>("launches")) { ($0 ?? 0) + 1 }
  /// ```
  @discardableResult
  public func update<Value>(
    _ key: DefaultsKey<Value>, isolation: isolated (any Actor)? = #isolation, _ transform: (Value?) throws -> Value?
  ) async throws -> Value? {
    try await update(key, timeout: nil, isolation: isolation, transform)
  }
}

/// A mailbox: messages that wait in the store until its one receiver acknowledges them, whether
/// or not the receiver runs when they are sent. `Mailbox`, or `PostgresMailbox`.
public protocol CoordinationMailbox: Sendable {
  /// The receiver type: `MailboxReceiver` for a `Mailbox`.
  associatedtype Receiver: CoordinationReceiver

  /// The mailbox's name.
  var name: LiaisonName { get }
  /// The sender name the messages sent through this handle carry.
  var sender: String { get }
  /// Stores a message for the receiver, encoded as JSON, and wakes the receiver.
  ///
  /// `id` (1 to 256 bytes of UTF-8; `nil`: a new unique one) makes sending idempotent: a message
  /// whose id was already sent (waiting, or acknowledged within ``MailboxReceipt/acknowledgedIDRetention``)
  /// is not stored again, and the receipt says so.
  ///
  /// - Throws: ``LiaisonError/Code/tooLarge`` beyond the mailbox's limits;
  ///   ``LiaisonError/Code/invalidArgument`` for a bad id or a payload that cannot be encoded.
  func send<Payload: Encodable>(_ payload: Payload, id: String?, timeout: Duration?) async throws(LiaisonError)
    -> MailboxReceipt
  /// Stores every payload, in order, in one transaction (all or none), each with a new id.
  func sendAll<Payload: Encodable>(_ payloads: some Sequence<Payload>, timeout: Duration?)
    async throws(LiaisonError) -> [MailboxReceipt]
  /// Stores JSON text as a message (checked to be JSON), for tools that do not know its type.
  func sendJSON(_ json: Data, id: String?, timeout: Duration?) async throws(LiaisonError) -> MailboxReceipt
  /// The mailbox's limits.
  func limits() async throws(LiaisonError) -> MailboxLimits
  /// Sets the mailbox's limits; messages already stored stay.
  func setLimits(_ limits: MailboxLimits, timeout: Duration?) async throws(LiaisonError)
  /// The first `limit` messages, quarantined ones included, oldest first, without receiving them.
  func peek(limit: Int) async throws(LiaisonError) -> [MailboxEntry]
  /// How many messages wait, quarantined ones excluded.
  func count() async throws(LiaisonError) -> Int
  /// Puts quarantined messages (those with `ids`; `nil`: all) back in the queue; returns how many.
  func requeueQuarantined(ids: [String]?, timeout: Duration?) async throws(LiaisonError) -> Int
  /// Becomes the mailbox's one receiver, without waiting. End it with
  /// ``CoordinationReceiver/close()``, or use ``withReceiver(isolation:_:)``.
  ///
  /// - Throws: ``LiaisonError/Code/alreadyClaimed`` when another receiver has the mailbox.
  func receiver() async throws(LiaisonError) -> Receiver
  /// Becomes the mailbox's one receiver, waiting at most `timeout` (`nil`: as long as it takes;
  /// `.zero`: not at all, as ``receiver()``) for the receiver that has it to end: a standby
  /// receiver, which takes over when the active one ends or dies.
  ///
  /// - Throws: ``LiaisonError/Code/alreadyClaimed`` when `timeout` is zero and another receiver
  ///   has the mailbox; ``LiaisonError/Code/timedOut`` when it still has it after `timeout`.
  func receiver(timeout: Duration?) async throws(LiaisonError) -> Receiver
}

extension CoordinationMailbox {
  /// Runs `body` as the mailbox's receiver, and closes the receiver when `body` ends (whether it
  /// returns or throws): messages it did not acknowledge go to the next receiver. `body` runs in
  /// the caller's isolation: called from the main actor, it may read and write the main actor's
  /// state.
  ///
  /// - Throws: as ``CoordinationMailbox/receiver()``; what `body` throws.
  public func withReceiver<Result>(
    isolation: isolated (any Actor)? = #isolation, _ body: (Receiver) async throws -> Result
  ) async throws -> Result {
    let receiver = try await receiver()
    do {
      let result = try await body(receiver)
      await receiver.close()
      return result
    } catch {
      await receiver.close()
      throw error
    }
  }
}

/// What a send did: the message's id, and whether it was stored now.
public struct MailboxReceipt: Sendable, Hashable {
  /// The message's id: the one given, or the new one made for it.
  public let id: String
  /// Whether the message was stored by this send: `false` when a message with its id was already
  /// sent, and waits, or was acknowledged less than ``acknowledgedIDRetention`` ago: nothing was
  /// stored then.
  public let isStored: Bool

  /// How long a mailbox remembers an acknowledged message's id, so that a repeated send of it is
  /// not stored again: 7 days.
  public static let acknowledgedIDRetention: Duration = OutgoingMessage.acknowledgedIDRetention

  /// Makes a receipt (each backend makes them; a test double may too).
  public init(id: String, isStored: Bool) {
    self.id = id
    self.isStored = isStored
  }
}

/// A mailbox's one receiver: `MailboxReceiver`, or `PostgresMailboxReceiver`.
///
/// It receives until ``close()``; a receiver dropped without `close()` is closed too (on
/// PostgreSQL in the background), and the messages it did not acknowledge go to the next one.
public protocol CoordinationReceiver: Sendable {
  /// The next message, decoded as `Payload`, waiting (without polling) until there is one; `nil`
  /// when the task is cancelled. Reads up to `batchSize` messages from the store at once and
  /// keeps the others for the next calls, which deliver them first. A message that cannot be
  /// decoded is quarantined and skipped. ``messages(_:batchSize:)`` is the loop of it.
  ///
  /// - Throws: ``LiaisonError/Code/closed`` once closed; ``LiaisonError/Code/lost`` or
  ///   ``LiaisonError/Code/suspended`` when the receiver was ended.
  func nextMessage<Payload: Decodable & Sendable>(_ type: Payload.Type, batchSize: Int)
    async throws(LiaisonError) -> MailboxEnvelope<Payload>?
  /// Up to `limit` messages, waiting (without polling) until there is at least one, at most
  /// `timeout` (`nil`: as long as it takes; `.zero`: those waiting now, perhaps none).
  ///
  /// - Throws: ``LiaisonError/Code/timedOut`` when the timeout passes with no message;
  ///   ``LiaisonError/Code/cancelled``; ``LiaisonError/Code/closed`` once closed.
  func receive<Payload: Decodable & Sendable>(_ type: Payload.Type, limit: Int, timeout: Duration?)
    async throws(LiaisonError) -> [MailboxEnvelope<Payload>]
  /// Removes acknowledged messages: they will not be delivered again.
  func acknowledge<Payload>(_ envelopes: [MailboxEnvelope<Payload>], timeout: Duration?) async throws(LiaisonError)
  /// Gives messages back, to be delivered again first.
  func redeliver<Payload>(_ envelopes: [MailboxEnvelope<Payload>]) async throws(LiaisonError)
  /// Deletes the quarantined messages; returns how many.
  func removeQuarantined(timeout: Duration?) async throws(LiaisonError) -> Int
  /// Ends the receiver: messages it delivered and did not acknowledge go to the next one.
  /// Calling it again does nothing.
  func close() async
}

extension CoordinationReceiver {
  /// The messages, decoded as `Payload`, as an `AsyncSequence` that waits for new ones: the
  /// receiver's main loop. Acknowledge each once handled.
  ///
  /// ```swift
  /// for try await envelope in receiver.messages(Upload.self) {
  ///   try await store(envelope.payload)
  ///   try await receiver.acknowledge([envelope], timeout: nil)
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - type: the type to decode the payloads as; a message that cannot be decoded as it is
  ///     quarantined and skipped.
  ///   - batchSize: how many messages one read from the store fetches at most.
  public func messages<Payload: Decodable & Sendable>(
    _ type: Payload.Type = Payload.self, batchSize: Int = 64
  ) -> MailboxMessages<Self, Payload> {
    MailboxMessages(receiver: self, batchSize: max(1, batchSize))
  }
}

/// A receiver's messages as an `AsyncSequence` that waits for new ones (see
/// ``CoordinationReceiver/messages(_:batchSize:)``). It ends when the task is cancelled, and
/// throws when the receiver is closed or lost, or the store fails. The messages read ahead stay
/// with the receiver, so that leaving the loop early loses none of them.
public struct MailboxMessages<Receiver: CoordinationReceiver, Payload: Decodable & Sendable>: AsyncSequence, Sendable {
  public typealias Element = MailboxEnvelope<Payload>

  let receiver: Receiver
  let batchSize: Int

  public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(receiver: receiver, batchSize: batchSize) }

  /// The iterator of a ``MailboxMessages``.
  public struct AsyncIterator: AsyncIteratorProtocol {
    let receiver: Receiver
    let batchSize: Int

    /// The next message, waiting for one; `nil` when the task is cancelled.
    public mutating func next() async throws(LiaisonError) -> MailboxEnvelope<Payload>? {
      try await receiver.nextMessage(Payload.self, batchSize: batchSize)
    }
  }
}
