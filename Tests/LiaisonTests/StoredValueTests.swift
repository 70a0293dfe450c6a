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
