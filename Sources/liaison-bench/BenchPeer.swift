import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A second process for the cross-process scenarios: this program started again as
/// `liaison-bench --peer ROLE ARGUMENTS…`, talking over its standard input and output with
/// single bytes and 8-byte timestamps.
final class BenchPeer {
  private let process = Process()
  private let toPeer = Pipe()
  private let fromPeer = Pipe()

  init(_ role: String, _ arguments: [String] = []) throws {
    process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0])
    process.arguments = ["--peer", role] + arguments
    process.standardInput = toPeer
    process.standardOutput = fromPeer
    try process.run()
    precondition(readByte() == UInt8(ascii: "r"), "the \(role) peer did not start")
  }

  deinit {
    try? toPeer.fileHandleForWriting.close()
    process.waitUntilExit()
  }

  func send(_ byte: UInt8) { writeBytes(toPeer.fileHandleForWriting.fileDescriptor, [byte]) }
  func readByte() -> UInt8 { readBytes(fromPeer.fileHandleForReading.fileDescriptor, 1)[0] }
  func readTimestamp() -> UInt64 { decodeTimestamp(readBytes(fromPeer.fileHandleForReading.fileDescriptor, 8)) }
}

func writeBytes(_ fd: CInt, _ bytes: [UInt8]) {
  var written = 0
  while written < bytes.count {
    let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, bytes.count - written) }
    precondition(n > 0 || errno == EINTR, "write to peer failed")
    if n > 0 { written += n }
  }
}

func readBytes(_ fd: CInt, _ count: Int) -> [UInt8] {
  var buffer = [UInt8](repeating: 0, count: count)
  var filled = 0
  while filled < count {
    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, count - filled) }
    if n == 0 { exit(0) }  // the other side is gone: a peer ends quietly
    precondition(n > 0 || errno == EINTR, "read from peer failed")
    if n > 0 { filled += n }
  }
  return buffer
}

func encodeTimestamp(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
func decodeTimestamp(_ bytes: [UInt8]) -> UInt64 {
  bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
}

/// Waits until the kernel lists `count` blocked `flock` waiters (`->` in `/proc/locks`), so that
/// a release is measured against waiters really asleep in the kernel (at most 5 s). Where
/// `/proc/locks` does not exist, pauses 2 ms instead.
func waitForBlockedWaiters(_ count: Int = 1) {
  let deadline = now() + 5_000_000_000
  while now() < deadline {
    guard let locks = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else {
      usleep(2_000)
      return
    }
    if locks.split(separator: "\n").filter({ $0.contains("-> FLOCK") }).count >= count { return }
    sched_yield()
  }
}

/// The peers' side of the floors and scenarios.
enum PeerRole {
  static func run(_ role: String, _ arguments: [String]) throws -> Never {
    let input = FileHandle.standardInput.fileDescriptor
    let output = FileHandle.standardOutput.fileDescriptor
    switch role {
    case "echo":
      writeBytes(output, [UInt8(ascii: "r")])
      while true { writeBytes(output, readBytes(input, 1)) }
    case "lock-holder":
      try LockScenarios.holdAndRelease(container: arguments[0], name: arguments[1], input: input, output: output)
    case "seed-holder":
      LockScenarios.seedHoldAndRelease(path: arguments[0], input: input, output: output)
    case "signal-observer":
      try SignalScenarios.observe(container: arguments[0], name: arguments[1], input: input, output: output)
    case "defaults-writer":
      try DefaultsScenarios.write(container: arguments[0], domain: arguments[1], input: input, output: output)
    case "defaults-observer":
      try DefaultsScenarios.observe(container: arguments[0], domain: arguments[1], input: input, output: output)
    case "database-observer":
      try DatabaseScenarios.observe(container: arguments[0], name: arguments[1], input: input, output: output)
    case "mailbox-receiver":
      try MailboxScenarios.receive(
        container: arguments[0], name: arguments[1], mode: Array(arguments.dropFirst(2)), input: input, output: output)
    case "lock-contender":
      try ScaleScenarios.contend(
        container: arguments[0], name: arguments[1], cycles: Int(arguments[2])!, input: input, output: output)
    case "lock-waiter":
      try ScaleScenarios.waitForLock(container: arguments[0], name: arguments[1], input: input, output: output)
    case "chaos-worker":
      try Chaos.work(container: arguments[0], log: arguments[1], index: Int(arguments[2])!, seed: UInt64(arguments[3])!)
    case "claimer":
      try PresenceScenarios.claimAndWait(container: arguments[0], name: arguments[1], input: input, output: output)
    default:
      fatalError("unknown peer role \(role)")
    }
  }
}
