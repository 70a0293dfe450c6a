import Foundation
import GRDB
import Liaison
import LiaisonStore

extension FuzzTarget {
  /// A row of the defaults store, as another program could have written it: reading it never
  /// traps (a row Liaison did not write is a `corruptFile` error); a value that reads as a type
  /// is written back and reads back the same.
  static let storedValue = FuzzTarget(
    name: "stored-value", summary: "StoredValue: any row of the defaults store, decoded as several types"
  ) { bytes in
    var input = FuzzInput(bytes)
    let key = input.databaseValue()
    let kind = input.databaseValue()
    let value = input.databaseValue()
    let row: Row = ["key": key, "kind": kind, "value": value]
    let stored: StoredValue
    do throws(LiaisonError) {
      let entry = try StoredValue.snapshotEntry(row, path: "fuzz.sqlite")
      stored = try StoredValue(row: row, kindColumn: 1, valueColumn: 2, path: "fuzz.sqlite")
      require(stored.raw == entry.value, "the snapshot and a read disagree")
    } catch {
      require(error.code == .corruptFile, "a foreign row is \(error.code), not corruptFile")
      return
    }
    requireRoundTrip(stored, as: Int.self)
    requireRoundTrip(stored, as: Int8.self)
    requireRoundTrip(stored, as: UInt64.self)
    requireRoundTrip(stored, as: Double.self)
    requireRoundTrip(stored, as: Bool.self)
    requireRoundTrip(stored, as: String.self)
    requireRoundTrip(stored, as: Data.self)
    requireRoundTrip(stored, as: Date.self)
    requireRoundTrip(stored, as: [String].self)
    requireRoundTrip(stored, as: [String: Int].self)
    requireRoundTrip(stored, as: String?.self)
    requireRoundTrip(stored, as: Token.self)
  }
}

/// A `Codable` struct, as an app stores one.
private struct Token: Codable, Equatable, Sendable {
  var value: String
  var expires: Date
  var scopes: [String]?
}

private let domain = try! LiaisonName("fuzz")

/// Decodes `stored` as `type`; when it decodes, stores the value again and requires that it reads
/// back the same. A scalar read directly (without `JSONDecoder`) must be what `JSONDecoder` reads.
private func requireRoundTrip<Value: Codable & Sendable & Equatable>(_ stored: StoredValue, as type: Value.Type) {
  if stored.kind == .json, let direct = StoredValue.scalarValue(stored.bytes, as: Value.self) {
    require(
      direct == (try? JSONDecoder().decode(Value.self, from: stored.bytes)),
      "the direct reading of a \(type) differs from JSONDecoder's")
  }
  let key = DefaultsKey<Value>("fuzz")
  let value: Value
  do {
    value = try stored.decode(key, domain: domain)
  } catch {
    require(error.code == .typeMismatch, "reading as \(type) failed with \(error.code), not typeMismatch")
    return
  }
  do {
    let again = try StoredValue(value, key: key, domain: domain).decode(key, domain: domain)
    require(again == value, "\(value) as \(type), stored again, reads back as \(again)")
  } catch {
    require(false, "\(value) as \(type), read from the store, cannot be stored again: \(error)")
  }
}

extension FuzzInput {
  /// A value as SQLite could hold it in a column: NULL, an integer, a real, text or a blob.
  mutating func databaseValue() -> DatabaseValue {
    switch byte() % 5 {
    case 0: return .null
    case 1: return Int64(bitPattern: integer(UInt64.self)).databaseValue
    case 2: return Double(bitPattern: integer(UInt64.self)).databaseValue
    case 3: return String(decoding: field(), as: UTF8.self).databaseValue
    default: return Data(field()).databaseValue
    }
  }
}
