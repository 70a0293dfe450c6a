#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// The cross-process promises of shared defaults, on both backends: the same test driving
  /// peers that use `SharedDefaults` on a folder or `PostgresDefaults` on PostgreSQL (the peer's
  /// `place-d…` commands, one body for both).
  @Suite("Conformance: shared defaults keep the same promises on every backend")
  struct DefaultsConformanceTests {
    static let backends = Backend.allCases

    /// Another process's `set` has returned and this process has been notified (its `changes()`
    /// delivered a newer state): this process's next `get` returns the new value, never the one
    /// its cache held. Thirty rounds, each with the old value cached first.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func aGetAfterTheNotificationOfAnotherProcesssSetReturnsItsValue(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let reader = try place.peer()
      let writer = try place.peer()
      try writer.send(.placeDset, "settings", "n", "0")
      try reader.send(.placeDobserve, "settings")
      #expect(try reader.send(.placeDget, "settings", "n") == "0")
      var seen: UInt64 = 0
      for round in 1...30 {
        #expect(try reader.send(.placeDget, "settings", "n") == "\(round - 1)")  // cached now
        try writer.send(.placeDset, "settings", "n", round)
        // The first notification newer than the last one seen is this round's write.
        while true {
          let answer = try reader.send(.placeDnextnotification)
          let state = try #require(UInt64(answer), "no notification after round \(round)'s set: \(answer)")
          if state > seen {
            seen = state
            break
          }
        }
        #expect(try reader.send(.placeDget, "settings", "n") == "\(round)", "round \(round)")
      }
    }

    /// Four processes × 100 atomic increments of one key: exactly 400.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func fourProcessesIncrementingOneKeyCountExactly(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let peers = try (0..<4).map { _ in try place.peer() }
      for peer in peers { peer.start(.placeDincrement, "counters", "launches", "100") }
      for peer in peers {
        let answer = try peer.child.readLine(timeout: 300)
        #expect(answer == "ok done", "\(answer)")
      }
      #expect(try peers[0].send(.placeDget, "counters", "launches") == "400")
    }

    /// `changes(of:)` in one process: the value now, then each value another process sets, the
    /// last of a burst included.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func changesOfAKeyReachAnObserverInAnotherProcess(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let observer = try place.peer()
      try observer.send(.placeDwatch, "settings", "volume")
      #expect(try observer.send(.placeDnext) == "nil")
      let writer = try place.peer()
      try writer.send(.placeDset, "settings", "volume", "1")
      #expect(try observer.send(.placeDnext) == "1")
      for volume in 2...20 { try writer.send(.placeDset, "settings", "volume", volume) }
      var last = ""
      while last != "20" {
        last = try observer.send(.placeDnext)
        try #require(last != "none", "the burst's last value never arrived")
      }
    }

    /// A value read as another type is `typeMismatch`; a value over 1 MiB is `tooLarge` (and 1 MiB
    /// exactly is stored); a key that breaks the naming rule is `invalidName`.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func mismatchedTypesOversizedValuesAndBadNamesAreRefused(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let peer = try place.peer()
      try peer.send(.placeDsetstring, "settings", "theme", "dark")
      #expect(try peer.send(.placeDgetstring, "settings", "theme") == "dark")
      #expect(try peer.ask(.placeDget, "settings", "theme").hasPrefix("error type mismatch:"))
      #expect(try peer.ask(.placeDsetbytes, "settings", "blob", (1 << 20) + 1).hasPrefix("error too large:"))
      try peer.send(.placeDsetbytes, "settings", "blob", 1 << 20)
      #expect(try peer.ask(.placeDget, "settings", "bad/name").hasPrefix("error invalid name:"))
      let other = try place.peer()
      #expect(try other.ask(.placeDget, "settings", "theme").hasPrefix("error type mismatch:"))
    }

    /// Three processes find a token stale at once; the first to refresh is killed (SIGKILL) in the
    /// middle of its refresh. Exactly one more refresh happens (two lines in the file every
    /// fetch appends to before it can be killed), both survivors return its value, and so does a
    /// fourth process that asks afterwards, without fetching.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func aRefresherKilledMidRefreshIsReplacedByExactlyOneMoreRefresh(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let folder = TemporaryDirectory()
      let countFile = folder.path + "/refreshes"
      let peers = try (0..<3).map { _ in try place.peer() }
      try peers[0].send(.placeDsetstring, "auth", "token", "stale")
      for peer in peers { peer.start(.placeDrefresh, "auth", "token", countFile, "hang-first") }
      try waitUntil("the first refresh has started") { FileManager.default.fileExists(atPath: countFile + ".started") }
      let first = try #require(Int32(try fetches(countFile).first ?? ""))
      let refresher = try #require(peers.first { $0.pid == first }, "the first refresher \(first) is not a peer")
      let killedAt = monotonicNanoseconds()
      refresher.kill()
      let survivors = peers.filter { $0.pid != first }
      let answers = try survivors.map { try $0.child.readLine(timeout: 120) }
      print("\(backend): both survivors answered \((monotonicNanoseconds() - killedAt) / 1_000_000) ms after the kill")
      let refreshes = try fetches(countFile)
      #expect(refreshes.count == 2, "fetches by \(refreshes)")
      let second = refreshes.count > 1 ? refreshes[1] : "none"
      #expect(second != "\(first)")
      for answer in answers { #expect(answer == "ok fresh-from-\(second)") }
      let late = try place.peer()
      #expect(try late.send(.placeDrefresh, "auth", "token", countFile) == "fresh-from-\(second)")
      #expect(try fetches(countFile).count == 2)
    }

    /// The process ids of the fetches, in order, from the file each fetch appends to.
    private func fetches(_ countFile: String) throws -> [String] {
      try String(contentsOfFile: countFile, encoding: .utf8).split(separator: "\n").map(String.init)
    }
  }
#endif
