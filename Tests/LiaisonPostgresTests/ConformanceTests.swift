#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// The cross-process promises of locks, presences and signals, on both backends: the same test
  /// code, through the coordination protocols, against a folder and against PostgreSQL.
  @Suite("Conformance: every backend keeps the same promises")
  struct ConformanceTests {
    static let backends = Backend.allCases

    // MARK: Locks

    /// A holder killed with SIGKILL: a waiter in another process holds the lock within 100 ms.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func aKilledHoldersLockGoesToAWaiterWithin100Milliseconds(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let holder = try place.peer()
      try #require(try holder.send("place-lock job").hasPrefix("locked"))
      let waiter = try place.peer()
      waiter.child.write("place-lock job")
      try waitUntil("the waiter waits for the lock") { try place.waits(waiter.pid, for: "job") }
      let killedAt = monotonicNanoseconds()
      holder.kill()
      let answer = try waiter.child.readLine(timeout: 60)
      #expect(answer.hasPrefix("ok locked"), "\(answer)")
      let elapsed = milliseconds(from: killedAt, to: try timestamp(answer))
      print("\(backend): the waiter held the lock \(elapsed) ms after the holder was killed")
      #expect(elapsed < 100, "the waiter held the lock \(elapsed) ms after the holder was killed")
    }

    /// Exclusive excludes, shared shares; each exclusive grant's token is larger than the last,
    /// whichever process holds it.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func exclusiveExcludesSharedSharesAndTokensGrow(_ backend: Backend) async throws {
      let place = try BackendPlace(backend)
      try await check(try await place.open(), place)
    }

    private func check(_ opened: some CoordinationPlace, _ place: BackendPlace) async throws {
      let lock = try opened.lock("job")
      let peer = try place.peer()
      var tokens: [UInt64] = []
      for _ in 0..<3 {
        let answer = try peer.send("place-lock job").split(separator: " ")
        tokens.append(try #require(UInt64(answer[1])))
        #expect(try await lock.tryLock(.exclusive) == nil)
        #expect(try await lock.tryLock(.shared) == nil)
        try peer.send("place-unlock job")
        let held = try #require(try await lock.tryLock(.exclusive))
        tokens.append(try await held.fencingToken())
        await held.unlock()
      }
      #expect(tokens == tokens.sorted() && Set(tokens).count == tokens.count, "tokens \(tokens)")
      let shared = try #require(try await lock.tryLock(.shared))
      #expect(try peer.send("place-trylock job shared").hasPrefix("locked"))
      #expect(try peer.send("place-trylock other").hasPrefix("locked"))
      #expect(try await lock.tryLock(.exclusive) == nil)
      await #expect(throws: LiaisonError.self) { try await shared.fencingToken() }
      await shared.unlock()
      try peer.send("place-unlock job")
      #expect(try await lock.tryLock(.exclusive) != nil)
    }

    /// A wait ends at its timeout, with `timedOut`, and a cancelled wait ends at once.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func aWaitTimesOutAndACancelledWaitEnds(_ backend: Backend) async throws {
      let place = try BackendPlace(backend)
      try await checkWaits(try await place.open(), place)
    }

    private func checkWaits(_ opened: some CoordinationPlace, _ place: BackendPlace) async throws {
      let lock = try opened.lock("job")
      let peer = try place.peer()
      try #require(try peer.send("place-lock job").hasPrefix("locked"))
      let error = await #expect(throws: LiaisonError.self) {
        try await lock.lock(.exclusive, timeout: .milliseconds(100))
      }
      #expect(error?.code == .timedOut)
      let waiting = Task { try await lock.lock(.exclusive, timeout: nil) }
      waiting.cancel()
      await #expect { try await waiting.value } throws: { ($0 as? LiaisonError)?.code == .cancelled }
      try peer.send("place-unlock job")
      let held = try await lock.lock(.exclusive, timeout: .seconds(60))
      #expect(held.isHeld)
    }

    // MARK: Presences

    /// A claim is seen from another process; a second claim is refused; the holder killed with
    /// SIGKILL is reported released to an observer within 100 ms.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func aKilledHoldersPresenceIsReleasedToObserversWithin100Milliseconds(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let observer = try place.peer()
      try observer.send("place-watch recorder")
      #expect(try observer.send("place-nextchange").hasPrefix("released"))
      let holder = try place.peer()
      try holder.send("place-claim recorder episode 7")
      #expect(try observer.send("place-nextchange").hasPrefix("claimed \(holder.pid) "))
      #expect(try observer.send("place-holder recorder") == "\(holder.pid) episode 7")
      #expect(try observer.ask("place-claim recorder").contains("already claimed"))
      let killedAt = monotonicNanoseconds()
      holder.kill()
      let answer = try observer.send("place-nextchange")
      #expect(answer.hasPrefix("released"), "\(answer)")
      let elapsed = milliseconds(from: killedAt, to: try timestamp(answer))
      print("\(backend): the observer saw the release \(elapsed) ms after the holder was killed")
      #expect(elapsed < 100, "the observer saw the release \(elapsed) ms after the holder was killed")
      #expect(try observer.send("place-holder recorder") == "none")
      try observer.send("place-claim recorder")
    }

    // MARK: Signals

    /// After every post, an observer in another process receives at least one notification whose
    /// state is no older than the post's; a burst may coalesce but ends on the last state; an
    /// observer ignoring its own posts does not see them.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func postsReachObserversInOtherProcesses(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let observer = try place.peer()
      try observer.send("place-observe changed")
      let poster = try place.peer()
      try poster.send("place-post changed 7")
      #expect(try observer.send("place-nextnotification").hasPrefix("7 "))
      for state in 1...50 { try poster.send("place-post changed \(state)") }
      var last = ""
      while !last.hasPrefix("50 ") {
        last = try observer.send("place-nextnotification")
        try #require(last != "none", "the burst's last state never arrived")
      }
      #expect(try observer.send("place-state changed") == "50")
      try observer.send("place-post changed 99")  // its own: ignored
      try poster.send("place-post changed 100")
      #expect(try observer.send("place-nextnotification").hasPrefix("100 "))
    }
  }
#endif
