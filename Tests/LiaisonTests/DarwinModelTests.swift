// What Liaison's Apple code does with XNU's events, in the Darwin model only (the trait
// DarwinModel): it counts the `flock`s every process of the model takes, which only the model
// records.
#if DarwinModel
  import DarwinModel
  import Foundation
  @testable import Liaison
  import LiaisonTestSupport
  import Testing

  @Suite("Apple's events, in the Darwin model")
  struct DarwinModelTests {
    let directory = TemporaryDirectory()

    /// The `flock`s taken so far on the presence's file, by every process of the model.
    private func locks(of presence: String) -> Int {
      DarwinModelFiles.lockCount(ofFileAt: directory.path + "/.liaison/presence/" + presence)
    }

    /// XNU posts NOTE_FUNLOCK for every `flock` release, a look's own included. A look at a claim
    /// whose holder died (its record stays) takes the file's lock for a moment and releases it:
    /// were each such release answered by another look, the watch would spin for ever. Watched,
    /// the presence is looked at for the events that happened only: at most once in an idle
    /// second, then once per claim and release by another process.
    @Test func aWatchedPresenceWhoseHolderDiedIsLookedAtOnlyForTheEventsThatHappened() throws {
      let holder = try Peer(container: directory.path)
      try holder.send(.claim, "recording")
      let watcher = try Peer(container: directory.path)
      try watcher.send(.watchPresence, "recording")
      #expect(try watcher.send(.nextChange, "10000").hasPrefix("claimed \(holder.pid)"))
      holder.kill()
      #expect(try watcher.send(.nextChange, "10000").hasPrefix("released"))
      // The measurement: a second in which nothing happens to the presence.
      let before = locks(of: "recording")
      Thread.sleep(forTimeInterval: 1)
      let idle = locks(of: "recording") - before
      #expect(idle <= 1, "a presence watched for 1 s was locked \(idle) times")

      let app = try Peer(container: directory.path)
      let cycles = 5
      let start = locks(of: "recording")
      for _ in 0..<cycles {
        try app.send(.claim, "recording")
        #expect(try watcher.send(.nextChange, "10000").hasPrefix("claimed \(app.pid)"))
        try app.send(.release, "recording")
        #expect(try watcher.send(.nextChange, "10000").hasPrefix("released"))
      }
      // Per cycle: the claim's lock, and a look or two by the watcher; never a look answered by
      // a look.
      let used = locks(of: "recording") - start
      #expect(used <= cycles * 4, "\(cycles) claims and releases cost \(used) locks")
    }

    /// `SharedContainer(appGroup:)` opens the container of a group the process is entitled to (the
    /// model's entitlement), and refuses another with `invalidArgument`, as on iOS.
    @Test func anAppGroupOpensWhenEntitledAndIsRefusedOtherwise() throws {
      let group = "group.com.example.liaison-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
      setenv("LIAISON_DARWIN_MODEL_APP_GROUPS", "group.com.example.other,\(group)", 1)
      let folder = DarwinModelFiles.folder + "/app-groups/" + group
      defer { try? FileManager.default.removeItem(atPath: folder) }
      let container = try SharedContainer(appGroup: group)
      try container.presence("recording").claim().release()
      #expect(FileManager.default.fileExists(atPath: folder + "/.liaison/presence/recording"))
      #expect {
        _ = try SharedContainer(appGroup: group + ".misspelt")
      } throws: { error in
        (error as? LiaisonError)?.code == .invalidArgument
      }
    }

    /// A lease whose holder died lapses, and a watch in this process sees it released at its end
    /// (the deadline's two timers, the wall clock's and `DispatchTime`'s).
    @Test func aLapsedLeaseIsSeenReleasedAtItsEnd() async throws {
      let holder = try Peer(container: directory.path)
      try holder.send(.lease, "sync", "300")
      let presence = try SharedContainer(directory: directory.path).presence("sync")
      let seen = Locked<[String]>([])
      let changes = try presence.changes()
      let watch = Task {
        for try await change in changes {
          if case .released = change {
            seen.withLock { $0.append("released") }
          } else {
            seen.withLock { $0.append("claimed") }
          }
        }
      }
      defer { watch.cancel() }
      try await waitUntilOffThePool("the lease is seen") { seen.withLock { $0 } == ["claimed"] }
      holder.kill()
      try await waitUntilOffThePool("the lapsed lease is seen released") {
        seen.withLock { $0 } == ["claimed", "released"]
      }
    }

    /// After `suspend()`, a watch follows the presence without taking a lock: the locks taken are
    /// the other process's claims alone.
    @Test func aSuspendedWatcherFollowsThePresenceWithoutLocking() throws {
      let watcher = try Peer(container: directory.path)
      try watcher.send(.watchPresence, "sync")
      #expect(try watcher.send(.nextChange, "10000").hasPrefix("released"))
      try watcher.send(.suspend)
      let app = try Peer(container: directory.path)
      let start = locks(of: "sync")
      let cycles = 3
      for _ in 0..<cycles {
        try app.send(.claim, "sync")
        #expect(try watcher.send(.nextChange, "10000").hasPrefix("claimed \(app.pid)"))
        try app.send(.release, "sync")
        #expect(try watcher.send(.nextChange, "10000").hasPrefix("released"))
      }
      #expect(locks(of: "sync") - start == cycles, "the suspended watcher took locks")
    }
  }
#endif
