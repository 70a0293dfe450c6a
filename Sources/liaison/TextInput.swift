import Foundation
import LiaisonCommandLine

/// What the command takes as text: arguments and standard input that are UTF-8, used exactly as
/// given. Bytes that are not UTF-8 are refused with ``ExitStatus/dataError``, never replaced
/// (Swift's `String(decoding:as:)` would turn each into U+FFFD and store something else).
enum TextInput {
  /// Refuses the command line when an argument before `--` is not UTF-8. The arguments after
  /// `--` belong to the command that `lock` or `presence claim` runs.
  static func checkArguments() throws(CLIError) {
    for index in 1..<Int(CommandLine.argc) {
      guard let argument = CommandLine.unsafeArgv[index] else { break }
      let bytes = UnsafeBufferPointer(start: argument, count: strlen(argument)).map { UInt8(bitPattern: $0) }
      if bytes == Array("--".utf8) { return }
      if let offset = CommandLineText.firstNonUTF8Offset(bytes) {
        throw notText("Argument \(index)", bytes: bytes, offset: offset)
      }
    }
  }

  /// The value argument of `send` and `defaults write`: `argument` itself, or for `-` the text
  /// on standard input (one trailing newline removed), refused if it is not UTF-8.
  static func valueOrStandardInput(_ argument: String, limit: Int) throws -> String {
    guard argument == "-" else { return argument }
    let bytes = try CommandLineValue.standardInput(limit: limit)
    if let offset = CommandLineText.firstNonUTF8Offset(bytes) {
      throw notText("The value on standard input", bytes: bytes, offset: offset)
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// The non-empty lines of standard input, read to its end (at most 16 MiB), refused if they
  /// are not UTF-8; `what` names them in the error.
  static func lines(ofStandardInput what: String) throws -> [String] {
    let bytes = try CommandLineValue.standardInput(limit: 16 << 20)
    if let offset = CommandLineText.firstNonUTF8Offset(bytes) { throw notText(what, bytes: bytes, offset: offset) }
    return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
  }

  /// The error for `bytes` (described as `what`) whose byte at `offset` is not UTF-8.
  private static func notText(_ what: String, bytes: [UInt8], offset: Int) -> CLIError {
    let byte = String(bytes[offset], radix: 16, uppercase: true)
    return CLIError(
      "\(what) is not UTF-8 text (the byte 0x\(byte) at offset \(offset)). liaison stores text exactly as given "
        + "and never alters it: give UTF-8, or encode the bytes as text first (base64, say: "
        + "`base64 < file | liaison send inbox -`).",
      status: ExitStatus.dataError)
  }
}
