#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// The name and type of a value in `SharedDefaults` (in `LiaisonStore`), or `PostgresDefaults` (in `LiaisonPostgres`).
///
/// ```swift
/// extension DefaultsKey where Value == OAuthToken {
///   static let token = DefaultsKey("oauth-token")
/// }
/// let token = try defaults.get(.token)
/// ```
public struct DefaultsKey<Value: Codable & Sendable>: Sendable, Hashable {
  /// The key's name, following ``LiaisonName/rule``.
  public let name: LiaisonName

  /// A key whose name is written in the source. A name that breaks ``LiaisonName/rule`` is a
  /// programming error and stops the program with the rule in the message.
  public init(_ name: StaticString) {
    do {
      self.name = try LiaisonName(name.description)
    } catch {
      preconditionFailure(error.message)
    }
  }

  /// A key whose name comes from outside (user input, a file): validated, throwing
  /// ``LiaisonError/Code/invalidName`` when it breaks the rule.
  public init(validating name: String) throws(LiaisonError) {
    self.name = try LiaisonName(name)
  }
}

/// A shared default as it is stored, for tools that do not know its type.
public enum DefaultsRawValue: Sendable, Hashable {
  /// JSON text: any `Codable` value other than `Data`.
  case json(Data)
  /// Raw bytes: a `Data` value.
  case data(Data)
}

extension StoredValue {
  /// The largest stored form of a shared default, on every backend: 1 MiB.
  package static let maximumDefaultsValueSize = 1 << 20

  /// `value` in its stored form for the key `key`, checked against ``maximumDefaultsValueSize``.
  package init<Value: Encodable>(
    _ value: Value, key: DefaultsKey<some Codable & Sendable>, domain: LiaisonName,
    encoder: @autoclosure () -> JSONEncoder = JSONEncoder()
  ) throws(LiaisonError) {
    try self.init(encoding: value, with: encoder(), what: "The value for '\(key.name)' in '\(domain)'")
    try checkSize(
      Self.maximumDefaultsValueSize, what: "The value for '\(key.name)' in '\(domain)'",
      advice: "Store large data in a file or a shared database.")
  }

  /// JSON text as given, checked to be JSON and against the size limit.
  package init(checkedJSON json: Data, key: LiaisonName, domain: LiaisonName) throws(LiaisonError) {
    try self.init(json: json, what: "The value for '\(key)' in '\(domain)'")
    try checkSize(Self.maximumDefaultsValueSize, what: "The value for '\(key)' in '\(domain)'", advice: "")
  }

  package var raw: DefaultsRawValue { kind == .data ? .data(bytes) : .json(bytes) }

  /// The value as `Value`; ``LiaisonError/Code/typeMismatch`` when it was stored as another type.
  package func decode<Value>(
    _ key: DefaultsKey<Value>, domain: LiaisonName, decoder: @autoclosure () -> JSONDecoder = JSONDecoder()
  ) throws(LiaisonError) -> Value {
    if kind == .data, Value.self == Data.self { return unsafeBitCast(bytes, to: Value.self) }
    if kind == .data, Value.self == Data?.self { return unsafeBitCast(Optional(bytes), to: Value.self) }
    if kind == .json, let value = Self.scalarValue(bytes, as: Value.self) { return value }
    do {
      guard kind == .json else {
        throw DecodingError.typeMismatch(Value.self, .init(codingPath: [], debugDescription: "raw bytes"))
      }
      return try decoder().decode(Value.self, from: bytes)
    } catch {
      throw LiaisonError(
        .typeMismatch,
        "The value of '\(key.name)' in '\(domain)' cannot be read as \(Value.self) (it was stored as another type). "
          + "Read it with the type it was written with, or overwrite it.")
    }
  }
}
