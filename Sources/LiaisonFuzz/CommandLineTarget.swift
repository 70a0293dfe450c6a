import Foundation
import Liaison
import LiaisonCommandLine

extension FuzzTarget {
  /// What the `liaison` command parses: a `--timeout`, a `--state`, the value of `defaults write`.
  /// The first byte chooses the parser, the rest is the argument's text.
  static let commandLine = FuzzTarget(
    name: "command-line", summary: "CommandLineValue: --timeout, --state and the value of defaults write"
  ) { bytes in
    var input = FuzzInput(bytes)
    let parser = input.byte() % 3
    let text = String(decoding: input.rest(), as: UTF8.self)
    switch parser {
    case 0: requireTimeout(text)
    case 1: requireState(text)
    default: requireDefaultsJSON(text)
    }
  }
}

/// A timeout is accepted exactly when it is a number of seconds from 0 to 1e9, and becomes that
/// duration.
private func requireTimeout(_ text: String) {
  let seconds = Double(text)
  let inRange = seconds.map { $0 >= 0 && $0 <= CommandLineValue.maximumTimeoutSeconds } ?? false
  do {
    let timeout = try CommandLineValue.timeout(text)
    require(inRange, "accepted the timeout \(text.debugDescription)")
    require(timeout >= .zero && timeout <= .seconds(1e9), "\(text.debugDescription) became \(timeout)")
  } catch {
    require(!inRange, "refused the timeout \(text.debugDescription)")
    require(error.code == .invalidArgument, "a bad timeout is \(error.code), not invalidArgument")
  }
}

/// A state is accepted exactly when it is decimal digits worth at most 2^64-1, after an optional
/// `+` (or `-` before a zero, which the standard library reads as 0), checked against a
/// digit-by-digit reading.
private func requireState(_ text: String) {
  var expected: UInt64? = nil
  let sign = text.utf8.first.flatMap { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") ? $0 : nil }
  let digits = sign == nil ? text.utf8[...] : text.utf8.dropFirst()
  if !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
    expected = 0
    for digit in digits {
      let (times10, overflow1) = expected!.multipliedReportingOverflow(by: 10)
      let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
      if overflow1 || overflow2 {
        expected = nil
        break
      }
      expected = sum
    }
    if sign == UInt8(ascii: "-") && expected != 0 { expected = nil }
  }
  do {
    let state = try CommandLineValue.state(text)
    require(state == expected, "\(text.debugDescription) read as \(state), expected \(String(describing: expected))")
    require((try? CommandLineValue.state(String(state))) == state, "\(state) does not read back as itself")
  } catch {
    require(expected == nil, "refused the state \(text.debugDescription)")
    require(error.code == .invalidArgument, "a bad state is \(error.code), not invalidArgument")
  }
}

/// The value of `defaults write` is always JSON: the text itself when it is JSON, else a JSON
/// string that reads back as the text; or refused, only when it is JSON that `JSONSerialization`
/// cannot read.
private func requireDefaultsJSON(_ text: String) {
  let json: Data
  do {
    json = try CommandLineValue.json(text)
  } catch {
    require(JSONText.isValid(Data(text.utf8)), "refused \(text.debugDescription), which is not JSON: \(error)")
    return
  }
  require(
    (try? JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed])) != nil,
    "\(text.debugDescription) became something that is not JSON")
  if json != Data(text.utf8) {
    let string = try? JSONDecoder().decode(String.self, from: json)
    require(
      string == text, "\(text.debugDescription) was stored as a string that reads back as \(String(describing: string))"
    )
  }
}
