import Foundation
import GRDB
import Liaison

/// The mailbox's hot statements, the only copy of their SQL: a send (the totals, a given id's
/// check, the message), a receiver's look, and an acknowledgement's removal, each prepared once
/// per connection (see ``PreparedStatements``).
enum MailboxStatements {
  static let totals = PreparedStatements.Query(
    """
    SELECT next_position, messages, bytes, quarantined, maximum_message_size, maximum_messages, maximum_bytes
    FROM mailbox_totals WHERE mailbox = ?
    """)
  static let saveTotals = PreparedStatements.Query(
    """
    INSERT INTO mailbox_totals (mailbox, next_position, messages, bytes, quarantined) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (mailbox) DO UPDATE SET next_position = excluded.next_position,
      messages = excluded.messages, bytes = excluded.bytes, quarantined = excluded.quarantined
    """)
  static let messages = PreparedStatements.Query(
    """
    SELECT position, id, sender, sent_at, kind, payload, quarantine_reason FROM mailbox_message
    WHERE mailbox = ? AND position > ? AND (? OR quarantine_reason IS NULL) ORDER BY position LIMIT ?
    """)
  private static let known = PreparedStatements.Query(
    """
    SELECT 1 FROM mailbox_message WHERE mailbox = ?1 AND id = ?2 AND given_id = 1
    UNION ALL SELECT 1 FROM mailbox_acknowledged WHERE mailbox = ?1 AND id = ?2
    """)
  private static let insertMessage = PreparedStatements.Query(
    """
    INSERT INTO mailbox_message (mailbox, position, id, given_id, sender, sent_at, kind, payload)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    """)
  private static let removeRun = PreparedStatements.Query(
    """
    DELETE FROM mailbox_message
    WHERE mailbox = ? AND position BETWEEN ? AND ? AND quarantine_reason IS NULL
    RETURNING given_id, id, length(payload), position
    """)

  /// Whether a message with this given id waits in `mailbox` or was acknowledged recently.
  static func isKnown(_ id: String, in mailbox: LiaisonName, _ db: Database, _ statements: PreparedStatements) throws
    -> Bool
  {
    try statements.run(known, in: db) { statement in
      statement.bind(1, text: mailbox.rawValue)
      statement.bind(2, text: id)
      return try statement.step()
    }
  }

  /// Stores `message` at `position`, inside the caller's write transaction.
  static func insert(
    _ message: OutgoingMessage, at position: Int64, in mailbox: LiaisonName, sender: String, sentAt: Double,
    _ db: Database, _ statements: PreparedStatements
  ) throws {
    try statements.run(insertMessage, in: db) { statement in
      statement.bind(1, text: mailbox.rawValue)
      statement.bind(2, integer: position)
      statement.bind(3, text: message.id)
      statement.bind(4, integer: message.givenID ? 1 : 0)
      statement.bind(5, text: sender)
      statement.bind(6, double: sentAt)
      statement.bind(7, integer: Int64(message.value.kind.rawValue))
      try statement.withBound(8, blob: message.value.bytes) { try statement.execute() }
    }
  }

  /// A removed message: what an acknowledgement needs of it.
  struct Removed {
    let givenID: Bool
    /// `nil` when the row's id is not text (a row another program wrote).
    let id: String?
    let bytes: Int
    let position: Int64?
  }

  /// Removes the waiting (not quarantined) messages at the positions `run`, and returns them.
  static func remove(
    _ run: ClosedRange<Int64>, in mailbox: LiaisonName, _ db: Database, _ statements: PreparedStatements
  ) throws -> [Removed] {
    try statements.run(removeRun, in: db) { statement in
      statement.bind(1, text: mailbox.rawValue)
      statement.bind(2, integer: run.lowerBound)
      statement.bind(3, integer: run.upperBound)
      var removed: [Removed] = []
      while try statement.step() {
        removed.append(
          Removed(
            givenID: statement.integer(0) == 1, id: statement.text(1),
            bytes: statement.integer(2).flatMap { Int(exactly: $0) } ?? 0,
            position: statement.integer(3)))
      }
      return removed
    }
  }
}
