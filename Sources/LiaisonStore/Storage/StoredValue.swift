import Foundation
import GRDB
import Liaison

extension StoredValue {
  /// Reads a row without trusting it: a row that another program wrote (a kind Liaison does not
  /// know, a value that is not bytes) is a corrupt-store error, never a crash.
  package init(row: Row, kindColumn: Int, valueColumn: Int, path: String) throws(LiaisonError) {
    guard let rawKind = Int.fromDatabaseValue(row[kindColumn] as DatabaseValue), let kind = Kind(rawValue: rawKind),
      let bytes = Data.fromDatabaseValue(row[valueColumn] as DatabaseValue)
    else { throw Self.foreignRow(path) }
    self.init(kind: kind, bytes: bytes)
  }

  static func foreignRow(_ path: String) -> LiaisonError {
    LiaisonError(
      .corruptFile,
      "A value in '\(path)' was not written by Liaison (its kind or bytes are not what Liaison stores). "
        + "Remove the key, or restore the store from a copy.",
      path: path)
  }
}
