#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A value in the form the store keeps it, for shared defaults and mailbox messages alike: JSON
/// text for any `Encodable` value, or the bytes themselves for a `Data`.
///
/// `package`: the store (SQLite) and PostgreSQL keep values in this same form, and the fuzzer
/// (`LiaisonFuzz`) reaches the reading and decoding.
package struct StoredValue: Sendable {
  package enum Kind: Int {
    case json = 0
    case data = 1
  }
  package let kind: Kind
  package let bytes: Data

  package init(kind: Kind, bytes: Data) {
    self.kind = kind
    self.bytes = bytes
  }

  /// `value` encoded: a `Data` as its bytes, anything else as JSON.
  ///
  /// - Parameter what: how a message names the value ("The value for 'theme' in 'settings'").
  /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when the encoder fails.
  package init<Value: Encodable>(
    encoding value: Value, with encoder: @autoclosure () -> JSONEncoder, what: @autoclosure () -> String
  )
    throws(LiaisonError)
  {
    if Value.self == Data.self {
      self.init(kind: .data, bytes: unsafeBitCast(value, to: Data.self))
      return
    }
    if let json = Self.scalarJSON(value) {
      self.init(kind: .json, bytes: json)
      return
    }
    // An optional `Data` with a value is its bytes too (`nil` is JSON's `null`).
    if Value.self == Data?.self, let data = unsafeBitCast(value, to: Data?.self) {
      self.init(kind: .data, bytes: data)
      return
    }
    do {
      self.init(kind: .json, bytes: try encoder().encode(value))
    } catch {
      throw LiaisonError(.invalidArgument, "\(what()) cannot be encoded: \(error).")
    }
  }

  /// The JSON of the commonest values, written directly: `JSONEncoder` costs more than the
  /// rest of a `set` does in user space (about 5,000 instructions for an `Int`). What it writes
  /// decodes as `JSONEncoder`'s output does; a value that is not finite is left to the encoder,
  /// which refuses it.
  package static func scalarJSON<Value: Encodable>(_ value: Value) -> Data? {
    // The type is compared first: a cast from a generic value (`as? Int`) asks the runtime, which
    // costs more than the encoding.
    if Value.self == Int.self { return Data(String(unsafeBitCast(value, to: Int.self)).utf8) }
    if Value.self == String.self { return jsonString(unsafeBitCast(value, to: String.self)) }
    if Value.self == Bool.self { return Data((unsafeBitCast(value, to: Bool.self) ? "true" : "false").utf8) }
    if Value.self == Double.self {
      let double = unsafeBitCast(value, to: Double.self)
      return double.isFinite ? Data(String(double).utf8) : nil
    }
    if Value.self == Int64.self { return Data(String(unsafeBitCast(value, to: Int64.self)).utf8) }
    if Value.self == UInt64.self { return Data(String(unsafeBitCast(value, to: UInt64.self)).utf8) }
    return nil
  }

  /// The value of JSON text in the exact forms ``scalarJSON(_:)`` writes, read directly; `nil` for
  /// any other type or form, which `JSONDecoder` then reads (and refuses as it would). A value read
  /// here is the one `JSONDecoder` reads from the same text.
  package static func scalarValue<Value>(_ json: Data, as type: Value.Type) -> Value? {
    if Value.self == Int.self { return integer(json, as: Int.self).map { unsafeBitCast($0, to: Value.self) } }
    if Value.self == String.self { return string(json).map { unsafeBitCast($0, to: Value.self) } }
    if Value.self == Bool.self {
      if json.elementsEqual("true".utf8) { return unsafeBitCast(true, to: Value.self) }
      if json.elementsEqual("false".utf8) { return unsafeBitCast(false, to: Value.self) }
      return nil
    }
    if Value.self == Double.self { return double(json).map { unsafeBitCast($0, to: Value.self) } }
    if Value.self == Int64.self { return integer(json, as: Int64.self).map { unsafeBitCast($0, to: Value.self) } }
    if Value.self == UInt64.self { return integer(json, as: UInt64.self).map { unsafeBitCast($0, to: Value.self) } }
    return nil
  }

  /// A JSON integer (`-?(0|[1-9][0-9]*)`) that fits `T`.
  private static func integer<T: FixedWidthInteger>(_ json: Data, as type: T.Type) -> T? {
    var digits = json[...]
    if digits.first == UInt8(ascii: "-") { digits = digits.dropFirst() }
    guard let first = digits.first, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
      first != UInt8(ascii: "0") || digits.count == 1
    else { return nil }
    return T(String(decoding: json, as: UTF8.self))
  }

  /// A JSON number without an exponent (`-?(0|[1-9][0-9]*)(\.[0-9]+)?`) as the nearest `Double`.
  /// A number with an exponent is left to `JSONDecoder`, which refuses some that `Double` reads
  /// (`0E8`, found by the fuzzer): its reading is the one to keep.
  private static func double(_ json: Data) -> Double? {
    var rest = json[...]
    func digits() -> Int {
      let count = rest.prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }.count
      rest = rest.dropFirst(count)
      return count
    }
    if rest.first == UInt8(ascii: "-") { rest = rest.dropFirst() }
    let leadsWithZero = rest.first == UInt8(ascii: "0")
    let whole = digits()
    guard whole > 0, !leadsWithZero || whole == 1 else { return nil }
    if rest.first == UInt8(ascii: ".") {
      rest = rest.dropFirst()
      guard digits() > 0 else { return nil }
    }
    guard rest.isEmpty, let double = Double(String(decoding: json, as: UTF8.self)), double.isFinite else { return nil }
    return double
  }

  /// A JSON string without escapes, of valid UTF-8.
  private static func string(_ json: Data) -> String? {
    guard json.count >= 2, json.first == UInt8(ascii: "\""), json.last == UInt8(ascii: "\"") else { return nil }
    let inside = json.dropFirst().dropLast()
    guard !inside.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) else {
      return nil
    }
    return String(bytes: inside, encoding: .utf8)
  }

  /// `string` as a JSON string: quoted, with `"`, `\` and the control characters escaped, and
  /// everything else as its UTF-8.
  package static func jsonString(_ string: String) -> Data {
    var bytes: [UInt8] = [UInt8(ascii: "\"")]
    bytes.reserveCapacity(string.utf8.count + 2)
    let hex = Array("0123456789abcdef".utf8)
    for byte in string.utf8 {
      switch byte {
      case UInt8(ascii: "\""), UInt8(ascii: "\\"):
        bytes += [UInt8(ascii: "\\"), byte]
      case 0..<0x20:
        bytes += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
      default:
        bytes.append(byte)
      }
    }
    bytes.append(UInt8(ascii: "\""))
    return Data(bytes)
  }

  /// JSON text as given, for tools that do not know the type (`liaison defaults write`, `liaison
  /// send`).
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when `json` is not JSON.
  package init(json: Data, what: String) throws(LiaisonError) {
    guard JSONText.isValid(json) else {
      throw LiaisonError(.invalidArgument, "\(what) is not valid JSON.")
    }
    self.init(kind: .json, bytes: json)
  }

  /// Throws ``/Liaison/LiaisonError/Code/tooLarge`` when the stored form is over `maximum` bytes.
  package func checkSize(_ maximum: Int, what: @autoclosure () -> String, advice: String) throws(LiaisonError) {
    guard bytes.count <= maximum else {
      throw LiaisonError(
        .tooLarge,
        "\(what()) is \(bytes.count) bytes; it may be at most \(maximum) bytes." + (advice.isEmpty ? "" : " " + advice))
    }
  }
}
