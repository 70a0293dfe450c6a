/// The text rules of the `liaison` command: what it takes as text, and how it shows text that
/// came from data.
///
/// They live here, not in the executable, so that the tests and the fuzzer (`LiaisonFuzz`) run
/// the very code the command runs.
package enum CommandLineText {
  /// The offset of the first byte of `bytes` that is not part of valid UTF-8, or `nil` when all
  /// of them are.
  ///
  /// The command stores text exactly as given or refuses it: it never decodes bytes that are not
  /// UTF-8 into U+FFFD replacement characters.
  package static func firstNonUTF8Offset(_ bytes: some Sequence<UInt8>) -> Int? {
    var decoder = UTF8()
    var iterator = bytes.makeIterator()
    var offset = 0
    while true {
      switch decoder.decode(&iterator) {
      case .scalarValue(let scalar): offset += UTF8.width(scalar)
      case .emptyInput: return nil
      case .error: return offset
      }
    }
  }

  /// `text` with every control character shown as a visible escape: `\n`, `\r`, `\t`, `\xHH`
  /// for the other C0 controls and DEL, `\u{HHHH}` for the C1 controls, the line and paragraph
  /// separators and the bidirectional overrides and isolates.
  ///
  /// The text output of `peek`, `receive`, `presence`, `status` and `defaults` shows every field
  /// that came from data (an id, a sender, a holder's info, a payload, a name read from the
  /// store) through this, so that each record stays on its line: a field cannot start a line of
  /// its own, move the cursor, or reorder what follows it. A backslash is shown as it is; `--json`
  /// output gives every value exactly.
  package static func visible(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: needsEscape) else { return text }
    var shown = ""
    shown.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
    for scalar in text.unicodeScalars {
      guard needsEscape(scalar) else {
        shown.unicodeScalars.append(scalar)
        continue
      }
      switch scalar {
      case "\n": shown += "\\n"
      case "\r": shown += "\\r"
      case "\t": shown += "\\t"
      case "\u{0}"..."\u{7F}": shown += "\\x" + hex(scalar.value, digits: 2)
      default: shown += "\\u{" + hex(scalar.value, digits: 4) + "}"
      }
    }
    return shown
  }

  /// Whether `visible(_:)` escapes `scalar`.
  private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.value {
    case 0x00...0x1F, 0x7F...0x9F: true  // C0, DEL, C1
    case 0x2028, 0x2029: true  // line and paragraph separators
    case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true  // bidirectional controls
    default: false
    }
  }

  private static func hex(_ value: UInt32, digits: Int) -> String {
    let text = String(value, radix: 16, uppercase: false)
    return String(repeating: "0", count: max(0, digits - text.count)) + text
  }
}
