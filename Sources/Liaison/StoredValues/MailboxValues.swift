#if os(Linux)
  import CLiaison
#endif
#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A message delivered by a mailbox's receiver (`MailboxReceiver` in `LiaisonStore`, or
/// `PostgresMailboxReceiver` in `LiaisonPostgres`): acknowledge it once it is handled.
public struct MailboxEnvelope<Payload: Sendable>: Sendable {
  /// The message's id: the sender's own, or one made at the send.
  public let id: String
  /// When the send was made, by the sender's clock.
  public let sentAt: Date
  /// The sender's name (the `sender` of the mailbox handle that sent it).
  public let sender: String
  /// The message, decoded as the type the receiver asked for.
  public let payload: Payload
  /// The fencing token of the receive claim of the receiver that delivered it (see the
  /// fencing token of an exclusive lock): each receiver's is larger than every earlier one's.
  ///
  /// A receiver hands out the messages it read ahead for as long as it holds its claim as far as
  /// its process knows. A receiver whose claim ended without its knowing (a process paused past
  /// the detection bound, a connection cut) may so hand out a message that the next receiver
  /// delivers too. Guard the handler's writes with this token, as with a lock's, and the later
  /// receiver's writes refuse the earlier one's:
  ///
  /// ```sql
  /// UPDATE job SET done = true, token = $1 WHERE id = $2 AND token <= $1
  /// ```
  public let claimToken: UInt64
  /// Where the message stands in the mailbox: what an acknowledgement removes.
  package let position: Int64
  /// The mailbox it came from: an acknowledgement by another mailbox's receiver is refused.
  package let mailbox: LiaisonName

  package init(
    id: String, sentAt: Date, sender: String, payload: Payload, claimToken: UInt64, position: Int64,
    mailbox: LiaisonName
  ) {
    self.id = id
    self.sentAt = sentAt
    self.sender = sender
    self.payload = payload
    self.claimToken = claimToken
    self.position = position
    self.mailbox = mailbox
  }

  /// Checks a sender name, the rule of every backend: 1 to 256 bytes of UTF-8.
  ///
  /// - Throws: ``LiaisonError/Code/invalidArgument`` naming the mailbox, when `sender` breaks it.
  package static func checkSender(_ sender: String, mailbox: LiaisonName) throws(LiaisonError) {
    guard sender.isEmpty || sender.utf8.count > 256 else { return }
    throw LiaisonError(
      .invalidArgument,
      "The sender name of mailbox '\(mailbox)' must be 1 to 256 bytes long; it is \(sender.utf8.count). Give a "
        + "shorter (or a non-empty) sender.")
  }
}

/// The sizes a mailbox may reach. They are the mailbox's own, stored with it: every send, from
/// any process, is checked against the same limits, which `setLimits(_:timeout:)` changes
/// (the receiver's side usually sets them). Until then, the defaults hold.
public struct MailboxLimits: Sendable, Hashable {
  /// The largest payload, in bytes of its stored form. Default 1 MiB.
  public var maximumMessageSize: Int
  /// The most messages waiting (including quarantined ones). Default 1,000,000.
  public var maximumMessages: Int
  /// The most payload bytes waiting (including quarantined ones). Default 256 MiB.
  public var maximumBytes: Int

  /// Limits of your choosing; each one left out keeps its default.
  public init(maximumMessageSize: Int = 1 << 20, maximumMessages: Int = 1_000_000, maximumBytes: Int = 256 << 20) {
    self.maximumMessageSize = maximumMessageSize
    self.maximumMessages = maximumMessages
    self.maximumBytes = maximumBytes
  }

  /// Checks that every limit is positive, the rule of every backend.
  ///
  /// - Throws: ``LiaisonError/Code/invalidArgument`` naming the mailbox, when one is not.
  package func check(mailbox: LiaisonName) throws(LiaisonError) {
    guard maximumMessageSize <= 0 || maximumMessages <= 0 || maximumBytes <= 0 else { return }
    throw LiaisonError(
      .invalidArgument,
      "The limits of mailbox '\(mailbox)' must all be positive; they are \(maximumMessageSize) bytes per message, "
        + "\(maximumMessages) messages, \(maximumBytes) bytes.")
  }
}

/// A mailbox's backlog, as a place's `mailboxes()` reports it.
public struct MailboxInfo: Sendable, Hashable {
  /// The mailbox's name.
  public let name: LiaisonName
  /// Messages waiting to be received and acknowledged.
  public let waiting: Int
  /// Messages set aside because the receiver could not decode them.
  public let quarantined: Int
  /// The payload bytes of all of them.
  public let bytes: Int

  package init(name: LiaisonName, waiting: Int, quarantined: Int, bytes: Int) {
    self.name = name
    self.waiting = waiting
    self.quarantined = quarantined
    self.bytes = bytes
  }
}

/// A message as a mailbox's `peek(limit:)` shows it, in its stored form.
public struct MailboxEntry: Sendable, Hashable {
  /// The message's id: the sender's own, or one made at the send.
  public let id: String
  /// When the send was made, by the sender's clock.
  public let sentAt: Date
  /// The sender's name (the `sender` of the mailbox handle that sent it).
  public let sender: String
  /// The payload as stored: JSON, or the bytes of a `Data`.
  public let payload: MailboxPayload
  /// Why the receiver could not decode it; `nil` for a message waiting normally.
  public let quarantineReason: String?

  package init(id: String, sentAt: Date, sender: String, payload: MailboxPayload, quarantineReason: String?) {
    self.id = id
    self.sentAt = sentAt
    self.sender = sender
    self.payload = payload
    self.quarantineReason = quarantineReason
  }
}

extension MailboxLimits {
  /// The most payload bytes a receiver reads from the store at once (it always reads one message
  /// at least), whatever its batch's count: 256 messages of 1 MiB read at once took 830 MB of
  /// memory, and a mailbox could not be drained under a 512 MB limit.
  package static let readAheadBytes = 4 << 20
}

/// A message's payload in its stored form, for tools that do not know its type.
public enum MailboxPayload: Sendable, Hashable {
  /// JSON text: any `Codable` payload other than `Data`.
  case json(Data)
  /// Raw bytes: a `Data` payload.
  case data(Data)
}

/// A message about to be stored: its id and its encoded payload. Its size is checked against the
/// mailbox's limits in the sending transaction.
package struct OutgoingMessage: Sendable {
  package let id: String
  /// Whether the sender gave the id (a retried send with it stores nothing).
  package let givenID: Bool
  package let value: StoredValue

  /// How long the id of an acknowledged message is remembered, on every backend: 7 days.
  package static let acknowledgedIDRetention: Duration = .seconds(7 * 24 * 3600)

  package init<Payload: Encodable>(
    _ payload: Payload, id: String?, mailbox: LiaisonName, encoder: @autoclosure () -> JSONEncoder
  ) throws(LiaisonError) {
    try self.init(
      StoredValue(encoding: payload, with: encoder(), what: "A message for mailbox '\(mailbox)'"), id: id,
      mailbox: mailbox)
  }

  /// 128 random bits as 32 hexadecimal digits (Foundation's `UUID()` opens `/dev/urandom` at each
  /// call on Linux, which costs more than the rest of a send's preparation).
  package static func uniqueID() -> String {
    var words = (UInt64(0), UInt64(0))
    #if os(Linux) && !DarwinModel
      // One system call for both words, where the standard generator makes one per word.
      let filled = withUnsafeMutableBytes(of: &words) { cliaison_random($0.baseAddress, 16) } == 16
    #else
      let filled = false
    #endif
    if !filled {
      var generator = SystemRandomNumberGenerator()
      words = (generator.next(), generator.next())
    }
    let (high, low) = words
    // Written digit by digit into the string's own storage: `String(_:radix:)`, padding and joining
    // cost about 5,000 instructions, a tenth of a send.
    return String(
      unsafeUninitializedCapacity: 32,
      initializingUTF8With: { buffer in
        for index in 0..<16 {
          let shift = UInt64(60 - 4 * index)
          buffer[index] = hexDigit(high >> shift)
          buffer[16 + index] = hexDigit(low >> shift)
        }
        return 32
      })
  }

  /// The lowest four bits of `value` as a hexadecimal digit, in ASCII.
  private static func hexDigit(_ value: UInt64) -> UInt8 {
    let digit = UInt8(truncatingIfNeeded: value & 0xF)
    return digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
  }

  package init(_ value: StoredValue, id: String?, mailbox: LiaisonName) throws(LiaisonError) {
    if let id {
      guard !id.isEmpty, id.utf8.count <= 256 else {
        throw LiaisonError(
          .invalidArgument, "A message id for mailbox '\(mailbox)' must be 1 to 256 bytes long; it is \(id.utf8.count)."
        )
      }
      (self.id, givenID) = (id, true)
    } else {
      (self.id, givenID) = (Self.uniqueID(), false)
    }
    self.value = value
  }
}

extension StoredValue {
  /// The value as a mailbox payload.
  package var payload: MailboxPayload { kind == .data ? .data(bytes) : .json(bytes) }

  /// Why the value cannot be read in its stored form: JSON that is not JSON (damaged, or written
  /// by another program); `nil` when it can. Such a payload is never shown as text: a receiver of
  /// the stored form (`liaison receive`) quarantines it, and `peek` shows its bytes, with this
  /// reason.
  package var damage: String? {
    kind == .json && !JSONText.isValid(bytes)
      ? "damaged: its payload is stored as JSON but is not JSON (not written by Liaison)" : nil
  }

  /// The payload in its stored form, or why it is damaged (``damage``): what a receiver of the
  /// stored form delivers.
  package var storedPayload: Result<MailboxPayload, UndecodableMessage> {
    damage.map { .failure(UndecodableMessage(reason: $0)) } ?? .success(payload)
  }

  /// The payload as `peek` shows it: its bytes (never text) when it is damaged.
  package var peekedPayload: MailboxPayload { damage == nil ? payload : .data(bytes) }

  /// The payload as `Payload`, or why it cannot be: raw bytes are a `Data`; JSON is decoded (and
  /// is also readable, as its text bytes, as a `Data`).
  package func decodeMessage<Payload: Decodable>(as type: Payload.Type, using decoder: JSONDecoder)
    -> Result<Payload, UndecodableMessage>
  {
    decodeMessage(using: decoder)
  }

  /// ``decodeMessage(as:using:)``, with the type inferred: for a `@Sendable` closure, which must
  /// not capture a generic metatype.
  package func decodeMessage<Payload: Decodable>(using decoder: JSONDecoder) -> Result<Payload, UndecodableMessage> {
    if Payload.self == Data.self { return .success(unsafeBitCast(bytes, to: Payload.self)) }
    if Payload.self == Data?.self { return .success(unsafeBitCast(Optional(bytes), to: Payload.self)) }
    guard kind == .json else { return .failure(UndecodableMessage(reason: "it is raw bytes (sent as Data)")) }
    if let value = Self.scalarValue(bytes, as: Payload.self) { return .success(value) }
    do {
      return .success(try decoder.decode(Payload.self, from: bytes))
    } catch let DecodingError.dataCorrupted(context) {
      return .failure(UndecodableMessage(reason: "not valid JSON (\(context.debugDescription))"))
    } catch let DecodingError.keyNotFound(key, context) {
      return .failure(UndecodableMessage(reason: "no value for '\(key.stringValue)'\(context.where)"))
    } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
      return .failure(UndecodableMessage(reason: "\(context.debugDescription)\(context.where)"))
    } catch {
      return .failure(UndecodableMessage(reason: "\(error)"))
    }
  }
}

/// Why a payload cannot be read as the receiver's type: what quarantine records.
package struct UndecodableMessage: Error {
  package let reason: String

  package init(reason: String) {
    self.reason = reason
  }
}

extension DecodingError.Context {
  /// " at a.b.c" for a nested value, "" at the top.
  fileprivate var `where`: String {
    codingPath.isEmpty
      ? "" : " at " + codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
  }
}
