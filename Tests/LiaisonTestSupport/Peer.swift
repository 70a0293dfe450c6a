@_exported import ChildProcesses
import Foundation
@_exported import KernelLockTable

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Where SwiftPM put the products of this build (the test peer, the CLI).
public func productsDirectory() -> URL {
  #if canImport(Darwin)
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
      return bundle.bundleURL.deletingLastPathComponent()
    }
  #endif
  let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
  return executable.deletingLastPathComponent()
}

/// A fresh, empty container directory, removed when the returned value is released.
public final class TemporaryDirectory: @unchecked Sendable {
  public let path: String

  public init() {
    var template = Array(
      URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("liaison-test-XXXXXX").path.utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(made != nil, "cannot create a temporary directory")
    path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A `LiaisonTestPeer` on a container.
public final class Peer: @unchecked Sendable {
  public let child: ChildProcess

  /// Starts a peer on `container` (a folder, or a PostgreSQL place: see the peer's
  /// `PlaceCommands.swift`), with `environment` added to this process's. `launcher` turns the
  /// peer's command line into the one to run (``NetworkNamespace/command(_:)`` runs it inside a
  /// network namespace).
  public init(
    container: String, environment: [String: String]? = nil, launcher: ([String]) -> [String] = { $0 }
  ) throws {
    let command = launcher([productsDirectory().appendingPathComponent("LiaisonTestPeer").path, container])
    child = try ChildProcess(command[0], Array(command.dropFirst()), environment: environment)
    let greeting = try child.readLine()
    guard greeting.hasPrefix("ready ") else { throw PeerError("peer said '\(greeting)' instead of ready") }
  }

  public var pid: Int32 { child.pid }

  /// Sends a command and returns the answer after `ok ` (or throws with the error answer).
  @discardableResult
  public func send(_ command: String, timeout: Double = 60) throws -> String {
    child.write(command)
    let answer = try child.readLine(timeout: timeout)
    guard answer.hasPrefix("ok") else { throw PeerError("'\(command)' → \(answer)") }
    return String(answer.dropFirst(3))
  }

  /// Sends a command and returns the whole answer line, `ok …` or `error …`.
  public func ask(_ command: String) throws -> String {
    child.write(command)
    return try child.readLine()
  }

  public func kill() {
    child.kill(SIGKILL)
    child.wait()
  }
}

/// A peer did not start or answer as expected.
public typealias PeerError = SpawnError

/// The number of open descriptors and of threads of this process.
public func resourceCounts() -> (descriptors: Int, threads: Int) {
  let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
  let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
  return (descriptors, threads)
}

/// Nanoseconds on the monotonic clock that every process shares.
public func monotonicNanoseconds() -> UInt64 {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Checks `condition` until it holds; throws after `timeout` seconds (a failure guard: the
/// condition is expected to hold soon, but a machine running the suite under a sanitizer with
/// other tests beside it can take many seconds to get there).
///
/// The pause between checks grows from 20 µs to 2 ms, so that a wait that lasts does not take a
/// core from the very process it waits for (a spinning wait did, on a 2-core machine).
public func waitUntil(_ what: String, timeout: Double = 60, _ condition: () throws -> Bool) throws {
  let deadline = Date().addingTimeInterval(timeout)
  var pause: UInt32 = 20
  while try !condition() {
    guard Date() < deadline else { throw PeerError("timed out after \(timeout) s waiting until \(what)") }
    usleep(pause)
    pause = min(pause * 2, 2_000)
  }
}
