import Foundation
import GRDB
import Liaison
import LiaisonStore

extension FuzzTarget {
  /// A row of the mailbox store, as another program could have written it: reading it never traps
  /// (only a row without a readable position is a `corruptFile` error; any other damage is named
  /// so that the receiver quarantines the row); a payload decodes as a type or gives a reason, and
  /// a value it decodes to is sent again and decodes back the same.
  static let mailboxRow = FuzzTarget(
    name: "mailbox-row", summary: "MessageRow: any row of the mailbox store, its payload decoded as several types"
  ) { bytes in
    var input = FuzzInput(bytes)
    // In the order MessageRow reads them (a dictionary literal keeps it).
    let row: Row = [
      "position": input.databaseValue(), "id": input.databaseValue(), "sender": input.databaseValue(),
      "sent_at": input.databaseValue(), "kind": input.databaseValue(), "payload": input.databaseValue(),
      "quarantine_reason": input.databaseValue(),
    ]
    let message: MessageRow
    do throws(LiaisonError) {
      message = try MessageRow(row: row, path: "fuzz.sqlite")
    } catch {
      require(error.code == .corruptFile, "a row without a position is \(error.code), not corruptFile")
      return
    }
    require(message.damage != nil || message.payload != nil, "an undamaged row without a payload")
    guard let payload = message.payload, message.damage == nil else { return }
    requireDecodes(payload, as: Int.self)
    requireDecodes(payload, as: String.self)
    requireDecodes(payload, as: Data.self)
    requireDecodes(payload, as: [String: Int].self)
    requireDecodes(payload, as: Message.self)
  }
}

/// A message type as an app sends one.
private struct Message: Codable, Equatable, Sendable {
  var url: String
  var savedAt: Date
  var tags: [String]?
}

/// Decodes `payload` as `type`: a failure has a reason; a success, encoded as a send would and
/// decoded again, is the same value.
private func requireDecodes<Value: Codable & Equatable>(_ payload: StoredValue, as type: Value.Type) {
  switch payload.decodeMessage(as: type, using: JSONDecoder()) {
  case .failure(let undecodable):
    require(!undecodable.reason.isEmpty, "an undecodable \(type) without a reason")
  case .success(let value):
    if type == Data.self { return }  // raw bytes: nothing to encode
    guard let again = try? JSONDecoder().decode(type, from: JSONEncoder().encode(value)) else {
      return require(false, "\(value) as \(type) cannot be sent again")
    }
    require(again == value, "\(value) as \(type), sent again, decodes as \(again)")
  }
}
