// The floors: what the kernel costs without Liaison, measured in the same run as the scenarios.

import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

enum Floor {
  /// `floor.pipe-half-rtt`: half of one ping-pong round trip over a pipe to another process.
  /// Returns a sampler; each call is one sample in nanoseconds.
  static func pipeHalfRoundTrip() throws -> () -> Double {
    let echo = try BenchPeer("echo")
    return {
      let start = now()
      echo.send(1)
      _ = echo.readByte()
      return Double(now() - start) / 2
    }
  }

  /// `floor.flock`: one exclusive `flock` and its unlock on a descriptor already open.
  static func flockPair(path: String, batch: Int) -> () -> Double {
    let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    precondition(fd >= 0, "cannot open \(path)")
    return {
      timeBatch(batch) {
        flock(fd, LOCK_EX)
        flock(fd, LOCK_UN)
      }
    }
  }

  /// `floor.probe`: open the file, try a shared lock without blocking, close.
  static func probe(path: String, batch: Int) -> () -> Double {
    {
      timeBatch(batch) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        _ = flock(fd, LOCK_SH | LOCK_NB)
        close(fd)
      }
    }
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
    case "claimer":
      try PresenceScenarios.claimAndWait(container: arguments[0], name: arguments[1], input: input, output: output)
    default:
      fatalError("unknown peer role \(role)")
    }
  }
}
