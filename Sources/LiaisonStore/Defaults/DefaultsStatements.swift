import Foundation
import GRDB
import Liaison

/// The defaults' hot statements, the only copy of their SQL: a key's read and its write, each
/// prepared once per connection (see ``PreparedStatements``).
enum DefaultsStatements {
  private static let select = PreparedStatements.Query(
    "SELECT kind, value FROM defaults_entry WHERE domain = ? AND key = ?")
  private static let upsert = PreparedStatements.Query(
    """
    INSERT INTO defaults_entry (domain, key, kind, value) VALUES (?, ?, ?, ?)
    ON CONFLICT (domain, key) DO UPDATE SET kind = excluded.kind, value = excluded.value
    """)

  /// The stored value of `key` in `domain`, or `nil` when it has none. A row that another program
  /// wrote (a kind Liaison does not know, a value that is not bytes) is a corrupt-store error,
  /// never a crash.
  static func fetch(
    _ db: Database, _ statements: PreparedStatements, domain: LiaisonName, key: LiaisonName, path: String
  ) throws -> StoredValue? {
    try statements.run(select, in: db) { statement in
      statement.bind(1, text: domain.rawValue)
      statement.bind(2, text: key.rawValue)
      guard try statement.step() else { return nil }
      return try StoredValue(columns: statement, kindColumn: 0, valueColumn: 1, path: path)
    }
  }

  /// Stores `stored` for `key` in `domain`, inside the caller's write transaction.
  static func save(
    _ stored: StoredValue, _ db: Database, _ statements: PreparedStatements, domain: LiaisonName, key: LiaisonName
  ) throws {
    try statements.run(upsert, in: db) { statement in
      statement.bind(1, text: domain.rawValue)
      statement.bind(2, text: key.rawValue)
      statement.bind(3, integer: Int64(stored.kind.rawValue))
      try statement.withBound(4, blob: stored.bytes) { try statement.execute() }
    }
  }
}
