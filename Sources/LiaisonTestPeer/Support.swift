import Dispatch
import Foundation
import Liaison
import LiaisonTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Writes a line to standard output at once (no buffering between the peer and the test).
func say(_ line: String) {
  let bytes = Array((line + "\n").utf8)
  _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

/// The container the peer works in: its one argument, opened on first use (`main.swift` uses
/// it before it says `ready`).
let container: SharedContainer = {
  guard CommandLine.arguments.count == 2 else {
    say("usage: LiaisonTestPeer CONTAINER")
    exit(2)
  }
  do {
    return try SharedContainer(directory: CommandLine.arguments[1])
  } catch let error as LiaisonError {
    say("error \(error.code): \(error.message)")
    exit(1)
  } catch {
    say("error \(error)")
    exit(1)
  }
}()

/// The queue the peer's callback observations run on.
let observerQueue = DispatchQueue(label: "peer.observer")

/// What observers received, in order, for the `next…` commands to hand out.
final class Inbox<Item: Sendable>: Sendable {
  private let items = Locked<[Item]>([])
  private let available = DispatchSemaphore(value: 0)

  func put(_ item: Item) {
    items.withLock { $0.append(item) }
    available.signal()
  }

  func take(milliseconds: Int) -> Item? {
    guard available.wait(timeout: .now() + .milliseconds(milliseconds)) == .success else { return nil }
    return items.withLock { $0.removeFirst() }
  }
}

/// How long a `next…` command waits: its optional argument, else 30 s.
func waitMilliseconds(_ words: [String], at index: Int = 1) -> Int {
  words.count > index ? Int(words[index])! : 30_000
}

/// Appends `text` to the file at `path` in one write.
@Sendable func append(_ text: String, to path: String) {
  let bytes = Array(text.utf8)
  let fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
  precondition(fd >= 0, "cannot open \(path)")
  precondition(write(fd, bytes, bytes.count) == bytes.count, "short write to \(path)")
  close(fd)
}

/// Runs `body` in a task and waits for it on this (non-pool) thread.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
  let result = Locked<T?>(nil)
  let done = DispatchSemaphore(value: 0)
  Task {
    let value = await body()
    result.withLock { $0 = value }
    done.signal()
  }
  done.wait()
  return result.withLock { $0! }
}

/// This process's open descriptors (`/dev/fd`, on Linux and macOS) and threads (Linux only: -1
/// elsewhere).
@Sendable func counts() -> (Int, Int) {
  func entries(_ path: String) -> Int {
    guard let directory = opendir(path) else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while readdir(directory) != nil { count += 1 }
    return count - 3  // ".", "..", and the descriptor opendir itself holds or the reading thread
  }
  return (entries("/dev/fd"), entries("/proc/self/task"))
}

/// The names of this process's threads.
func threadNames() -> [String] {
  let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
  return tasks.compactMap {
    (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?
      .trimmingCharacters(in: .whitespacesAndNewlines)
  }
}

/// Whether this process has a `flock` wait asleep in the kernel.
@Sendable func blockedInKernel() -> Bool {
  (try? KernelLocks.hasBlockedWaiter(pid: getpid())) ?? false
}
