import Dispatch
import Foundation
import LiaisonTestSupport
import Testing

@testable import Liaison

/// Waits made on a thread of Dispatch's pool (a `DispatchQueue`'s work, a `Task`) still end at a
/// timeout and at `suspend()`. On Apple platforms XNU refuses `pthread_kill` to such threads
/// (`ENOTSUP`), so the signal that ends a wait blocked in `flock` never reached them: a timeout
/// never came, and `suspend()` returned while the wait still waited in the kernel, free to take the
/// lock after it. In the Darwin model (the trait `DarwinModel`), `pthread_kill` refuses them as XNU
/// does; on Linux it does not, and these tests pass there all the same.
@Suite("Waits on Dispatch's threads")
struct WorkqueueWaitTests {
  let directory = TemporaryDirectory()

  /// Runs `body` on `DispatchQueue.global()` and returns what it threw, or `nil`; `nil` too after
  /// 60 s without an answer (a failure bound).
  private func onADispatchThread(_ body: @escaping @Sendable () throws -> Void) -> Result<Void, any Error>? {
    let outcome = Locked<Result<Void, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      outcome.withLock { $0 = Result { try body() } }
      done.signal()
    }
    guard done.wait(timeout: .now() + 60) == .success else { return nil }
    return outcome.withLock { $0 }
  }

  private func code(of result: Result<Void, any Error>?) -> LiaisonError.Code? {
    guard case .failure(let error) = result else { return nil }
    return (error as? LiaisonError)?.code
  }

  @Test func aSynchronousLockWaitOnADispatchThreadTimesOut() throws {
    let holder = try Peer(container: directory.path)
    try #require(try holder.send(.lock, "token-refresh") == "locked")
    let lock = try SharedContainer(directory: directory.path).lock("token-refresh")
    let outcome = onADispatchThread { _ = try lock.lock(timeout: .milliseconds(200)) }
    #expect(code(of: outcome) == .timedOut, "the wait ended with \(String(describing: outcome))")
  }

  /// `suspend()` while a Dispatch thread waits for a lock that another process holds: it returns,
  /// the wait throws `suspended`, and once `suspend()` has returned this process neither holds nor
  /// waits for the lock: the kernel's table of locks says so (Linux), and when the holder lets go,
  /// a third process takes the lock at once (everywhere: a wait left in the kernel would have
  /// taken it).
  @Test func suspendEndsADispatchThreadsWaitAndLeavesNoWaitInTheKernel() throws {
    let holder = try Peer(container: directory.path)
    try #require(try holder.send(.lock, "sync") == "locked")
    let container = try SharedContainer(directory: directory.path)
    let lock = try container.lock("sync")
    let inode = try #require(
      (try FileManager.default.attributesOfItem(atPath: directory.path + "/.liaison/locks/sync"))[.systemFileNumber]
        as? UInt64)
    let pid = getpid()
    // Where there is no lock table to read (macOS), nothing is listed.
    let mine = { readsProc ? try KernelLocks.lines(ofProcess: pid).filter { $0.contains(":\(inode) ") } : [] }
    let participants = container.lifecycle.participantCount
    let outcome = Locked<Result<Void, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      outcome.withLock { $0 = Result { _ = try lock.lock() } }
      done.signal()
    }
    if readsProc {
      try waitUntil("this process waits for the lock in the kernel") { try !mine().isEmpty }
    } else {
      try waitUntil("the wait has begun") { container.lifecycle.participantCount > participants }
    }
    let suspended = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      container.suspend()
      suspended.signal()
    }
    defer { try? container.resume() }
    try #require(suspended.wait(timeout: .now() + 60) == .success, "suspend() did not return")
    let left = try mine()
    #expect(left.isEmpty, "after suspend(), the kernel still lists: \(left)")
    #expect(done.wait(timeout: .now() + 60) == .success)
    #expect(code(of: outcome.withLock { $0 }) == .suspended)
    try holder.send(.unlock, "sync")
    #expect(try mine().isEmpty)
    let third = try Peer(container: directory.path)
    #expect(try third.send(.trylock, "sync") == "locked")
  }

  /// A signal's post waits while another process holds the signal's file (another poster);
  /// `suspend()` ends that wait, made from a `Task`, with `suspended`.
  @Test func aPostFromATaskWaitingForAnotherPosterEndsAtSuspend() async throws {
    let container = try SharedContainer(directory: directory.path)
    let signal = try container.signal("sync-done")
    try signal.post()  // the file exists
    let holder = try Peer(container: directory.path)
    try #require(try holder.send(.holdFileLock, directory.path + "/.liaison/signals/sync-done") == "held")
    let outcome = Locked<String?>(nil)
    let posting = Task {
      do {
        try signal.post()
        outcome.withLock { $0 = "posted" }
      } catch let error as LiaisonError {
        outcome.withLock { $0 = "\(error.code)" }
      } catch {
        outcome.withLock { $0 = "\(error)" }
      }
    }
    try await waitUntilOffThePool("the post waits in the kernel") {
      try KernelLocks.hasBlockedWaiter(pid: getpid()) || !readsProc
    }
    container.suspend()
    defer { try? container.resume() }
    try await waitUntilOffThePool("the post ends") { outcome.withLock { $0 } != nil }
    #expect(outcome.withLock { $0 } == "suspended")
    posting.cancel()
  }
}

/// A claim holder killed (SIGKILL) is seen released while its parent has not reaped it yet. A
/// killed process is a zombie until then, which `kill(pid, 0)` finds alive, on Apple platforms as
/// on Linux; the Apple look once judged a claim by that alone, so the claim looked held for as
/// long as the zombie stayed (for ever, for a parent that never reaps).
@Suite("A killed holder not yet reaped")
struct ZombieHolderTests {
  let directory = TemporaryDirectory()

  /// Whether process `pid` is a zombie: its state in `/proc/PID/stat` on Linux, in the kernel's
  /// process table (`sysctl` `KERN_PROC_PID`, `p_stat`) on macOS.
  static func isZombie(_ pid: Int32) -> Bool {
    #if os(Linux)
      guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let end = stat.lastIndex(of: ")")
      else { return false }
      return stat[stat.index(end, offsetBy: 2)...].hasPrefix("Z")
    #else
      var info = kinfo_proc()
      var size = MemoryLayout<kinfo_proc>.stride
      var name: [Int32] = [CTL_KERN, KERN_PROC, KERN_PROC_PID, pid]
      guard sysctl(&name, UInt32(name.count), &info, &size, nil, 0) == 0, size > 0 else { return false }
      return Int32(info.kp_proc.p_stat) == SZOMB
    #endif
  }

  @Test
  @available(macOS 14.0, *)
  @MainActor func isSeenReleasedByAWatchAndByAnObservedPresence() async throws {
    let holder = try Peer(container: directory.path)
    try holder.send(.claim, "recording")
    let watcher = try Peer(container: directory.path)
    try watcher.send(.watchPresence, "recording")
    #expect(try watcher.send(.nextChange, "10000").hasPrefix("claimed \(holder.pid)"))
    let presence = try SharedContainer(directory: directory.path).presence("recording")
    let model = try await ObservedPresence(presence)
    #expect(model.holder?.processID == holder.pid)

    holder.child.kill(SIGKILL)  // and not reaped: this process is its parent
    try await waitUntilOffThePool("the holder is a zombie") { Self.isZombie(holder.pid) }
    #expect(try watcher.send(.nextChange, "10000").hasPrefix("released"))
    try await waitUntilAsync("the model shows no holder") { model.holder == nil }
    #expect(Self.isZombie(holder.pid), "reaped before the checks: they proved nothing")
    #expect(try !presence.isActive)
  }
}

extension ZombieHolderTests {
  /// A claimant that meets the shared lock a look takes for a moment (Apple platforms' look at a
  /// claim's record) under the record of a holder killed and not yet reaped is not told that the
  /// dead holder has the presence: it waits the look out, then claims. Held shared for longer than
  /// any look, the file is refused after 100 ms as held by a claim not recorded yet, never as the
  /// dead holder's.
  @Test func aClaimantWaitsOutALooksSharedLockUnderADeadHoldersRecord() throws {
    let holder = try Peer(container: directory.path)
    try holder.send(.claim, "recording")
    holder.child.kill(SIGKILL)  // and not reaped: its record names a zombie
    try waitUntil("the holder is a zombie") { Self.isZombie(holder.pid) }
    let look = open(directory.path + "/.liaison/presence/recording", O_RDONLY | O_CLOEXEC)
    try #require(look >= 0)
    defer { close(look) }
    try #require(flock(look, LOCK_SH | LOCK_NB) == 0)
    let presence = try SharedContainer(directory: directory.path).presence("recording")
    #expect {
      _ = try presence.claim()
    } throws: { error in
      let error = error as? LiaisonError
      return error?.code == .alreadyClaimed && error?.message.contains("not written its record yet") == true
    }
    flock(look, LOCK_UN)
    try presence.claim().release()
    #expect(Self.isZombie(holder.pid), "reaped before the checks: they proved nothing")
  }
}

@Suite("Descriptors of watches")
struct WatchDescriptorTests {
  let directory = TemporaryDirectory()

  /// An app's soft limit of descriptors is low: 1,000 observers of 100 files keep one descriptor
  /// per watched file (Apple platforms: a vnode source's), not one per observer. Signals share a
  /// watch per file in each process; each presence watch is its own.
  @Test(arguments: ["signal", "presence"])
  func aThousandObserversOfAHundredNamesKeepAtMostAHundredDescriptors(_ kind: String) throws {
    let peer = try Peer(container: directory.path)
    let counts = try peer.send(.observeManyTimes, kind, "name", "100", "1000").split(separator: " ").compactMap {
      Int($0)
    }
    try #require(counts.count == 2)
    #expect(counts[1] - counts[0] <= 100 + 4, "1,000 observers of 100 names took \(counts[1] - counts[0]) descriptors")
    guard kind == "signal" else { return }
    let signal = try SharedContainer(directory: directory.path).signal("name-42")
    try signal.post(state: 3)
    #expect(try peer.send(.next).hasPrefix("name-42 3 "))
  }
}
