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
    #expect(try recording.isActive)
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
  /// the process. Each round changes the file and then waits for a post to be delivered, once
  /// with the file locked without a record and once without the lock. Spinning, the twenty locked
  /// rounds took at least 20 × 100 ms more than the twenty unlocked ones; now both take the same
  /// few ms. The rounds alternate, so a slow spell of a loaded machine weighs on both alike.
  @Test(.enabled(if: readsProc, "inotify reports a close (Linux)"))
  func aClaimInProgressDoesNotHoldUpTheEventLoop() throws {
    let container = try SharedContainer(directory: directory.path)
    let recording = try container.presence("recording")
    try recording.claim().release()
    let changes = try recording.changes()
    let marker = try container.signal("marker")
    let markers = Locked<UInt64>(0)
    let observation = try marker.observe(on: .global()) { note in markers.withLock { $0 = note.state } }
    defer { observation.cancel() }
    let path = directory.path + "/.liaison/presence/recording"
    var state: UInt64 = 0
    func round() throws -> UInt64 {
      state += 1
      let start = monotonicNanoseconds()
      close(open(path, O_RDWR | O_CLOEXEC))  // a close after writing: the watch reads the file
      try marker.post(state: state)
      try waitUntil("marker \(state) is delivered") { markers.withLock { $0 } == state }
      return monotonicNanoseconds() - start
    }
    var locked: UInt64 = 0
    var unlocked: UInt64 = 0
    for _ in 1...20 {
      let fd = try lockWithoutRecord("recording", waiting: true)
      let time = try round()
      close(fd)
      locked += time
      unlocked += try round()
    }
    let extra = (Double(locked) - Double(unlocked)) / 1e9
    #expect(extra < 1, "twenty rounds with a claim in progress took \(extra) s more: the event loop was held up")
    withExtendedLifetime(changes) {}
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
    try await waitUntilAsync("both iterators have the current state", timeout: 10) {
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
    try await waitUntilAsync("both iterators have the post", timeout: 10) { states.withLock { $0 } == [9, 9] }
  }
}

/// ``waitUntil(_:timeout:_:)`` for async tests: pauses by suspending, so that the tasks it waits
/// for run on the cooperative pool meanwhile (a blocked pool thread, on a 2-core machine, is half
/// the pool).
func waitUntilAsync(_ what: String, timeout: Double = 60, _ condition: () throws -> Bool) async throws {
  let deadline = Date().addingTimeInterval(timeout)
  var pause: UInt64 = 20_000
  while try !condition() {
    guard Date() < deadline else { throw PeerError("timed out after \(timeout) s waiting until \(what)") }
    try await Task.sleep(nanoseconds: pause)
    pause = min(pause * 2, 2_000_000)
  }
}
