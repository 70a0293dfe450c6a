import Foundation
import LiaisonTestSupport
import Testing

@testable import Liaison

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Holders that are still writing their record, lease renewals, and what `changes()` delivers.
@Suite("Presence at its edges")
struct PresenceEdgeTests {
  let directory = TemporaryDirectory()

  /// Takes the presence file's lock the way a claimant does before it writes its record (on an
  /// open file description of its own, so it contends with this process's own descriptors).
  ///
  /// - Parameter waiting: wait for the lock, for a file that a watch of this process may be
  ///   probing at that moment (a probe holds a shared lock for an instant).
  private func lockWithoutRecord(_ name: String, waiting: Bool = false) throws -> CInt {
    let path = directory.path + "/.liaison/presence/" + name
    let fd = open(path, O_RDWR | O_CLOEXEC)
    try #require(fd >= 0, "cannot open \(path)")
    try #require(holdLikeAClaimBeingMade(fd, waiting: waiting))
    return fd
  }

  @Test func aClaimInProgressIsNotACorruptFileAndNobodyIsToldToDeleteIt() throws {
    let container = try SharedContainer(directory: directory.path)
    let recording = try container.presence("recording")
    try recording.claim().release()  // the file exists
    let fd = try lockWithoutRecord("recording")
    defer { close(fd) }
    // On Apple platforms a claim is seen by its record: one being made is not seen until written.
    #expect(try recording.isActive == runsLinuxCode)
    guard runsLinuxCode else {
      #expect(try recording.holder == nil)
      return
    }
    do {
      let holder = try recording.holder
      Issue.record("holder gave \(String(describing: holder)) for a claim still in progress")
    } catch {
      #expect(error.code != .corruptFile)
      #expect(!error.message.contains("remove"))
    }
  }

  @Test func aLeaseRenewalThatMeetsAClaimInProgressIsNotALostLease() throws {
    let container = try SharedContainer(directory: directory.path)
    let recording = try container.presence("recording")
    let lease = try recording.lease(for: .seconds(60))
    defer { lease.release() }
    let fd = try lockWithoutRecord("recording")
    do {
      try lease.renew()
      Issue.record("the renewal succeeded while another holder had the file locked")
    } catch {
      #expect(error.code != .leaseLost)
    }
    #expect(lease.isHeld)
    close(fd)
    try lease.renew()
    #expect(lease.isHeld)
  }

  /// The event loop's thread must never wait: a presence watch that meets a claim in progress
  /// once spun there for up to 100 ms at each change of the file, delaying every other watch of
  /// the process. A peer watches the presence (its loop thread does nothing else); each round
  /// changes the file and waits until the loop has handled the change and waits again, once with
  /// the file locked without a record and once without the lock. The loop thread must do no more
  /// in the locked rounds than in the unlocked ones: no more looks at the file (read calls) and
  /// wake-ups (context switches), which a spin that looks again or pauses shows, and no more CPU
  /// time, which any spin shows. Counts, not durations: a loaded machine makes them no larger.
  @Test(.enabled(if: runsLinuxCode, "reads /proc; inotify reports a close; the event loop's thread (Linux)"))
  func aClaimInProgressDoesNotHoldUpTheEventLoop() throws {
    let container = try SharedContainer(directory: directory.path)
    try container.presence("recording").claim().release()
    let watcher = try Peer(container: directory.path)
    try watcher.send(.watchPresence, "recording")
    #expect(try watcher.send(.nextChange, "60000").hasPrefix("released"))
    var loop: Int32 = 0  // the peer's loop thread, named once it runs
    try waitUntil("the peer's event loop runs") {
      loop = try ThreadActivity(process: watcher.pid).threads.first { $0.value.name == "liaison-events" }?.key ?? 0
      return loop != 0
    }
    func loopThread() throws -> ThreadActivity.Counters {
      try #require(try ThreadActivity(process: watcher.pid).threads[loop])
    }
    let path = directory.path + "/.liaison/presence/recording"
    /// What the peer's loop thread did to handle one change of the file.
    func round() throws -> Work {
      let before = try loopThread()
      close(open(path, O_RDWR | O_CLOEXEC))  // a close after writing: the watch looks at the file
      // The close makes the sleeping loop runnable before it returns: once the loop is seen asleep
      // in poll again after a wake-up, it has handled the change.
      var after = before
      try waitUntil("the peer's event loop handled the change and waits again") {
        after = try loopThread()
        return after.contextSwitches > before.contextSwitches && after.isAsleep && after.waitChannel.contains("poll")
      }
      return Work(
        reads: after.readCalls - before.readCalls, wakeUps: after.contextSwitches - before.contextSwitches,
        ticks: after.cpuTicks - before.cpuTicks)
    }
    var (locked, unlocked) = (Work(), Work())
    for _ in 1...20 {
      let fd = try lockWithoutRecord("recording", waiting: true)
      locked += try round()
      close(fd)
      unlocked += try round()
    }
    // The locked rounds have no more to do (the close of the lock's descriptor is a change too,
    // handled in an unlocked round). Margins for a busy machine: a handler may be preempted (an
    // involuntary switch). A look again after each pause, however short, is 20 more of each; the
    // spin of old, over 100,000 read calls. The CPU ticks are shown, not bounded: a tick is charged
    // to whatever runs then, a measure of the machine's load as much as of the loop's work.
    let message =
      "a claim in progress held up the event loop: \(locked) in the locked rounds, \(unlocked) in the others"
    #expect(locked.reads <= unlocked.reads + 10 && locked.wakeUps <= unlocked.wakeUps + 10, "\(message)")
  }

  @Test func leaseRenewalsAreNotChanges() async throws {
    let container = try SharedContainer(directory: directory.path)
    let recording = try container.presence("recording")
    let app = try Peer(container: directory.path)
    try app.send(.lease, "recording", "150", "renewing")
    let received = Locked<[PresenceChange]>([])
    let changes = try recording.changes()
    let consumer = Task {
      for try await change in changes { received.withLock { $0.append(change) } }
    }
    defer { consumer.cancel() }
    try await waitUntilAsync("the lease is seen") { !received.withLock { $0 }.isEmpty }
    // Three renewals, each a new expiry in the record.
    var expiries: Set<UInt64> = []
    try await waitUntilAsync("the lease was renewed three times") {
      if let expiry = try recording.holder?.leaseExpiry { expiries.insert(expiry) }
      return expiries.count >= 4
    }
    try app.send(.release, "recording")
    try await waitUntilAsync("the release is seen") { received.withLock { $0 }.last == .released }
    let kinds = received.withLock { $0 }.map { change -> String in
      if case .claimed = change { return "claimed" } else { return "released" }
    }
    #expect(kinds == ["claimed", "released"])
  }

  @Test func aChangeAndItsUndoingWhileTheConsumerIsAwayAreNotDeliveredAsARepeat() async throws {
    let container = try SharedContainer(directory: directory.path)
    let recording = try container.presence("recording")
    let marker = try container.signal("marker")
    let markers = Locked<UInt64>(0)
    let observation = try marker.observe(on: .global()) { note in markers.withLock { $0 = note.state } }
    defer { observation.cancel() }
    var changes = try recording.changes().makeAsyncIterator()
    #expect(try await changes.next() == .released)

    // The loop runs a batch's handlers before it reads the next: once a post made after a
    // delivered one is delivered, the presence's handlers for what came before have run.
    var state: UInt64 = 0
    func settle() async throws {
      for _ in 0..<2 {
        state += 1
        try marker.post(state: state)
        try await waitUntilAsync("marker \(state) is delivered") { markers.withLock { $0 } == state }
      }
    }
    // Claimed, then released, while nobody reads: the watch emits both, one after the other.
    let first = try recording.claim()
    try await settle()
    first.release()
    try await settle()

    let claim = try recording.claim(info: "again")
    defer { claim.release() }
    let next = try await changes.next()
    guard case .claimed(let holder) = next else {
      Issue.record("after .released the sequence delivered \(String(describing: next)) again")
      return
    }
    #expect(holder.info == "again")
  }

  @Test func twoIteratorsOfOneSequenceOfChangesEachGetEveryChange() async throws {
    let container = try SharedContainer(directory: directory.path)
    let recording = try container.presence("recording")
    let changes = try recording.changes()
    let firsts = Locked<[PresenceChange]>([])
    let seconds = Locked<[PresenceChange]>([])
    let tasks = [firsts, seconds].map { received in
      Task {
        for try await change in changes {
          received.withLock { $0.append(change) }
          if case .claimed = change { return }
        }
      }
    }
    try await waitUntilAsync("both iterators have the current state", timeout: 60) {
      firsts.withLock { $0 } == [.released] && seconds.withLock { $0 } == [.released]
    }
    let claim = try recording.claim()
    defer { claim.release() }
    for task in tasks { try await task.value }
    #expect(firsts.withLock { $0 }.count == 2)
    #expect(seconds.withLock { $0 }.count == 2)
  }

  @Test func twoIteratorsOfOneSequenceOfNotificationsEachGetAPost() async throws {
    let container = try SharedContainer(directory: directory.path)
    let notifications = try container.signal("notes-changed").notifications()
    let ready = Locked(0)
    let states = Locked<[UInt64]>([])
    let tasks = (0..<2).map { _ in
      Task {
        var iterator = notifications.makeAsyncIterator()
        ready.withLock { $0 += 1 }
        if let state = await iterator.next()?.state { states.withLock { $0.append(state) } }
      }
    }
    defer { for task in tasks { task.cancel() } }
    try await waitUntilAsync("both iterators are made") { ready.withLock { $0 } == 2 }
    let poster = try Peer(container: directory.path)
    try poster.send(.post, "notes-changed", "9")
    try await waitUntilAsync("both iterators have the post", timeout: 60) { states.withLock { $0 } == [9, 9] }
  }
}

/// What an event loop's thread did: read calls, context switches and CPU ticks.
private struct Work: CustomStringConvertible {
  var reads = 0
  var wakeUps = 0
  var ticks = 0

  static func += (total: inout Work, more: Work) {
    total = Work(
      reads: total.reads + more.reads, wakeUps: total.wakeUps + more.wakeUps, ticks: total.ticks + more.ticks)
  }

  var description: String { "\(reads) read calls, \(wakeUps) context switches, \(ticks) CPU ticks" }
}

/// ``waitUntil(_:timeout:_:)`` for async tests: pauses by suspending, so that the tasks it waits
/// for run on the cooperative pool meanwhile (a blocked pool thread, on a 2-core machine, is half
/// the pool). On the caller's actor, which `condition` may read.
func waitUntilAsync(
  _ what: String, timeout: Double = 60, isolation: isolated (any Actor)? = #isolation, _ condition: () throws -> Bool
) async throws {
  let deadline = Date().addingTimeInterval(timeout)
  var pause: UInt64 = 20_000
  while try !condition() {
    guard Date() < deadline else { throw PeerError("timed out after \(timeout) s waiting until \(what)") }
    try await Task.sleep(nanoseconds: pause)
    pause = min(pause * 2, 2_000_000)
  }
}
