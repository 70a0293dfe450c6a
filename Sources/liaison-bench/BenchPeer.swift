import ChildProcesses
import Foundation
import KernelLockTable

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A second process for the cross-process scenarios: this program started again as
/// `liaison-bench --peer ROLE ARGUMENTS…`, talking over its standard input and output with
/// single bytes and 8-byte timestamps.
final class BenchPeer {
  private let role: String
  private let child: ChildProcess

  /// Starts the peer and waits (at most 60 s) for its "ready" byte; a peer that fails at start is
  /// an error, not a hang.
  /// `launcher` wraps the peer's command (to run it in a network namespace).
  init(_ role: String, _ arguments: [String] = [], launcher: ([String]) -> [String] = { $0 }) throws {
    self.role = role
    let command = launcher([Bundle.main.executablePath ?? CommandLine.arguments[0], "--peer", role] + arguments)
    child = try ChildProcess(command[0], Array(command.dropFirst()))
    var ready = pollfd(fd: child.outputDescriptor!, events: Int16(POLLIN), revents: 0)
    var byte: UInt8 = 0
    // (Not readBytes: at the end of input it ends this process quietly, as a peer should.)
    guard poll(&ready, 1, 60_000) == 1, read(ready.fd, &byte, 1) == 1, byte == UInt8(ascii: "r") else {
      child.kill(SIGKILL)
      throw BenchError("the \(role) peer did not start within 60 s (see its errors above)")
    }
  }

  deinit { _ = stop() }

  /// Closes the peer's input (it ends when it has finished what it was doing) and waits for it.
  ///
  /// - Returns: how it ended, when that was not a clean exit.
  func stop() -> String? {
    child.closeInput()
    let ending = child.wait()
    return ending == .exited(0) ? nil : describe(ending)
  }

  /// ``stop()``, but a peer that has not ended `seconds` after its input closed is killed with
  /// SIGKILL, and that is reported.
  func stop(within seconds: Double) -> String? {
    child.closeInput()
    let deadline = now() + UInt64(seconds * 1e9)
    while !child.hasExited && now() < deadline { usleep(10_000) }
    if !child.hasExited {
      child.kill(SIGKILL)
      child.wait()
      return "the \(role) peer did not end within \(seconds) s of being asked to stop (killed)"
    }
    let ending = child.wait()
    return ending == .exited(0) ? nil : describe(ending)
  }

  /// Sends SIGKILL and waits for the death.
  ///
  /// - Returns: when the signal was sent; or, when the peer had already ended by itself (an
  ///   error, a crash), how it ended.
  func kill() -> (sentAt: UInt64, endedByItself: String?) {
    if child.hasExited { return (now(), describe(child.wait())) }
    let sentAt = now()
    child.kill(SIGKILL)
    child.wait()
    return (sentAt, nil)
  }

  private func describe(_ ending: Termination) -> String { "the \(role) peer ended by itself: \(ending)" }

  func send(_ byte: UInt8) { writeBytes(child.inputDescriptor!, [byte]) }
  func sendTimestamp(_ value: UInt64) { writeBytes(child.inputDescriptor!, encodeTimestamp(value)) }
  func readByte() -> UInt8 { readBytes(child.outputDescriptor!, 1)[0] }
  func readTimestamp() -> UInt64 { decodeTimestamp(readBytes(child.outputDescriptor!, 8)) }
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

/// Waits until the kernel lists `count` blocked `flock` waiters, so that a release is measured
/// against waiters really asleep in the kernel (at most 5 s). Where the kernel's lock table
/// cannot be read, pauses 2 ms instead.
func waitForBlockedWaiters(_ count: Int = 1) {
  let deadline = now() + 5_000_000_000
  while now() < deadline {
    guard let waiters = try? KernelLocks.blockedWaiterCount() else {
      usleep(2_000)
      return
    }
    if waiters >= count { return }
    usleep(50)  // not a spin: on 2 cores that would take the CPU from the waiters
  }
}

/// The peer of `floor.pipe-to-async`: a thread reads each timestamp from the pipe and yields it
/// into a stream; a task answers each with the time since it was written.
private func readIntoAsync(input: CInt, output: CInt) -> Never {
  let (stream, continuation) = AsyncStream.makeStream(of: UInt64.self)
  Task.detached {
    for await sentAt in stream { writeBytes(output, encodeTimestamp(now() &- sentAt)) }
  }
  writeBytes(output, [UInt8(ascii: "r")])
  while true {  // this thread is the reader; readBytes ends the process when the input closes
    continuation.yield(decodeTimestamp(readBytes(input, 8)))
  }
}

#if os(Linux)
  /// The peer of `floor.inotify-file`: a thread waits in `poll` for inotify to report a write of
  /// the file, reads the file, and answers with the time since the timestamp it holds.
  private func readThroughInotify(path: String, input: CInt, output: CInt) -> Never {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    let watcher = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
    precondition(fd >= 0 && watcher >= 0 && inotify_add_watch(watcher, path, UInt32(IN_MODIFY)) >= 0)
    Thread.detachNewThread {
      var events = [UInt8](repeating: 0, count: 4096)
      var record = [UInt8](repeating: 0, count: 32)
      while true {
        var ready = pollfd(fd: watcher, events: Int16(POLLIN), revents: 0)
        _ = poll(&ready, 1, -1)
        while read(watcher, &events, events.count) > 0 {}
        _ = pread(fd, &record, 32, 0)
        writeBytes(output, encodeTimestamp(now() &- decodeTimestamp(Array(record[0..<8]))))
      }
    }
    serveUntilInputCloses(input: input, output: output)
  }
#endif

/// The peers' side of the floors and scenarios.
enum PeerRole {
  static func run(_ role: String, _ arguments: [String]) throws -> Never {
    let input = FileHandle.standardInput.fileDescriptor
    let output = FileHandle.standardOutput.fileDescriptor
    switch role {
    case "echo":
      writeBytes(output, [UInt8(ascii: "r")])
      while true { writeBytes(output, readBytes(input, 1)) }
    case "async-reader":
      readIntoAsync(input: input, output: output)
    #if os(Linux)
      case "inotify-reader":
        readThroughInotify(path: arguments[0], input: input, output: output)
    #endif
    case "lock-holder":
      try LockScenarios.holdAndRelease(container: arguments[0], name: arguments[1], input: input, output: output)
    case "lock-keeper":
      try CrashScenarios.keepLock(container: arguments[0], name: arguments[1], input: input, output: output)
    case "flock-keeper":
      CrashScenarios.keepFlock(path: arguments[0], input: input, output: output)
    case "seed-holder":
      LockScenarios.seedHoldAndRelease(path: arguments[0], input: input, output: output)
    case "signal-observer":
      try SignalScenarios.observe(
        container: arguments[0], name: arguments[1], mode: arguments[2], input: input, output: output)
    case "defaults-writer":
      try DefaultsScenarios.write(container: arguments[0], domain: arguments[1], input: input, output: output)
    case "defaults-observer":
      try DefaultsScenarios.observe(container: arguments[0], domain: arguments[1], input: input, output: output)
    case "model-observer":
      guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { throw BenchError("no Observation") }
      try ModelScenarios.observe(container: arguments[0], domain: arguments[1], input: input, output: output)
    #if canImport(SwiftUIModel)
      case "view-observer":
        try ViewScenarios.observe(container: arguments[0], domain: arguments[1], input: input, output: output)
    #endif
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
    #if Postgres
      case "postgres-chaos-worker":
        try PostgresChaos.work(arguments)
    #endif
    case "claimer":
      try PresenceScenarios.claimAndWait(container: arguments[0], name: arguments[1], input: input, output: output)
    case _ where role.hasPrefix("pg-"):
      try PostgresScenarios.peer(role, arguments, input: input, output: output)
    default:
      fatalError("unknown peer role \(role)")
    }
  }
}
