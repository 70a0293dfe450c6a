import Foundation
import GRDB
import GRDBSQLite
import Liaison

/// The few statements of a part's hot paths (a defaults `set`, a mailbox's send), prepared once
/// per connection and stepped through SQLite's C interface: GRDB's own statement layer (a cache
/// keyed by the SQL text, a `DatabaseValue` per argument and column, its execution bookkeeping)
/// costs more than SQLite's work for a one-row statement.
///
/// GRDB stays the owner of everything else: it opens, configures, migrates and closes the
/// connections, runs the transactions' `BEGIN` and `COMMIT` (`BEGIN` refused while GRDB's own
/// suspension is on), and every other statement. Each part keeps its hot SQL in one type as
/// ``Query`` values (``DefaultsStatements``, ``MailboxStatements``), and nowhere else; the store's
/// database owns the prepared forms (``StoreDatabase/statements``), and checks its file before
/// each commit itself (``StoreDatabase``).
///
/// A statement is prepared for the connection it first runs on and kept until ``finalizeAll()``.
/// The store's pools keep their connections open (`persistentReadOnlyConnections`) until a
/// suspension closes the pool, which first finalizes every statement here, with every access of
/// the pool excluded (SQLite refuses to close a connection that has statements, and a closed
/// connection's address may be reused by the next). Should GRDB open another writer connection,
/// the statements of the previous one are finalized then.
final class PreparedStatements: @unchecked Sendable {
  /// One statement of a hot path: its SQL, and its place in every connection's table.
  final class Query: Sendable {
    let sql: String
    fileprivate let index: Int
    private static let count = Locked(0)

    init(_ sql: String) {
      self.sql = sql
      index = Self.count.withLock { count in
        defer { count += 1 }
        return count
      }
    }
  }

  /// One connection's statements, by ``Query/index``: only ever used on that connection's own
  /// queue, hence by one thread at a time.
  private final class Table {
    var prepared: [OpaquePointer?] = []
    var held: [GRDB.Statement?] = []

    deinit { for statement in prepared { sqlite3_finalize(statement) } }
  }

  /// The writer connection's table, used without the lock: a pool has one writer connection, and
  /// GRDB runs it on one queue at a time (its `SerializedDatabase`).
  private var writer: (connection: OpaquePointer, table: Table)?
  /// The readers' tables, by connection, behind ``lock``: readers run at the same time.
  private var readers: [UnsafeMutableRawPointer: Table] = [:]
  private let lock = NSLock()

  init() {}

  /// Finalizes every statement of every connection. Only while no connection of the pool is in
  /// use (inside a barrier of the pool), before it closes.
  func finalizeAll() {
    writer = nil
    lock.withLock { readers = [:] }
  }

  /// The table of `db`'s connection.
  private func table(_ db: Database) throws -> (OpaquePointer, Table) {
    guard let connection = db.sqliteConnection else {
      throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "the connection is closed")
    }
    if sqlite3_db_readonly(connection, "main") == 0 {
      if let writer, writer.connection == connection { return (connection, writer.table) }
      let table = Table()
      writer = (connection, table)
      return (connection, table)
    }
    let key = UnsafeMutableRawPointer(connection)
    return lock.withLock {
      if let table = readers[key] { return (connection, table) }
      let table = Table()
      readers[key] = table
      return (connection, table)
    }
  }

  /// `query` as a GRDB statement, made once per connection: for the statements GRDB must run itself,
  /// to keep its bookkeeping (a transaction's `BEGIN` and `COMMIT`, which it checks against its
  /// suspension and reports to its observers), without looking its SQL up in GRDB's cache each time.
  func held(_ query: Query, in db: Database) throws -> GRDB.Statement {
    let (_, table) = try table(db)
    if query.index < table.held.count, let statement = table.held[query.index] {
      // Reset first: GRDB's execution begins with a reset that reports the last run's error, so a
      // BEGIN that failed once (busy, interrupted) would fail every later write with that error.
      sqlite3_reset(statement.sqliteStatement)
      return statement
    }
    let statement = try db.makeStatement(sql: query.sql)
    Self.keep(statement, at: query.index, in: &table.held)
    return statement
  }

  /// Runs `body` with `query` prepared on `db`'s connection, then resets it (which ends a read,
  /// so that it never holds back a checkpoint). Its small arguments (names, numbers) stay bound
  /// until the next run sets them all again; values are bound only while they run
  /// (``RunningStatement/withBound(_:blob:_:)``).
  func run<T>(_ query: Query, in db: Database, _ body: (RunningStatement) throws -> T) throws -> T {
    let (connection, table) = try table(db)
    let statement: OpaquePointer
    if query.index < table.prepared.count, let prepared = table.prepared[query.index] {
      statement = prepared
    } else {
      var prepared: OpaquePointer?
      let code = sqlite3_prepare_v3(connection, query.sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
      guard code == SQLITE_OK, let prepared else { throw RunningStatement.error(on: connection) }
      Self.keep(prepared, at: query.index, in: &table.prepared)
      statement = prepared
    }
    defer { sqlite3_reset(statement) }
    return try body(RunningStatement(handle: statement, connection: connection))
  }

  /// Puts `element` at `index` of a connection's table, growing it as needed.
  private static func keep<Element>(_ element: Element, at index: Int, in table: inout [Element?]) {
    if table.count <= index { table += Array(repeating: nil, count: index + 1 - table.count) }
    table[index] = element
  }

  /// One prepared statement while it runs: arguments in, steps, columns out.
  struct RunningStatement: StoredColumns {
    let handle: OpaquePointer
    let connection: OpaquePointer

    /// SQLite copies what it is given (`SQLITE_TRANSIENT`): nothing has to outlive the call.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    func bind(_ index: Int32, text: String) {
      var text = text
      text.withUTF8 { bytes in
        _ = sqlite3_bind_text(handle, index, bytes.baseAddress, Int32(bytes.count), Self.transient)
      }
    }

    /// Binds `blob` for the time of `body`, which steps the statement, without copying it; then
    /// binds NULL in its place, so that the statement keeps no pointer to it, nor a copy of a
    /// large value between runs.
    func withBound<T>(_ index: Int32, blob: Data, _ body: () throws -> T) throws -> T {
      defer {
        sqlite3_reset(handle)  // a statement that has stepped takes no new argument before its reset
        sqlite3_bind_null(handle, index)
      }
      guard !blob.isEmpty else {
        sqlite3_bind_zeroblob(handle, index, 0)  // a blob of no bytes, not NULL
        return try body()
      }
      return try blob.withUnsafeBytes { bytes in
        sqlite3_bind_blob(handle, index, bytes.baseAddress, Int32(bytes.count), nil)  // SQLITE_STATIC
        return try body()
      }
    }

    func bind(_ index: Int32, integer: Int64) {
      _ = sqlite3_bind_int64(handle, index, integer)
    }

    func bind(_ index: Int32, double: Double) {
      _ = sqlite3_bind_double(handle, index, double)
    }

    /// Steps once: `true` with a row to read, `false` when the statement is done.
    func step() throws -> Bool {
      switch sqlite3_step(handle) {
      case SQLITE_ROW: return true
      case SQLITE_DONE: return false
      default: throw Self.error(on: connection)
      }
    }

    /// Steps to the end, for a statement that returns no row.
    func execute() throws {
      while try step() {}
    }

    func integer(_ column: Int32) -> Int64? {
      switch sqlite3_column_type(handle, column) {
      case SQLITE_INTEGER: sqlite3_column_int64(handle, column)
      case SQLITE_FLOAT: integerAsGRDBReadsIt(sqlite3_column_double(handle, column))
      default: nil
      }
    }

    func number(_ column: Int32) -> Double? {
      switch sqlite3_column_type(handle, column) {
      case SQLITE_INTEGER: Double(sqlite3_column_int64(handle, column))
      case SQLITE_FLOAT: sqlite3_column_double(handle, column)
      default: nil
      }
    }

    func blob(_ column: Int32) -> Data? {
      let type = sqlite3_column_type(handle, column)
      guard type == SQLITE_BLOB || type == SQLITE_TEXT else { return nil }
      let count = Int(sqlite3_column_bytes(handle, column))
      guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return Data() }
      return Data(bytes: bytes, count: count)
    }

    func text(_ column: Int32) -> String? {
      switch sqlite3_column_type(handle, column) {
      case SQLITE_TEXT:
        guard let bytes = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
      case SQLITE_BLOB:
        return blob(column).flatMap { String(bytes: $0, encoding: .utf8) }
      default:
        return nil
      }
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    /// SQLite's last error on `connection`, as GRDB reports it, so that
    /// ``StoreDatabase/translate(_:path:)`` reads it as any other.
    static func error(on connection: OpaquePointer) -> DatabaseError {
      DatabaseError(
        resultCode: ResultCode(rawValue: sqlite3_extended_errcode(connection)),
        message: String(cString: sqlite3_errmsg(connection)))
    }
  }
}
