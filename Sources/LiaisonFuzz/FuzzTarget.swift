#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One thing the fuzzer exercises: a function that takes any bytes, runs the code under test on
/// them, and stops the process (see ``require(_:_:)``) when an invariant breaks.
///
/// To add a target, write a `static let` like those in this folder, add it to ``all``, and give
/// it seed inputs in `Corpus/NAME/` if it has a file format (optional).
struct FuzzTarget: Sendable {
  /// The name given on the command line: `--target=NAME`.
  let name: String
  /// What it checks, for `--list`.
  let summary: String
  /// Runs one input; returns only if every invariant held.
  let run: @Sendable ([UInt8]) -> Void

  /// Every target, in the order `--list` prints them and CI runs them.
  static let all: [FuzzTarget] = [
    .liaisonName, .signalFile, .presenceRecord, .storedValue, .mailboxRow, .commandLine,
  ]

  /// The target named by `--target=NAME` in `arguments`. With `--list`, prints every target and
  /// exits; without a known target, prints the usage and exits with status 64.
  static func chosen(by arguments: [String]) -> FuzzTarget {
    if arguments.contains("--list") {
      for target in all { print("\(target.name)\t\(target.summary)") }
      exit(0)
    }
    let prefix = "--target="
    let name = arguments.last { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    if let target = all.first(where: { $0.name == name }) { return target }
    let names = all.map(\.name).joined(separator: ", ")
    printError("usage: LiaisonFuzz --target=NAME [ARGUMENTS…] (NAME: \(names)); LiaisonFuzz --list")
    exit(64)
  }
}

/// Stops the process with `message` unless `condition` holds: the fuzzer records the input that
/// did it as a crash.
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
  if condition { return }
  printError("LiaisonFuzz: invariant broken: \(message())")
  abort()
}

/// Writes a line to standard error.
func printError(_ line: String) {
  let bytes = Array((line + "\n").utf8)
  _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// A fuzzer's bytes read as a sequence of values, front to back; reads past the end give zeros.
struct FuzzInput {
  private var bytes: ArraySlice<UInt8>

  init(_ bytes: [UInt8]) { self.bytes = bytes[...] }

  mutating func byte() -> UInt8 { bytes.popFirst() ?? 0 }

  mutating func integer<T: FixedWidthInteger>(_: T.Type) -> T {
    var value = T.zero
    for _ in 0..<MemoryLayout<T>.size { value = value << 8 | T(truncatingIfNeeded: byte()) }
    return value
  }

  /// Up to `count` bytes.
  mutating func bytes(upTo count: Int) -> [UInt8] {
    let taken = Array(bytes.prefix(count))
    bytes = bytes.dropFirst(taken.count)
    return taken
  }

  /// Bytes up to the next NUL (which is consumed) or the end.
  mutating func field() -> [UInt8] {
    let taken = Array(bytes.prefix { $0 != 0 })
    bytes = bytes.dropFirst(taken.count + 1)
    return taken
  }

  /// Every byte left.
  mutating func rest() -> [UInt8] {
    defer { bytes = [] }
    return Array(bytes)
  }
}
