import Foundation
import Liaison
import Testing

/// The JSON that a `set` writes for the commonest types without `JSONEncoder` reads back, with
/// `JSONDecoder`, as exactly the value written, as `JSONEncoder`'s output does.
@Suite("Stored values written without JSONEncoder")
struct StoredValueTests {
  private func roundTrip<Value: Codable & Equatable>(_ value: Value) throws {
    let stored = try StoredValue(encoding: value, with: JSONEncoder(), what: "a test value")
    #expect(stored.kind == .json)
    #expect(StoredValue.scalarJSON(value) != nil, "\(value) took the encoder's path")
    #expect(try JSONDecoder().decode(Value.self, from: stored.bytes) == value, "\(value) read back otherwise")
    // Read directly too, except strings with escapes and numbers with an exponent, which
    // JSONDecoder reads.
    let direct = StoredValue.scalarValue(stored.bytes, as: Value.self)
    let leftToTheDecoder =
      stored.bytes.contains(UInt8(ascii: "\\"))
      || (Value.self == Double.self && stored.bytes.contains(UInt8(ascii: "e")))
    #expect(direct == value || (direct == nil && leftToTheDecoder), "\(value) read back")
  }

  /// The direct read of a scalar agrees with `JSONDecoder` on every text, or leaves it to it.
  private func readsAsTheDecoderDoes<Value: Decodable & Equatable>(_ text: String, as type: Value.Type) {
    guard let direct = StoredValue.scalarValue(Data(text.utf8), as: Value.self) else { return }
    #expect(direct == (try? JSONDecoder().decode(Value.self, from: Data(text.utf8))), "'\(text)' as \(Value.self)")
  }

  @Test(arguments: [
    "0", "-0", "00", "01", "-", "1.0", "1e2", "1E+2", "-1.5e-3", ".5", "5.", "1e", "+1", " 1", "1 ",
    "9223372036854775807",
    "9223372036854775808", "-9223372036854775809", "18446744073709551615", "true", "false", "True", "null", "\"\"",
    "\"a\"", "\"a\\\"b\"", "\"\\u0041\"", "\"é\"", "\"", "\"\u{1}\"", "1e400", "-1e400", "0.1", "0E8", "0e8",
  ])
  func directReadsAgreeWithJSONDecoder(_ text: String) {
    readsAsTheDecoderDoes(text, as: Int.self)
    readsAsTheDecoderDoes(text, as: Int64.self)
    readsAsTheDecoderDoes(text, as: UInt64.self)
    readsAsTheDecoderDoes(text, as: Double.self)
    readsAsTheDecoderDoes(text, as: Bool.self)
    readsAsTheDecoderDoes(text, as: String.self)
  }

  @Test func invalidUTF8InAStringIsLeftToTheDecoder() {
    #expect(StoredValue.scalarValue(Data([0x22, 0xFF, 0x22]), as: String.self) == nil)
  }

  @Test(arguments: [
    "", "plain", "quote \" and backslash \\", "slash / and tab \t", "\u{0}\u{1}\u{1F} controls", "new\nline\r",
    "é, 漢字, 🚀 and a combining e\u{301}", "\u{7F} delete, \u{2028} line separator",
  ])
  func stringsReadBackAsWritten(_ string: String) throws {
    try roundTrip(string)
  }

  @Test func numbersAndBooleansReadBackAsWritten() throws {
    for int in [0, 1, -1, Int.max, Int.min] { try roundTrip(int) }
    for int in [Int64.max, Int64.min] { try roundTrip(int) }
    for int in [UInt64.max, 0] { try roundTrip(int) }
    for double in [0.0, -0.0, 1.5, -2.25e-300, Double.leastNonzeroMagnitude, Double.greatestFiniteMagnitude, 0.1, 1e21]
    {
      try roundTrip(double)
    }
    try roundTrip(true)
    try roundTrip(false)
  }

  @Test func aValueThatIsNotFiniteIsLeftToTheEncoderWhichRefusesIt() {
    #expect(StoredValue.scalarJSON(Double.nan) == nil)
    #expect(StoredValue.scalarJSON(Double.infinity) == nil)
    #expect(throws: (any Error).self) {
      try StoredValue(encoding: Double.infinity, with: JSONEncoder(), what: "infinity")
    }
  }
}

/// JSON text given as such (`liaison defaults write`, `liaison send`) is checked to its end:
/// `JSONDecoder` reads a number or a string only when it is decoded, so a check that decoded less
/// would let `01` or `"\x"` through, at the top or deep inside.
@Suite("JSON text given as such")
struct JSONTextTests {
  @Test(arguments: [
    "1", "-0", "1e-300", "123456789012345678901234567890", " 1 ", "\"text\"", "null", "true", "{}", "[]",
    #"[1, "two", {"three": [null, false, 3.5]}]"#, #"{"a": 1, "a": 2}"#, #""\u00e9\n""#,
  ])
  func jsonTextIsAccepted(_ text: String) throws {
    #expect(try StoredValue(json: Data(text.utf8), what: "a test value").bytes == Data(text.utf8))
  }

  @Test(arguments: [
    "", " ", "nul", "01", "1.", ".5", "NaN", "Infinity", "1 2", "[", "'a'", "/*c*/1", #""\x""#, #""\ud800""#,
    "\"\u{1}\"", #"[1, "\q"]"#, #"{"a": {"b": 01}}"#, #"{"a": [true, "\x"]}"#,
  ])
  func textThatIsNotJSONIsRefused(_ text: String) {
    #expect(throws: LiaisonError.self) { try StoredValue(json: Data(text.utf8), what: "a test value") }
  }
}
