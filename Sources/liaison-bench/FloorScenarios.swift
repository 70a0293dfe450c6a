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

  /// `floor.pipe-to-async`: the cheapest `async` delivery from another process. The other process
  /// (a peer) has a thread of its own blocked in `read(2)` on a pipe; the thread yields what it
  /// read into an `AsyncStream`, and a task iterating the stream answers with how long ago this
  /// process wrote it. One way, as the async scenarios measure: a kernel wake-up of the reading
  /// thread, then the wake-up of a cooperative-pool thread for the task. What an async scenario
  /// costs beyond this floor is Liaison's (and SQLite's) own.
  static func pipeToAsync() throws -> () -> Double {
    let reader = try BenchPeer("async-reader")
    return {
      reader.sendTimestamp(now())
      return Double(reader.readTimestamp())
    }
  }

  #if os(Linux)
    /// `floor.inotify-file`: the doorbell a signal is made of, with raw system calls. This process
    /// writes a timestamp into a 32-byte file with `pwrite`; a thread of another process, blocked
    /// in `poll` on an inotify descriptor watching the file, reads the event and the file and
    /// answers how long ago the write started. A signal adds its record's lock, checksum and
    /// sequence, and Liaison's dispatch to observers.
    static func inotifyFile(directory: String) throws -> () -> Double {
      let path = directory + "/floor-inotify"
      let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
      guard fd >= 0 else { throw BenchError("cannot open \(path)") }
      var record = [UInt8](repeating: 0, count: 32)
      _ = pwrite(fd, record, 32, 0)
      let reader = try BenchPeer("inotify-reader", [path])
      return {
        withUnsafeBytes(of: now().littleEndian) { record.replaceSubrange(0..<8, with: $0) }
        _ = pwrite(fd, record, 32, 0)
        return Double(reader.readTimestamp())
      }
    }
  #endif

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
