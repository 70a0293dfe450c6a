/// A validated name for a lock, presence, signal, mailbox or domain.
///
/// Names become file names inside the container, so they follow one rule: 1 to 128 characters
/// from `A-Z a-z 0-9 . _ -`, not starting with a dot. Every API that takes a name as a `String`
/// validates it with this type and throws ``LiaisonError/Code/invalidName`` when it breaks the
/// rule; no name ever reaches a path unchecked.
///
/// ```swift
/// let name = try LiaisonName("token-refresh")   // fine
/// _ = try LiaisonName("../etc/passwd")         // throws: the message states the rule
/// ```
public struct LiaisonName: Hashable, Sendable, CustomStringConvertible {
  /// The longest name allowed, in characters.
  public static let maximumLength = 128
  /// The naming rule, as error messages state it.
  public static let rule =
    "a name is 1 to 128 characters from A-Z, a-z, 0-9, '.', '_' and '-', and does not start with '.'"

  /// The name's text, guaranteed to follow ``rule``.
  public let rawValue: String

  /// Validates `text` against the naming rule.
  ///
  /// - Throws: ``LiaisonError`` with code ``LiaisonError/Code/invalidName`` and a message that
  ///   says what was wrong and states the rule.
  public init(_ text: String) throws(LiaisonError) {
    if let problem = Self.problem(with: text) {
      throw LiaisonError(.invalidName, "Invalid name \(Self.quoted(text)): \(problem); \(Self.rule).")
    }
    rawValue = text
  }

  /// A name of Liaison's own for something that belongs to `name` (a mailbox's receive lock on a
  /// server): `KIND:NAME`, which the rule refuses, so that no name a user gives can be the same.
  /// Never used as a path.
  package init(reserved kind: String, _ name: LiaisonName) {
    rawValue = kind + ":" + name.rawValue
  }

  /// The name of the lock under which `key` of the defaults domain `domain` is refreshed once
  /// across processes, on every backend: a hash of the two (both may be 128 characters long), so
  /// two keys that share a hash only refresh one at a time.
  package static func refreshLock(domain: LiaisonName, key: LiaisonName) -> LiaisonName {
    let hash = fnv1a(Array(domain.rawValue.utf8) + [0] + Array(key.rawValue.utf8))
    return LiaisonName(unchecked: "defaults.refresh." + String(hash, radix: 16))
  }

  /// Wraps a name made by Liaison itself, which follows the rule by construction.
  private init(unchecked rawValue: String) {
    self.rawValue = rawValue
  }

  /// Wraps a file name found on disk, or `nil` when it does not follow the rule (a stray file).
  package init?(fileName: String) {
    guard Self.problem(with: fileName) == nil else { return nil }
    rawValue = fileName
  }

  public var description: String { rawValue }

  private static func problem(with text: String) -> String? {
    let bytes = Array(text.utf8)
    if bytes.isEmpty { return "it is empty" }
    if bytes.count > maximumLength { return "it is \(bytes.count) bytes long" }
    if bytes[0] == UInt8(ascii: ".") { return "it starts with '.'" }
    for byte in bytes where !isAllowed(byte) {
      return "it contains \(describe(byte))"
    }
    return nil
  }

  private static func isAllowed(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
      return true
    default:
      return false
    }
  }

  private static func describe(_ byte: UInt8) -> String {
    switch byte {
    case 0: return "a NUL byte"
    case UInt8(ascii: "/"): return "'/'"
    case UInt8(ascii: " "): return "a space"
    case 0x21...0x7E: return "'\(Character(Unicode.Scalar(byte)))'"
    default: return "the byte 0x\(String(byte, radix: 16, uppercase: true))"
    }
  }

  /// The text as shown in messages: escaped, and shortened when long.
  private static func quoted(_ text: String) -> String {
    var shown = ""
    for scalar in text.unicodeScalars.prefix(40) {
      shown += scalar.escaped(asASCII: true)
    }
    if text.unicodeScalars.count > 40 { shown += "…" }
    return "\"\(shown)\""
  }
}
