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
  package init(
    encoding value: some Encodable, with encoder: @autoclosure () -> JSONEncoder, what: @autoclosure () -> String
  )
    throws(LiaisonError)
  {
    if let data = value as? Data {
      self.init(kind: .data, bytes: data)
      return
    }
    if let json = Self.scalarJSON(value) {
      self.init(kind: .json, bytes: json)
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
  package static func scalarJSON(_ value: some Encodable) -> Data? {
    switch value {
    case let int as Int: return Data(String(int).utf8)
    case let int as Int64: return Data(String(int).utf8)
    case let int as UInt64: return Data(String(int).utf8)
    case let double as Double where double.isFinite: return Data(String(double).utf8)
    case let bool as Bool: return Data((bool ? "true" : "false").utf8)
    case let string as String: return jsonString(string)
    default: return nil
    }
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
    guard (try? JSONDecoder().decode(AnyJSON.self, from: json)) != nil else {
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

/// Any JSON value, read to its end: decoding one checks that text is JSON, as `JSONSerialization`
/// would (it is not in FoundationEssentials). `JSONDecoder` checks a number or a string only when
/// it is decoded, so every one is.
private struct AnyJSON: Decodable {
  init(from decoder: any Decoder) throws {
    if var array = try? decoder.unkeyedContainer() {
      while !array.isAtEnd { _ = try array.decode(AnyJSON.self) }
    } else if let object = try? decoder.container(keyedBy: Key.self) {
      for key in object.allKeys { _ = try object.decode(AnyJSON.self, forKey: key) }
    } else {
      let value = try decoder.singleValueContainer()
      if value.decodeNil() || (try? value.decode(Bool.self)) != nil || (try? value.decode(String.self)) != nil {
        return
      }
      _ = try value.decode(Double.self)
    }
  }

  /// An object's keys, whatever they are.
  private struct Key: CodingKey {
    let stringValue: String
    init(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
  }
}
