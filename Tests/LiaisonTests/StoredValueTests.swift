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
