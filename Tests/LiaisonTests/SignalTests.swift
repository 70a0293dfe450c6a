import Foundation
import LiaisonTestSupport
import Testing

@testable import Liaison

@Suite("Signal across processes")
struct SignalTests {
  let directory = TemporaryDirectory()

  @Test func anObserverSubscribedBeforeAPostReceivesItsState() throws {
    let observer = try Peer(container: directory.path)
    let poster = try Peer(container: directory.path)
    try observer.send(.observe, "notes-changed")
    try poster.send(.post, "notes-changed", "42")
    #expect(try observer.send(.next) == "notes-changed 42 1")
    try poster.send(.post, "notes-changed")
    #expect(try observer.send(.next) == "notes-changed 42 2")
    #expect(try SharedContainer(directory: directory.path).signal("notes-changed").state == 42)
  }

  /// An observer that has received a post sleeps until the next one. Delivering a post reads
  /// the signal's file; read through a descriptor opened for writing, its close was an event of
  /// the observer's own watch on Linux (`IN_CLOSE_WRITE`), which read again: the observer spun a
  /// core for as long as it observed. Its threads are seen asleep, and none runs for 300 ms (an
  /// observation of a process left alone, not a synchronisation).
  @Test(.enabled(if: readsProc, "reads /proc"))
  func anObserverSleepsBetweenPosts() throws {
    let observer = try Peer(container: directory.path)
    try observer.send(.observe, "quiet")
    try SharedContainer(directory: directory.path).signal("quiet").post(state: 1)
    #expect(try observer.send(.next) == "quiet 1 1")
    let ran = try ThreadActivity.threadsThatRanWhileLeftAlone(observer.pid)
    #expect(ran.isEmpty, "the observer's process ran with no post made (it wakes itself?): \(ran)")
  }

  @Test func aBurstOfPostsCoalescesAndEndsOnTheLastState() throws {
    let observer = try Peer(container: directory.path)
    let poster = try Peer(container: directory.path)
    try observer.send(.observe, "burst")
    try poster.send(.burst, "burst", "1000")
    var received: [String] = []
    while true {
      let answer = try observer.send(.next, "1000")
      if answer == "none" { break }
      received.append(answer)
    }
    #expect(!received.isEmpty)
    #expect(received.last == "burst 1000 1000")
  }

  @Test func sixteenObserverProcessesAllReceiveOnePost() throws {
    let observers = try (0..<16).map { _ in try Peer(container: directory.path) }
    for observer in observers { try observer.send(.observe, "broadcast") }
    try SharedContainer(directory: directory.path).signal("broadcast").post(state: 7)
    for observer in observers {
      #expect(try observer.send(.next) == "broadcast 7 1")
    }
  }

  @Test(.enabled(if: runsLinuxCode, "reads /proc; Linux's event loop is a thread (Apple's, a queue)"))
  func oneProcessObserves200NamesWithOneWatcherThread() throws {
    let observer = try Peer(container: directory.path)
    #expect(try observer.send(.threadsNamed, "liaison-events") == "0")
    try observer.send(.observeMany, "name", "200")
    #expect(try observer.send(.threadsNamed, "liaison-events") == "1")
    let container = try SharedContainer(directory: directory.path)
    try container.signal("name-137").post(state: 5)
    #expect(try observer.send(.next) == "name-137 5 1")
    try container.signal("name-3").post(state: 6)
    #expect(try observer.send(.next) == "name-3 6 1")
  }

  @Test func ownPostsCanBeIgnored() throws {
    let observer = try Peer(container: directory.path)
    try observer.send(.observe, "mine", "ignore-own")
    try observer.send(.post, "mine", "1")
    #expect(try observer.send(.next, "300") == "none")
    try SharedContainer(directory: directory.path).signal("mine").post(state: 2)
    #expect(try observer.send(.next) == "mine 2 2")
  }

  @Test func settingTheStateDoesNotNotify() throws {
    let observer = try Peer(container: directory.path)
    try observer.send(.observe, "quiet")
    let signal = try SharedContainer(directory: directory.path).signal("quiet")
    try signal.setState(9)
    #expect(try signal.state == 9)
    try signal.post()
    // The first notification is the post's: setting the state delivered nothing.
    #expect(try observer.send(.next) == "quiet 9 1")
  }

  @Test func aKilledObserverLeavesNothingThatGrowsAndPostersCarryOn() throws {
    let observer = try Peer(container: directory.path)
    try observer.send(.observe, "crash")
    let signal = try SharedContainer(directory: directory.path).signal("crash")
    try signal.post(state: 1)
    #expect(try observer.send(.next) == "crash 1 1")
    let before = try folderSnapshot()
    observer.kill()
    for state in 2...101 { try signal.post(state: UInt64(state)) }
    #expect(try signal.state == 101)
    #expect(try folderSnapshot() == before)
  }

  @Test(.enabled(if: readsProc, "reads /proc (Linux)")) func endingObservationsReturnsDescriptorsAndThreads() throws {
    let peer = try Peer(container: directory.path)
    let report = try peer.send(.signalResidue, "residue").split(separator: " ")
    #expect(report[0] == report[2], "descriptors before \(report[0]), after \(report[2]); \(report.dropFirst(5))")
    #expect(report[1] == report[3], "threads before \(report[1]), after \(report[3])")
    #expect(report[4] == "liaison-threads=0")
  }

  @Test(.enabled(if: readsProc, "reads /proc (Linux)")) func aPresenceWatchEndedAfterItsLeaseLapsedLeavesNoThread()
    throws
  {
    let peer = try Peer(container: directory.path)
    #expect(try peer.send(.lapseResidue, "brief") == "liaison-threads=0")
  }

  @Test func extremeSequenceNumbersAreDeliveredWithoutTrapping() throws {
    let observer = try Peer(container: directory.path)
    try observer.send(.observe, "extreme")
    let path = directory.path + "/.liaison/signals/extreme"
    for sequence: UInt64 in [1 << 63 + 10, .max] {
      let record = SignalFile.Record(sequence: sequence, state: 3, poster: 1)
      try Data(SignalFile.encode(record)).write(to: URL(fileURLWithPath: path))
      #expect(try observer.send(.next) == "extreme 3 \(sequence)")
    }
  }

  @Test func subscribersRacingToWatchOneSignalAllReceiveAPost() throws {
    let container = try SharedContainer(directory: directory.path)
    let poster = try Peer(container: directory.path)
    for round in 0..<30 {
      let name = "race-\(round)"
      let received = DispatchSemaphore(value: 0)
      let observations = Locked<[SignalObservation]>([])
      DispatchQueue.concurrentPerform(iterations: 4) { _ in
        let signal = try? container.signal(name)
        if let observation = try? signal?.observe(on: .global(), { _ in received.signal() }) {
          observations.withLock { $0.append(observation) }
        }
      }
      #expect(observations.withLock { $0.count } == 4)
      try poster.send(.post, name, "1")
      for _ in 0..<4 {
        #expect(received.wait(timeout: .now() + 10) == .success, "round \(round)")
      }
    }
  }

  @Test func anAsyncSequenceInThisProcessReceivesAnotherProcesssPost() async throws {
    let container = try SharedContainer(directory: directory.path)
    let notes = try container.signal("async").notifications()
    let poster = try Peer(container: directory.path)
    try poster.send(.post, "async", "77")
    var iterator = notes.makeAsyncIterator()
    let note = await iterator.next()
    #expect(note?.state == 77)
    #expect(note?.name.rawValue == "async")
  }

  /// The handler runs on the event-loop thread (a thread named for it, not the test's or a
  /// queue's), and may cancel its own observation there: the next post is not delivered.
  @Test func aHandlerOnTheEventLoopReceivesAnotherProcesssPostAndMayCancelItself() throws {
    let container = try SharedContainer(directory: directory.path)
    let signal = try container.signal("inline")
    let received = Locked<[UInt64]>([])
    let delivered = DispatchSemaphore(value: 0)
    let observation = Locked<SignalObservation?>(nil)
    let testThread = pthread_self()
    let onOtherThread = Locked(true)
    observation.withLock { slot in
      slot = try? signal.observeOnEventLoop { note in
        onOtherThread.withLock { $0 = $0 && pthread_equal(pthread_self(), testThread) == 0 }
        received.withLock { $0.append(note.state) }
        observation.withLock { $0 }?.cancel()
        delivered.signal()
      }
    }
    try #require(observation.withLock { $0 } != nil)
    let poster = try Peer(container: directory.path)
    try poster.send(.post, "inline", "5")
    #expect(delivered.wait(timeout: .now() + 60) == .success)
    // A second post, then a post on another signal observed from a queue: once that one is
    // delivered, the event loop has read past the second post of `inline` too.
    let marker = Locked<UInt64>(0)
    let markerObservation = try container.signal("marker").observe(on: .global()) { note in
      marker.withLock { $0 = note.state }
    }
    defer { markerObservation.cancel() }
    try poster.send(.post, "inline", "6")
    try poster.send(.post, "marker", "1")
    try waitUntil("the marker is delivered") { marker.withLock { $0 } == 1 }
    #expect(received.withLock { $0 } == [5])
    #expect(onOtherThread.withLock { $0 })
  }

  @Test func badNamesPlantedLinksAndCorruptFilesAreRefused() throws {
    let container = try SharedContainer(directory: directory.path)
    #expect { _ = try container.signal("../x") } throws: { ($0 as? LiaisonError)?.code == .invalidName }
    let target = directory.path + "/precious"
    try "precious".write(toFile: target, atomically: false, encoding: .utf8)
    try FileManager.default.createSymbolicLink(
      atPath: directory.path + "/.liaison/signals/planted", withDestinationPath: target)
    #expect { _ = try container.signal("planted") } throws: { ($0 as? LiaisonError)?.code == .unsafeFile }
    #expect(try String(contentsOfFile: target, encoding: .utf8) == "precious")

    let signal = try container.signal("garbled")
    try "not a signal".write(toFile: directory.path + "/.liaison/signals/garbled", atomically: false, encoding: .utf8)
    #expect {
      try signal.post()
    } throws: { error in
      let error = error as? LiaisonError
      return error?.code == .corruptFile && error?.message.contains("garbled") == true
    }
  }

  /// Names and sizes of every file in the container's private folder.
  private func folderSnapshot() throws -> [String: Int] {
    var snapshot: [String: Int] = [:]
    let root = directory.path + "/.liaison"
    for folder in try FileManager.default.contentsOfDirectory(atPath: root) {
      for file in try FileManager.default.contentsOfDirectory(atPath: root + "/" + folder) {
        let attributes = try FileManager.default.attributesOfItem(atPath: "\(root)/\(folder)/\(file)")
        snapshot["\(folder)/\(file)"] = (attributes[.size] as? NSNumber)?.intValue
      }
    }
    return snapshot
  }
}

@Suite("Presence changes across processes")
struct PresenceChangeTests {
  let directory = TemporaryDirectory()

  @Test func aKilledClaimantIsSeenReleasedByAThirdProcess() throws {
    let watcher = try Peer(container: directory.path)
    try watcher.send(.watchPresence, "recording")
    #expect(try watcher.send(.nextChange).hasPrefix("released"))  // the state at the start

    let app = try Peer(container: directory.path)
    try app.send(.claim, "recording")
    #expect(try watcher.send(.nextChange).hasPrefix("claimed \(app.pid) "))

    let killedAt = monotonicNanoseconds()
    app.kill()
    let answer = try watcher.send(.nextChange).split(separator: " ")
    #expect(answer.first == "released")
    let receivedAt = try #require(UInt64(answer.last ?? ""))
    // How soon is the benchmark's presence.release.kill.
    #expect(receivedAt > killedAt, "the release was seen before the claimant was killed")
  }

  @Test func claimsAndReleasesAreReportedInOrder() throws {
    let watcher = try Peer(container: directory.path)
    try watcher.send(.watchPresence, "sync")
    #expect(try watcher.send(.nextChange).hasPrefix("released"))
    let container = try SharedContainer(directory: directory.path)
    let claim = try container.presence("sync").claim()
    #expect(try watcher.send(.nextChange).hasPrefix("claimed \(getpid()) "))
    claim.release()
    #expect(try watcher.send(.nextChange).hasPrefix("released"))
    let lease = try container.presence("sync").lease(for: .milliseconds(300))
    #expect(try watcher.send(.nextChange).hasPrefix("claimed \(getpid()) "))
    lease.release()
    #expect(try watcher.send(.nextChange).hasPrefix("released"))
  }

  @Test func anExtremeLeaseExpiryDoesNotTrapTheWatcher() throws {
    let watcher = try Peer(container: directory.path)
    try watcher.send(.watchPresence, "forever")
    #expect(try watcher.send(.nextChange).hasPrefix("released"))
    let record = PresenceHolder(
      kind: .lease, processID: watcher.pid, since: Date(), info: nil, leaseExpiry: .max - 10, leaseToken: 7)
    try Data(PresenceRecord.encode(record)).write(
      to: URL(fileURLWithPath: directory.path + "/.liaison/presence/forever"))
    #expect(try watcher.send(.nextChange).hasPrefix("claimed \(watcher.pid) "))
    #expect(try watcher.send(.counts).isEmpty == false)  // still alive
  }

  @Test func aLapsedLeaseIsReportedReleased() throws {
    let watcher = try Peer(container: directory.path)
    try watcher.send(.watchPresence, "upload")
    #expect(try watcher.send(.nextChange).hasPrefix("released"))
    let holder = try Peer(container: directory.path)
    try holder.send(.lease, "upload", "300")
    #expect(try watcher.send(.nextChange).hasPrefix("claimed \(holder.pid) "))
    holder.child.kill(SIGSTOP)  // no more renewals
    #expect(try watcher.send(.nextChange, "5000").hasPrefix("released"))
    holder.child.kill(SIGCONT)
  }

  /// While the container is suspended a post takes no lock: `post` throws `suspended`, and the
  /// store's ring (`ring(state:)`) is kept for `resume()`, which makes it.
  @Test func aSuspendedContainerRefusesPostsAndMakesOwedRingsAtResume() throws {
    let container = try SharedContainer(directory: directory.path)
    let signal = try container.signal("suspended-post")
    try signal.post(state: 1)
    container.suspend()
    #expect {
      try signal.post(state: 2)
    } throws: { error in
      (error as? LiaisonError)?.code == .suspended
    }
    signal.ring(state: { 3 })
    #expect(try signal.state == 1)
    try container.resume()
    #expect(try signal.state == 3)
    try signal.post(state: 4)
    #expect(try signal.state == 4)
  }
}
