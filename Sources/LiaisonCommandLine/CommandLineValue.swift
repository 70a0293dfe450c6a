import Foundation
import Liaison

/// The values that the `liaison` command reads from its arguments.
///
/// They are parsed here, not in the executable, so that the tests and the fuzzer (`LiaisonFuzz`)
/// run the very code the command runs. Each parser throws ``LiaisonError/Code/invalidArgument``
/// with a message that says what the value may be.
package enum CommandLineValue {
  /// The longest timeout a command accepts, in seconds (about 31 years).
  package static let maximumTimeoutSeconds: Double = 1e9

  /// A `--timeout`: a number of seconds from 0 to 1e9, fractions allowed (`5`, `0.25`, `1e3`).
  package static func timeout(_ text: String) throws(LiaisonError) -> Duration {
    guard let seconds = Double(text), seconds >= 0, seconds <= maximumTimeoutSeconds else {
      throw LiaisonError(.invalidArgument, "a timeout is a number of seconds from 0 to 1e9.")
    }
    return .seconds(seconds)
  }

  /// A signal's state (`--state`, `--set`): a whole number from 0 to 2^64-1, in decimal.
  package static func state(_ text: String) throws(LiaisonError) -> UInt64 {
    guard let state = UInt64(text) else {
      throw LiaisonError(.invalidArgument, "a state is a whole number from 0 to \(UInt64.max).")
    }
    return state
  }

  /// A signal's sequence (`wait --after`): a whole number from 0 to 2^64-1, in decimal, as
  /// `liaison state NAME --sequence` prints it.
  package static func sequence(_ text: String) throws(LiaisonError) -> UInt64 {
    guard let sequence = UInt64(text) else {
      throw LiaisonError(
        .invalidArgument,
        "a sequence is a whole number from 0 to \(UInt64.max), as `liaison state NAME --sequence` prints it.")
    }
    return sequence
  }

  /// The value of `liaison defaults write` and the message of `liaison send`, as the JSON to
  /// store: `text` itself when it is JSON (`0.8`, `true`, `{"a": 1}`, `"dark"`), else `text` as a
  /// JSON string (`dark` → `"dark"`). Whether it is JSON is decided by its syntax alone
  /// (``/Liaison/JSONText``), so JSON is never turned into a string.
  ///
  /// - Throws: ``LiaisonError/Code/invalidArgument`` for JSON that `liaison` could not show back
  ///   as JSON (`JSONSerialization` reads numbers up to about 1.8e308 and nesting up to 512
  ///   levels): refused rather than stored as a value no read would print.
  package static func json(_ text: String) throws(LiaisonError) -> Data {
    let json = Data(text.utf8)
    guard JSONText.isValid(json) else { return StoredValue.jsonString(text) }
    guard (try? JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed])) != nil else {
      throw LiaisonError(
        .invalidArgument,
        "the value is JSON that liaison cannot read back (a number beyond ±1.8e308, or arrays and objects nested "
          + "deeper than 512 levels). Write it within those bounds, or as a JSON string (quoted) to store the text.")
    }
    return json
  }

  /// The options that say where the commands coordinate, which the user may write before the
  /// subcommand's name: `--container PATH`, `--postgres URL`, `--namespace NAME`.
  package static let placeOptions: Set<String> = ["--container", "--postgres", "--namespace"]

  /// The arguments with every place option (``placeOptions``, as `--option VALUE` or
  /// `--option=VALUE`) that stands before the subcommand's name moved to the end of the
  /// subcommand's own arguments, before any `--`, where the subcommand parses it: `liaison
  /// --container X post s` reads as `liaison post s --container X`.
  ///
  /// - Parameter groups: the names of commands that only group subcommands (`presence`,
  ///   `defaults`): an option after one of them still stands before the subcommand's name.
  package static func movingPlaceOptions(_ arguments: [String], groups: Set<String>) -> [String] {
    var moved: [String] = []
    var rest: [String] = []
    var index = 0
    var inCommandPath = true
    while index < arguments.count {
      let argument = arguments[index]
      if argument == "--" {
        rest += arguments[index...]
        break
      }
      if inCommandPath && placeOptions.contains(argument) && index + 1 < arguments.count {
        moved += [argument, arguments[index + 1]]
        index += 2
        continue
      }
      if inCommandPath, let equals = argument.firstIndex(of: "="), placeOptions.contains(String(argument[..<equals])) {
        moved.append(argument)
        index += 1
        continue
      }
      if !groups.contains(argument) { inCommandPath = false }
      rest.append(argument)
      index += 1
    }
    if moved.isEmpty { return arguments }
    let terminator = rest.firstIndex(of: "--") ?? rest.endIndex
    rest.insert(contentsOf: moved, at: terminator)
    return rest
  }

  /// A `--grace`: how many seconds a command has to end after `SIGTERM` before `SIGKILL`, from 0
  /// to 1e9, fractions allowed.
  package static func grace(_ text: String) throws(LiaisonError) -> Duration {
    guard let seconds = Double(text), seconds >= 0, seconds <= maximumTimeoutSeconds else {
      throw LiaisonError(.invalidArgument, "a grace period is a number of seconds from 0 to 1e9.")
    }
    return .seconds(seconds)
  }

  /// Standard input's bytes, for the value `-` (`liaison send inbox -`, `liaison defaults write
  /// app key -`), with one trailing newline removed, as `$(...)` would. The command then takes
  /// them as text only if they are UTF-8 (``CommandLineText/firstNonUTF8Offset(_:)``).
  package static func standardInput(limit: Int) throws(LiaisonError) -> [UInt8] {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress!, $0.count) }
      if n < 0 && errno == EINTR { continue }
      if n < 0 { throw LiaisonError(.system, "Could not read the value from standard input (errno \(errno)).") }
      if n == 0 { break }
      bytes += chunk.prefix(n)
      if bytes.count > limit {
        throw LiaisonError(
          .invalidArgument, "The value on standard input is longer than \(limit) bytes; send something smaller.")
      }
    }
    if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
    return bytes
  }
}
