/// Whether bytes are JSON text (RFC 8259): one value, with white space around it, in UTF-8, and
/// no `\u` escape of half a surrogate pair (which RFC 8259 leaves unpredictable and
/// `JSONDecoder` refuses).
///
/// A syntax check only, which builds no value: a number of any size (`1e400`) and nesting of any
/// depth are JSON, where a parser that builds values refuses them (`JSONSerialization` stops at
/// 512 levels, and a `Double` cannot hold `1e400`). It keeps its own stack of open arrays and
/// objects, never the machine's, so depth costs memory (a bit a level), not a crash.
///
/// `package`: the store checks what it is given and what it reads with it, and the `liaison`
/// command decides with it whether text is JSON.
package enum JSONText {
  /// Whether `bytes` are one JSON value, with nothing but white space around it.
  package static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
    var scanner = Scanner(Array(bytes))
    return scanner.scan()
  }

  private struct Scanner {
    let bytes: [UInt8]
    var index = 0
    /// The open containers, innermost last: `true` for an object.
    var open: [Bool] = []

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipSpace() {
      while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }

    mutating func take(_ byte: UInt8) -> Bool {
      guard current == byte else { return false }
      index += 1
      return true
    }

    mutating func scan() -> Bool {
      skipSpace()
      // Each turn reads one value (opening the arrays and objects it starts with, down to its
      // first scalar or empty container), then what closes or follows it.
      while true {
        while true {
          guard let byte = current else { return false }
          guard byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") else {
            guard scalar() else { return false }
            break
          }
          let isObject = byte == UInt8(ascii: "{")
          index += 1
          skipSpace()
          if take(isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) { break }
          open.append(isObject)
          if isObject { guard key() else { return false } }
        }
        while true {
          skipSpace()
          guard let inObject = open.last else { return index == bytes.count }
          if take(UInt8(ascii: ",")) {
            skipSpace()
            if inObject { guard key() else { return false } }
            break
          }
          guard take(inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { return false }
          open.removeLast()
        }
      }
    }

    /// An object's key and its colon.
    mutating func key() -> Bool {
      guard current == UInt8(ascii: "\""), string() else { return false }
      skipSpace()
      guard take(UInt8(ascii: ":")) else { return false }
      skipSpace()
      return true
    }

    /// A string, a number, `true`, `false` or `null`.
    mutating func scalar() -> Bool {
      switch current {
      case UInt8(ascii: "\""): string()
      case UInt8(ascii: "t"): word("true")
      case UInt8(ascii: "f"): word("false")
      case UInt8(ascii: "n"): word("null")
      default: number()
      }
    }

    mutating func word(_ word: StaticString) -> Bool {
      let count = word.utf8CodeUnitCount
      guard bytes.count - index >= count else { return false }
      let matches = word.withUTF8Buffer { expected in
        expected.indices.allSatisfy { bytes[index + $0] == expected[$0] }
      }
      index += count
      return matches
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    mutating func number() -> Bool {
      _ = take(UInt8(ascii: "-"))
      if take(UInt8(ascii: "0")) {
        // No digit may follow a leading zero.
      } else {
        guard digits() else { return false }
      }
      if take(UInt8(ascii: ".")) { guard digits() else { return false } }
      if take(UInt8(ascii: "e")) || take(UInt8(ascii: "E")) {
        if !take(UInt8(ascii: "+")) { _ = take(UInt8(ascii: "-")) }
        guard digits() else { return false }
      }
      return true
    }

    /// One digit or more.
    mutating func digits() -> Bool {
      let start = index
      while let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { index += 1 }
      return index > start
    }

    /// A string: no control character, escapes as JSON has them, and valid UTF-8.
    mutating func string() -> Bool {
      index += 1  // the opening quote
      while let byte = current {
        index += 1
        switch byte {
        case UInt8(ascii: "\""): return true
        case UInt8(ascii: "\\"):
          guard let escaped = current else { return false }
          index += 1
          switch escaped {
          case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            continue
          case UInt8(ascii: "u"):
            guard let unit = hexUnit() else { return false }
            switch unit {
            case 0xD800...0xDBFF:
              // A high surrogate stands only before a low one: `JSONDecoder` refuses it alone.
              guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hexUnit(), (0xDC00...0xDFFF) ~= low
              else { return false }
            case 0xDC00...0xDFFF: return false
            default: break
            }
          default: return false
          }
        case 0..<0x20: return false
        case 0x80...: guard utf8Scalar(startingWith: byte) else { return false }
        default: continue
        }
      }
      return false
    }

    /// The four hexadecimal digits of a `\u` escape, as a UTF-16 code unit.
    mutating func hexUnit() -> UInt16? {
      var unit: UInt16 = 0
      for _ in 0..<4 {
        guard let byte = current else { return nil }
        let digit: UInt8
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
        default: return nil
        }
        unit = unit << 4 | UInt16(digit)
        index += 1
      }
      return unit
    }

    /// The rest of a UTF-8 scalar whose first byte, `lead` (0x80 or more), was read: no overlong
    /// form, no surrogate, nothing past U+10FFFF.
    mutating func utf8Scalar(startingWith lead: UInt8) -> Bool {
      let (count, low, high): (Int, UInt8, UInt8)
      switch lead {
      case 0xC2...0xDF: (count, low, high) = (1, 0x80, 0xBF)
      case 0xE0: (count, low, high) = (2, 0xA0, 0xBF)
      case 0xE1...0xEC, 0xEE...0xEF: (count, low, high) = (2, 0x80, 0xBF)
      case 0xED: (count, low, high) = (2, 0x80, 0x9F)
      case 0xF0: (count, low, high) = (3, 0x90, 0xBF)
      case 0xF1...0xF3: (count, low, high) = (3, 0x80, 0xBF)
      case 0xF4: (count, low, high) = (3, 0x80, 0x8F)
      default: return false
      }
      // The second byte has the range above; the others are any continuation byte.
      for position in 0..<count {
        guard let next = current, next >= (position == 0 ? low : 0x80), next <= (position == 0 ? high : 0xBF)
        else { return false }
        index += 1
      }
      return true
    }
  }
}
