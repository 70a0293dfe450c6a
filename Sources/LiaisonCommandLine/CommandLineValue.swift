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

  /// The value of `liaison defaults write` and the message of `liaison send`, as the JSON to store: `text` itself when it is JSON
  /// (`0.8`, `true`, `{"a": 1}`, `"dark"`), else `text` as a JSON string (`dark` → `"dark"`).
  package static func json(_ text: String) -> Data {
    let json = Data(text.utf8)
    if (try? JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed])) != nil { return json }
    // Encoding a String cannot fail.
    return try! JSONEncoder().encode(text)
  }
}
