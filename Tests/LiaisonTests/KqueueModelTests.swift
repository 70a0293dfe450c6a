// The logic above Apple's kernel, run here against a model of it (`KqueueModel`): peers started
// with LIAISON_KQUEUE_MODEL get the events a vnode source and notify(3) would deliver, a
// NOTE_FUNLOCK for every flock release by anyone above all. Linux only: the model is built on
// inotify.
#if os(Linux)
  import Foundation
  @testable import Liaison
  import LiaisonTestSupport
  import Testing

  @Suite("Apple's event semantics, modelled on Linux")
  struct KqueueModelTests {
    let directory = TemporaryDirectory()
    let model = TemporaryDirectory()

    private func peer() throws -> Peer {
      try Peer(container: directory.path, environment: ["LIAISON_KQUEUE_MODEL": model.path])
    }

    /// The locks taken and released on the presence's file so far, by every process in the model.
    private func unlocks(of presence: String) -> Int {
      KqueueModel.unlockCount(in: model.path, ofFileAt: directory.path + "/.liaison/presence/" + presence)
    }

    /// Watched and free, a presence is looked at once, not forever: a look's own release is a
    /// NOTE_FUNLOCK, and answering each with another look spun a core (today's code took tens of
    /// thousands of locks in this second). Then every claim and release by another process is
    /// still seen, with a bounded number of looks each.
    @Test func aWatchedFreePresenceIsLookedAtOnlyForTheEventsThatHappened() throws {
      let watcher = try peer()
      try watcher.send(.watchPresence, "recording")
      #expect(try watcher.send(.nextChange, "10000").hasPrefix("released"))
      // The measurement: a second in which nothing happens to the presence.
      let before = unlocks(of: "recording")
      Thread.sleep(forTimeInterval: 1)
      let idle = unlocks(of: "recording") - before
      #expect(idle <= 1, "a free presence watched for 1 s was locked and released \(idle) times")

      let app = try peer()
      let cycles = 5
      let start = unlocks(of: "recording")
      for _ in 0..<cycles {
        try app.send(.claim, "recording")
        #expect(try watcher.send(.nextChange, "10000").hasPrefix("claimed \(app.pid)"))
        try app.send(.release, "recording")
        #expect(try watcher.send(.nextChange, "10000").hasPrefix("released"))
      }
      Thread.sleep(forTimeInterval: 0.5)
      // Per cycle: the holder's release, and the watcher's look at it, perhaps two (a write and
      // an unlock delivered apart); never a look answered by a look.
      let used = unlocks(of: "recording") - start
      #expect(used <= cycles * 3, "\(cycles) claims and releases cost \(used) unlocks")
    }

    /// A holder killed with SIGKILL is seen released: its death's close is an unlock of a file the
    /// last look found locked exclusively.
    @Test func aKilledHolderIsSeenReleased() throws {
      let watcher = try peer()
      let app = try peer()
      try app.send(.claim, "navigation")
      try watcher.send(.watchPresence, "navigation")
      #expect(try watcher.send(.nextChange, "10000").hasPrefix("claimed \(app.pid)"))
      app.kill()
      #expect(try watcher.send(.nextChange, "10000").hasPrefix("released"))
    }

    /// After `suspend()`, a watch keeps following the presence without taking a lock: every
    /// unlock of its file is then the holder's own.
    @Test func aSuspendedWatcherFollowsThePresenceWithoutLocking() throws {
      let watcher = try peer()
      try watcher.send(.watchPresence, "sync")
      #expect(try watcher.send(.nextChange, "10000").hasPrefix("released"))
      try watcher.send(.suspend)
      let app = try peer()
      let start = unlocks(of: "sync")
      let cycles = 3
      for _ in 0..<cycles {
        try app.send(.claim, "sync")
        #expect(try watcher.send(.nextChange, "10000").hasPrefix("claimed \(app.pid)"))
        #expect(try watcher.send(.active, "sync") == "true")
        try app.send(.release, "sync")
        #expect(try watcher.send(.nextChange, "10000").hasPrefix("released"))
        #expect(try watcher.send(.active, "sync") == "false")
      }
      #expect(unlocks(of: "sync") - start == cycles, "the suspended watcher took locks")
      try watcher.send(.resume)
    }

    /// A signal's post is a write and an unlock: an observer in the model is told of each post
    /// made after the previous notification, with its state.
    @Test func aPostReachesAnObserverInTheModel() throws {
      let observer = try peer()
      let poster = try peer()
      try observer.send(.observe, "changed")
      for state in 1...5 {
        try poster.send(.post, "changed", state)
        let note = try observer.send(.next, "10000").split(separator: " ")
        #expect(note.count == 3 && note[0] == "changed" && note[1] == "\(state)", "got \(note)")
      }
    }
  }
#endif
