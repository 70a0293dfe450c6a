import Foundation
import GRDB
import Liaison

/// The columns of one row as the store reads them without trusting them: each accessor gives the
/// column's value when it can be read as the type asked for, as GRDB converts values, and `nil`
/// otherwise. Rows come either from GRDB (a `Row`: listings, the fuzzer) or from a prepared
/// statement of a hot path (``PreparedStatements/RunningStatement``); both are read by the same
/// code.
protocol StoredColumns {
  /// An integer, or a real number within range, truncated (GRDB's `Int64.fromDatabaseValue`).
  func integer(_ column: Int32) -> Int64?
  /// A number, integer or real.
  func number(_ column: Int32) -> Double?
  /// Text, or a blob of valid UTF-8 (GRDB's `String.fromDatabaseValue`).
  func text(_ column: Int32) -> String?
  /// Bytes: a blob, or text as its UTF-8 (as SQLite and GRDB read text as bytes).
  func blob(_ column: Int32) -> Data?
  func isNull(_ column: Int32) -> Bool
}

/// A real number read as an integer as GRDB reads one: truncated, when within `Int64`'s range.
func integerAsGRDBReadsIt(_ double: Double) -> Int64? {
  guard double >= Double(Int64.min), double < Double(Int64.max) else { return nil }
  return Int64(double)
}

extension Row: StoredColumns {
  private func value(_ column: Int32) -> DatabaseValue { self[Int(column)] }
  func integer(_ column: Int32) -> Int64? {
    switch value(column).storage {
    case .int64(let value): return value
    case .double(let value): return integerAsGRDBReadsIt(value)
    default: return nil
    }
  }
  func number(_ column: Int32) -> Double? {
    switch value(column).storage {
    case .int64(let value): return Double(value)
    case .double(let value): return value
    default: return nil
    }
  }
  func text(_ column: Int32) -> String? {
    switch value(column).storage {
    case .string(let value): return value
    case .blob(let value): return String(bytes: value, encoding: .utf8)
    default: return nil
    }
  }
  func blob(_ column: Int32) -> Data? {
    switch value(column).storage {
    case .blob(let value): return value
    case .string(let value): return Data(value.utf8)
    default: return nil
    }
  }
  func isNull(_ column: Int32) -> Bool { value(column).isNull }
}

extension StoredValue {
  /// Reads a row without trusting it: a row that another program wrote (a kind Liaison does not
  /// know, a value that is not bytes) is a corrupt-store error, never a crash.
  init(columns row: some StoredColumns, kindColumn: Int32, valueColumn: Int32, path: String) throws(LiaisonError) {
    guard let rawKind = row.integer(kindColumn).flatMap({ Int(exactly: $0) }), let kind = Kind(rawValue: rawKind),
      let bytes = row.blob(valueColumn)
    else { throw Self.foreignRow(path) }
    self.init(kind: kind, bytes: bytes)
  }

  /// ``init(columns:kindColumn:valueColumn:path:)`` for a GRDB row, for the fuzzer.
  package init(row: Row, kindColumn: Int, valueColumn: Int, path: String) throws(LiaisonError) {
    try self.init(columns: row, kindColumn: Int32(kindColumn), valueColumn: Int32(valueColumn), path: path)
  }

  static func foreignRow(_ path: String) -> LiaisonError {
    LiaisonError(
      .corruptFile,
      "A value in '\(path)' was not written by Liaison (its kind or bytes are not what Liaison stores). "
        + "Remove the key, or restore the store from a copy.",
      path: path)
  }
}
