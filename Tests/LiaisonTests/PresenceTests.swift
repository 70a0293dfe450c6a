import Foundation
import LiaisonTestSupport
import Testing

@testable import Liaison

@Suite("Presence across processes")
struct PresenceTests {
  let directory = TemporaryDirectory()

  @Test func aClaimInAnotherProcessIsActiveWithItsHolderUntilTheHolderIsKilled() throws {
    let container = try SharedContainer(directory: directory.path)
    let recording = try container.presence("recording")
    #expect(try !recording.isActive)
    #expect(try recording.holder == nil)

    let app = try Peer(container: directory.path)
    try app.send(.claim, "recording", "episode", "7")
    #expect(try recording.isActive)
    let holder = try #require(try recording.holder)
    #expect(holder.processID == app.pid)
    #expect(holder.kind == .claim)
    #expect(holder.info == "episode 7")

    app.kill()
    #expect(try !recording.isActive)
    #expect(try recording.holder == nil)
    #expect(try container.presences().map(\.name.rawValue) == ["recording"])
  }

  @Test func infoThatStartsWithACombiningMarkReadsBackAsWritten() throws {
    // Found by the fuzzer: the reader split the line `info TEXT` at its first space *character*,
    // and a space followed by a combining mark is one character, so the record never read.
    let container = try SharedContainer(directory: directory.path)
    let info = "\u{301}accent first"
    let claim = try container.presence("accented").claim(info: info)
    defer { claim.release() }
    #expect(try container.presence("accented").holder?.info == info)
  }

  @Test func aSecondClaimIsRefusedWithTheHolderNamed() throws {
    let container = try SharedContainer(directory: directory.path)
    let app = try Peer(container: directory.path)
    try app.send(.claim, "navigation")
    #expect {
      _ = try container.presence("navigation").claim()
    } throws: { error in
      let error = error as? LiaisonError
      return error?.code == .alreadyClaimed && error?.message.contains("pid \(app.pid)") == true
    }
    try app.send(.release, "navigation")
    let mine = try container.presence("navigation").claim(info: "here")
    #expect(mine.isHeld)
    #expect(try app.ask(.claim, "navigation").hasPrefix("error already claimed"))
    mine.release()
    #expect(try container.presence("navigation").holder == nil)
  }

  @Test func aLeaseStaysActiveWhileRenewedAndLapsesWhenItsHolderStops() throws {
    let container = try SharedContainer(directory: directory.path)
    let sync = try container.presence("sync")
    let leaseMilliseconds = 1500.0
    let holder = try Peer(container: directory.path)
    try holder.send(.lease, "sync", Int(leaseMilliseconds), "background", "sync")
    #expect(try sync.holder?.kind == .lease)
    #expect(try sync.holder?.processID == holder.pid)

    // Renewed by its heartbeat: three renewals, and active at every look meanwhile. When each
    // renewal comes (every third of the lease, each for a whole lease) is checked on a manual
    // clock, in LeaseClockTests: here, in real time across processes, no duration is bounded.
    var expiries = [try #require(try sync.holder?.leaseExpiry)]
    var inactiveSeen = 0
    try waitUntil("the lease was renewed three times") {
      guard let holder = try sync.holder else {
        inactiveSeen += 1
        return false
      }
      let expiry = try #require(holder.leaseExpiry)
      if expiry != expiries.last! { expiries.append(expiry) }
      return expiries.count > 3
    }
    #expect(inactiveSeen == 0)

    // Stopped (as iOS suspends a process): no renewal, so the lease lapses after its time. Not in
    // the middle of a renewal, which holds the presence's lock for a moment (a process stopped
    // there reads as a lease being written, for as long as it stays stopped): stopped again
    // until the file is found unlocked.
    let file = open(directory.path + "/.liaison/presence/sync", O_RDONLY | O_CLOEXEC)
    try #require(file >= 0)
    defer { close(file) }
    while true {
      holder.child.kill(SIGSTOP)
      if flock(file, LOCK_SH | LOCK_NB) == 0 {
        flock(file, LOCK_UN)
        break
      }
      holder.child.kill(SIGCONT)
    }
    // Never more than the whole lease left (how much, on a manual clock: LeaseClockTests).
    let stopped = try #require(try sync.holder)
    let remaining = try #require(stopped.leaseRemaining)
    #expect(remaining <= .milliseconds(leaseMilliseconds), "\(remaining) of the lease left at the stop")
    #expect(try sync.isActive)
    // It lapses when that expiry passes, not before.
    try waitUntil("the lease lapses") { try !sync.isActive }
    let expiry = try #require(stopped.leaseExpiry)
    #expect(SystemClock.bootNanoseconds() >= expiry, "the lease lapsed before its expiry")

    // Running again: the heartbeat takes the lease back.
    holder.child.kill(SIGCONT)
    try waitUntil("the heartbeat takes the lease back") { try sync.isActive }
    #expect(try sync.holder?.processID == holder.pid)
  }

  @Test func aLeaseExcludesClaimsAndIsGoneOnRelease() throws {
    let container = try SharedContainer(directory: directory.path)
    let lease = try container.presence("upload").lease(for: .seconds(30))
    #expect(lease.isHeld)
    let other = try Peer(container: directory.path)
    #expect(try other.ask(.claim, "upload").hasPrefix("error already claimed"))
    #expect(try other.send(.active, "upload") == "true")
    lease.release()
    #expect(try other.send(.active, "upload") == "false")
    #expect(try other.send(.claim, "upload") == "claimed")
  }

  @Test func suspendReleasesTheClaimAndResumeTakesItBack() throws {
    let container = try SharedContainer(directory: directory.path)
    let audio = try container.presence("audio")
    let app = try Peer(container: directory.path)
    try app.send(.claim, "audio", "playing")
    #expect(try audio.isActive)

    try app.send(.suspend)
    #expect(try !audio.isActive)
    #expect(try app.ask(.claim, "other").hasPrefix("error suspended"))

    try app.send(.resume)
    #expect(try audio.isActive)
    #expect(try audio.holder?.processID == app.pid)
    #expect(try audio.holder?.info == "playing")
  }

  @Test func releasingASuspendedClaimLeavesTheNewHoldersRecordAlone() throws {
    let container = try SharedContainer(directory: directory.path)
    let claim = try container.presence("camera").claim()
    container.suspend()
    let other = try Peer(container: directory.path)
    try other.send(.claim, "camera", "theirs")
    claim.release()
    #expect(try container.presence("camera").holder?.processID == other.pid)
    #expect(try container.presence("camera").holder?.info == "theirs")
    try container.resume()
    #expect(!claim.isHeld)
  }

  @Test func aClaimReleasedWhileSuspendedIsNotTakenBackOnResume() throws {
    let container = try SharedContainer(directory: directory.path)
    let claim = try container.presence("mic").claim()
    container.suspend()
    claim.release()
    try container.resume()
    #expect(!claim.isHeld)
    #expect(try !container.presence("mic").isActive)
  }

  @Test func aReleasedLeaseIsGoneAtOnceEvenWhileItsHeartbeatRuns() throws {
    let container = try SharedContainer(directory: directory.path)
    let failures = Locked<[String]>([])
    DispatchQueue.concurrentPerform(iterations: 8) { worker in
      for round in 0..<150 {
        do {
          let presence = try container.presence("lease-\(worker)")
          let lease = try presence.lease(for: .milliseconds(10))
          if round % 2 == 1 { usleep(4_000) }  // let a heartbeat (every 3.3 ms) run into the release
          lease.release()
          if lease.isHeld { failures.withLock { $0.append("held after release") } }
          if try presence.isActive { failures.withLock { $0.append("active after release") } }
        } catch {
          failures.withLock { $0.append("\(error)") }
        }
      }
    }
    #expect(failures.withLock { $0 } == [])
  }

  /// A renewal holds the presence's file lock for a moment (up to 100 ms while another holder
  /// has it), and iOS must not find a suspended process holding or waiting for one: `suspend()`
  /// waits for a renewal in progress, and none touches the file after it until `resume()`.
  @Test func suspendWaitsForALeaseRenewalInProgressAndNoneRunsUntilResume() throws {
    let container = try SharedContainer(directory: directory.path)
    let lease = try container.presence("sync").lease(for: .seconds(60))
    // Another open file description of the presence file holds its lock (flock treats it as
    // another holder), so the renewal keeps trying for its whole settle time.
    let other = open(directory.path + "/.liaison/presence/sync", O_RDWR | O_CLOEXEC)
    try #require(other >= 0)
    defer { close(other) }
    try #require(flock(other, LOCK_EX) == 0)
    let outcome = Locked<LiaisonError.Code?>(nil)
    let renewing = DispatchSemaphore(value: 0)
    let renewed = DispatchSemaphore(value: 0)
    Thread {
      renewing.signal()
      do throws(LiaisonError) {
        try lease.renew()
      } catch {
        outcome.withLock { $0 = error.code }
      }
      renewed.signal()
    }.start()
    renewing.wait()
    container.suspend()
    // The lock comes free: a renewal still running after suspend() returned would take it now.
    flock(other, LOCK_UN)
    renewed.wait()
    // Either suspend() waited for the renewal, which found the lock taken all along without a
    // record (a claim in progress: the lease is not lost), or the renewal came after it and was
    // refused without touching the file.
    let code = outcome.withLock { $0 }
    #expect(
      code == .claimInProgress || code == .suspended,
      "a renewal went on after suspend() returned (\(code.map { "\($0)" } ?? "renewed"))")
    #expect(throws: LiaisonError.self) { try lease.renew() }
    #expect(throws: LiaisonError.self) { _ = try container.presence("other").lease(for: .seconds(1)) }
    try container.resume()
  }

  @Test func badInfoAndLeaseDurationsAreRefused() throws {
    let container = try SharedContainer(directory: directory.path)
    let presence = try container.presence("p")
    #expect(throws: LiaisonError.self) { _ = try presence.claim(info: String(repeating: "x", count: 1025)) }
    #expect(throws: LiaisonError.self) { _ = try presence.lease(for: .milliseconds(1)) }
  }
}
