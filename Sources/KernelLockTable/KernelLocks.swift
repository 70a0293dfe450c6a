import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The kernel's table of file locks (`/proc/locks` on Linux): one line per lock held, and one
/// per blocked waiter, marked `->`, under the lock it waits for.
///
/// The table is read whole, with `read(2)` until the end of the file. Foundation's
/// `String(contentsOfFile:)` stops after 4,095 bytes of a `/proc` file (whose size reads as 0),
/// about 60 lines, and a machine running the suite, with its peers, databases and other
/// programs, often holds more locks than that: a line further down was never seen, and a test
/// waiting for it timed out.
public enum KernelLocks {
  /// Every line of the table.
  ///
  /// - Throws: where the system has no `/proc/locks` (macOS), or it cannot be read.
  public static func lines() throws -> [Substring] {
    let fd = open("/proc/locks", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else {
      throw KernelLockTableError("cannot open /proc/locks (errno \(errno)): no kernel lock table to read")
    }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16_384)
    while true {
      let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if count < 0 {
        if errno == EINTR { continue }
        throw KernelLockTableError("cannot read /proc/locks: errno \(errno)")
      }
      if count == 0 { break }
      bytes += chunk[..<count]
    }
    return String(decoding: bytes, as: UTF8.self).split(separator: "\n")
  }

  /// Whether process `pid` has a `flock` wait asleep in the kernel.
  public static func hasBlockedWaiter(pid: Int32) throws -> Bool {
    try lines().contains { $0.contains("-> FLOCK") && $0.contains(" \(pid) ") }
  }

  /// How many `flock` waits, of any process, are asleep in the kernel.
  public static func blockedWaiterCount() throws -> Int {
    try lines().count { $0.contains("-> FLOCK") }
  }

  /// The lines about process `pid`'s own locks and waits.
  public static func lines(ofProcess pid: Int32) throws -> [String] {
    try lines().filter { $0.contains(" \(pid) ") }.map(String.init)
  }
}

/// The kernel's lock table could not be read.
public struct KernelLockTableError: Error, CustomStringConvertible {
  public let description: String

  init(_ description: String) { self.description = description }
}
