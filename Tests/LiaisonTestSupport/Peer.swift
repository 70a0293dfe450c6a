@_exported import ChildProcesses
import Foundation
@_exported import KernelLockTable

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Where SwiftPM put the products of this build (the test peer, the CLI).
///
/// On Linux, SwiftPM builds the tests as an executable in that folder: `/proc/self/exe`'s. On
/// macOS the tests are a bundle there (`.build/<triple>/debug/<Package>PackageTests.xctest`,
/// its code in `Contents/MacOS/`) that another program loads: `xctest`, or
/// `swiftpm-testing-helper` for Swift Testing, both in the toolchain, and that one may not list
/// the bundle among `Bundle.allBundles`. So the folder is found without asking how the tests were
/// loaded: see ``locateProductsDirectory()``.
public func productsDirectory() -> URL { productsFolder }

private let productsFolder: URL = {
  #if os(Linux)
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
  #else
    locateProductsDirectory()
  #endif
}()

/// The first folder that holds the `LiaisonTestPeer` executable, walking up (at most 4 levels)
/// from each of these in turn: the file of the code that runs this function (`dladdr` of
/// `#dsohandle`: the test bundle's executable, or the executable that links this module), the
/// `.xctest` bundles loaded, and this process's executable; and, last, this package's
/// `.build/debug` (from `#filePath`: right for a `swift test` without `--scratch-path`).
///
/// Stops the process, naming every folder it looked in, when none holds it: no test that needs
/// the peer or the CLI could run.
package func locateProductsDirectory() -> URL {
  var starts: [URL] = []
  #if canImport(Darwin)  // Glibc declares dladdr only with _GNU_SOURCE, which Swift does not set
    var info = Dl_info()
    if dladdr(#dsohandle, &info) != 0, let name = info.dli_fname {
      starts.append(URL(fileURLWithPath: String(cString: name)).deletingLastPathComponent())
    }
  #endif
  for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
    starts.append(bundle.bundleURL.deletingLastPathComponent())
  }
  if let executable = Bundle.main.executableURL { starts.append(executable.deletingLastPathComponent()) }
  let packageRoot = URL(fileURLWithPath: #filePath)  // Tests/LiaisonTestSupport/Peer.swift
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
  starts.append(packageRoot.appendingPathComponent(".build/debug"))

  var looked: [String] = []
  for start in starts {
    var folder = start.resolvingSymlinksInPath()
    for _ in 0...4 {
      if FileManager.default.isExecutableFile(atPath: folder.appendingPathComponent("LiaisonTestPeer").path) {
        return folder
      }
      looked.append(folder.path)
      guard folder.path != "/" else { break }
      folder = folder.deletingLastPathComponent()
    }
  }
  fatalError(
    "cannot find the products of this build: no LiaisonTestPeer executable (which SwiftPM builds beside the "
      + "tests) in any of \(looked)")
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

  /// Sends `command` with `arguments` (see ``PeerCommand/line(_:)``) and returns the answer after
  /// `ok `; throws with any other answer (`error …`, as for a line the peer did not understand).
  @discardableResult
  public func send(
    _ command: PeerCommand, _ arguments: any CustomStringConvertible..., timeout: Double = 60
  ) throws -> String {
    let line = command.line(arguments)
    child.write(line)
    let answer = try child.readLine(timeout: timeout)
    guard answer == "ok" || answer.hasPrefix("ok ") else { throw PeerError("'\(line)' → \(answer)") }
    return String(answer.dropFirst(3))
  }

  /// Sends `command` with `arguments` and returns the whole answer line, `ok …` or `error …`
  /// (for a test that expects an error).
  public func ask(_ command: PeerCommand, _ arguments: any CustomStringConvertible...) throws -> String {
    try ask(line: command.line(arguments))
  }

  /// Sends `line` as it is and returns the whole answer line: for a test of what the peer does
  /// with a line that is not a command. Other tests send a ``PeerCommand``.
  public func ask(line: String) throws -> String {
    child.write(line)
    return try child.readLine()
  }

  /// Sends `command` with `arguments` without waiting for the answer, for a test that does
  /// something else meanwhile; it reads the answer with `child.readLine()`.
  public func start(_ command: PeerCommand, _ arguments: any CustomStringConvertible...) {
    child.write(command.line(arguments))
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
