import Liaison

extension FuzzTarget {
  /// `LiaisonName`: a name is accepted exactly when it follows the rule, an accepted name is the
  /// text given and validates again to itself, and a refusal is an `invalidName` error that
  /// states the rule.
  static let liaisonName = FuzzTarget(
    name: "name", summary: "LiaisonName accepts exactly the names that follow the rule, and nothing traps"
  ) { bytes in
    let text = String(decoding: bytes, as: UTF8.self)
    // The rule, on the bytes (invalid UTF-8 is never a name: its bytes are outside the alphabet).
    let followsRule =
      !bytes.isEmpty && bytes.count <= LiaisonName.maximumLength && bytes[0] != UInt8(ascii: ".")
      && bytes.allSatisfy { byte in
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
          UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
          true
        default: false
        }
      }
    do throws(LiaisonError) {
      let name = try LiaisonName(text)
      require(followsRule, "accepted a name that breaks the rule: \(bytes)")
      require(name.rawValue == text && name.description == text, "the accepted name is not the text given")
      require((try? LiaisonName(name.rawValue)) == name, "an accepted name does not validate again to itself")
    } catch {
      require(!followsRule, "refused a name that follows the rule: \(bytes)")
      require(error.code == .invalidName, "refused with \(error.code), not invalidName")
      require(error.message.contains(LiaisonName.rule), "the message does not state the rule: \(error.message)")
      // The name is quoted shortened (40 characters at most, escaped), whatever its length.
      require(error.message.utf8.count < 1024, "the message is \(error.message.utf8.count) bytes long")
    }
    // Names read from a folder listing follow the same rule.
    require((LiaisonName(fileName: text) != nil) == followsRule, "a file name is judged otherwise: \(bytes)")
  }
}
