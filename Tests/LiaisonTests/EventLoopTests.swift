import Dispatch
import Foundation
import LiaisonTestSupport
import Testing

@testable import Liaison

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

@Suite("The event loop")
struct EventLoopTests {
  let directory = TemporaryDirectory()

  /// A process that is gone when its watch starts (exited and reaped) fires the watch at once, as
  /// libdispatch fakes a `NOTE_EXIT` when the kernel refuses to watch a process that is gone.
  @Test func theWatchOfAProcessAlreadyGoneFiresAtOnce() throws {
    let peer = try Peer(container: directory.path)
    let pid = peer.pid
    peer.kill()  // and reaped
    let fired = DispatchSemaphore(value: 0)
    let registration = try EventLoop.watch(.processExit(pid)) { _ in fired.signal() }
    defer { registration.cancel() }
    #expect(fired.wait(timeout: .now() + 30) == .success)
    EventLoopProbe.drain()
  }

  /// A watch that cannot be made throws, and leaves nothing registered: a descriptor that is not
  /// open, and a file that is not there.
  @Test func aWatchThatCannotBeMadeThrowsAndLeavesNothing() throws {
    #expect(throws: LiaisonError.self) {
      _ = try EventLoop.watch(.file(descriptor: -1, doorbell: "liaison.test.nothing")) { _ in }
    }
    let folder = try SharedContainer(directory: directory.path).privateFolder(.store)
    #expect(throws: LiaisonError.self) {
      _ = try folder.watchWriterCloses(of: "missing", trace: "missing-wal") {}
    }
  }

  /// The kernel's queue of file events holds `max_queued_events` events (16,384 by default) and
  /// then drops the rest, reporting one `IN_Q_OVERFLOW`. While the loop thread is held up in a
  /// handler, more than that many writes are made to two watched files (alternately, so that the
  /// kernel cannot merge them), then one post to a third: its event is dropped, and only the
  /// overflow tells the loop that something may have changed.
  @Test(.enabled(if: readsProc, "inotify (Linux)"))
  func anOverflowOfTheKernelsQueueRunsEveryHandler() throws {
    let limit =
      Int(
        (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8))?
          .trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 16_384
    try #require(limit <= 1_000_000, "max_queued_events is \(limit): too many events to flood in a test")
    let container = try SharedContainer(directory: directory.path)
    let floodA = try container.signal("flood-a")
    let floodB = try container.signal("flood-b")
    let watched = try container.signal("watched")
    let observations = try [floodA, floodB].map { try $0.observe(on: .global()) { _ in } }
    let received = Locked<UInt64?>(nil)
    let observation = try watched.observe(on: .global()) { note in received.withLock { $0 = note.state } }

    // Hold the loop thread in a handler of a file of its own.
    let blockerPath = directory.path + "/blocker"
    let blocker = open(blockerPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    try #require(blocker >= 0)
    defer { close(blocker) }
    let entered = Locked(false)
    let release = DispatchSemaphore(value: 0)
    let registration = try EventLoop.watch(.file(descriptor: blocker, doorbell: "blocker")) { _ in
      let first = entered.withLock { entered -> Bool in
        defer { entered = true }
        return !entered
      }
      if first { release.wait() }
    }
    _ = write(blocker, "x", 1)
    try waitUntil("the loop thread is held in the handler") { entered.withLock { $0 } }

    for index in 0..<(limit + 100) {
      try (index.isMultiple(of: 2) ? floodA : floodB).post()
    }
    try watched.post(state: 77)
    release.signal()

    try waitUntil("the watched signal's observer is told of the post", timeout: 20) {
      received.withLock { $0 } == 77
    }
    registration.cancel()
    observation.cancel()
    for observation in observations { observation.cancel() }
  }
}
