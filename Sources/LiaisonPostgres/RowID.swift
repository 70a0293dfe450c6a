#if Postgres
  import Liaison
  import PostgresNIO

  /// The row of a lock or presence in its table (`liaison.lock`, `liaison.presence`): its id is
  /// the second key of the name's advisory locks. Registered on first use, then remembered.
  final class RowID: Sendable {
    enum Table: String, Sendable {
      case lock
      case presence
    }

    private let table: Table
    private let name: LiaisonName
    private let container: PostgresContainer
    private let known = Locked<Int32?>(nil)

    init(_ table: Table, name: LiaisonName, in container: PostgresContainer) {
      self.table = table
      self.name = name
      self.container = container
    }

    func resolve() async throws(LiaisonError) -> Int32 {
      if let id = known.withLock({ $0 }) { return id }
      let namespace = container.namespace.rawValue
      // The table's name is one of two constants; everything else is bound.
      let table = "liaison.\(self.table.rawValue)"
      // Two attempts: a process whose insert met another's uncommitted one inserts nothing and,
      // in the same statement's snapshot, does not see the other's row either; the second
      // statement, with a later snapshot, does.
      for _ in 0..<2 {
        let rows = try await container.query(
          """
          WITH made AS (
            INSERT INTO \(unescaped: table) (namespace, name) VALUES (\(namespace), \(name.rawValue))
            ON CONFLICT (namespace, name) DO NOTHING RETURNING id)
          SELECT id FROM made UNION ALL
          SELECT id FROM \(unescaped: table) WHERE namespace = \(namespace) AND name = \(name.rawValue)
          """, doing: "register the \(self.table.rawValue) '\(name)'", committing: true)
        if let id = try? rows.first?.decode(Int32.self) {
          known.withLock { $0 = id }
          return id
        }
      }
      throw LiaisonError(.system, "The server returned no row for the \(self.table.rawValue) '\(name)'.")
    }
  }
#endif
