import Foundation
import Testing

@testable import Liaison

/// What is JSON (RFC 8259) to the store and to `liaison`: the syntax alone, whatever the size of
/// a number or the depth of nesting, and only valid UTF-8.
@Suite("JSON text: its syntax")
struct JSONSyntaxTests {
  @Test(arguments: [
    "0", "-0", "1.5", "-12.5e-3", "1E+2", "1e400", "-1e-400", "true", "false", "null", "\"\"", "\"a\\\"b\\\\\"",
    "\"\\u00e9\\/\\b\\f\\n\\r\\t\"", "\"é ü 日本 🎉\"", "[]", "{}", " [1, 2, [3, {}]] ", "{\"a\": {\"b\": [null]}}",
    "\r\n\t{\r\n\t\"a\" :\t1\r\n}\n",
  ])
  func jsonIsJSON(_ text: String) {
    #expect(JSONText.isValid(Data(text.utf8)))
  }

  @Test(arguments: [
    "", " ", "01", "1.", ".5", "-", "+1", "1e", "1e+", "0x10", "NaN", "Infinity", "tru", "nul", "True", "'a'",
    "\"a", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"a\u{01}b\"", "\"tab\tinside\"", "[1,]", "[,1]", "[1 2]",
    "{\"a\" 1}", "{\"a\":}", "{a: 1}", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "{\"a\": 1,}", "{1: 2}", "[",
    "]", "[1]]", "1 2", "dark", "{} {}",
  ])
  func anythingElseIsNot(_ text: String) {
    #expect(!JSONText.isValid(Data(text.utf8)))
  }

  /// Only valid UTF-8, in strings (the only place bytes past ASCII may stand): no lone
  /// continuation byte, no overlong form, no surrogate, nothing past U+10FFFF, nothing cut short.
  @Test(
    arguments: [
      [0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF0, 0x80, 0x80, 0x80],
      [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xC3], [0xE2, 0x82], [0xFE, 0xFF],
    ] as [[UInt8]])
  func bytesThatAreNotUTF8AreNot(_ bytes: [UInt8]) {
    #expect(!JSONText.isValid([0x22] + bytes + [0x22]))
    #expect(JSONText.isValid([0x22, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x8E, 0x89, 0x22]))
  }

  /// Depth costs memory, not the stack: 200,000 levels are read (a recursive reader would
  /// overflow its stack), and one bracket too many or too few is refused.
  @Test func nestingOfAnyDepthIsJSON() {
    let depth = 200_000
    let arrays = Array(repeating: UInt8(ascii: "["), count: depth) + Array(repeating: UInt8(ascii: "]"), count: depth)
    #expect(JSONText.isValid(arrays))
    #expect(!JSONText.isValid(arrays.dropLast()))
    #expect(!JSONText.isValid(arrays + [UInt8(ascii: "]")]))
    let objects = String(repeating: "{\"a\":", count: depth) + "1" + String(repeating: "}", count: depth)
    #expect(JSONText.isValid(Data(objects.utf8)))
  }

  /// Whatever `JSONSerialization` reads is JSON here too.
  @Test func whatJSONSerializationReadsIsJSON() throws {
    for text in [
      "{\"b\":[1,2.5,\"x\",true,null],\"a\":{}}", "\"\\ud83c\\udf89\"", "-0.0e-5000", "123456789012345678901234",
    ] {
      _ = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
      #expect(JSONText.isValid(Data(text.utf8)), "\(text)")
    }
  }
}
