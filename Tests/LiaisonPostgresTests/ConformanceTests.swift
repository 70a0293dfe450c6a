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

    /// A holder killed with SIGKILL: a waiter in another process, waiting before the kill, holds the
    /// lock after it (how soon is the benchmark's `lock.handoff.kill` and `pg.lock.handoff`).
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func aKilledHoldersLockGoesToAWaiter(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let holder = try place.peer()
      try #require(try holder.send(.placeLock, "job").hasPrefix("locked"))
      let waiter = try place.peer()
      waiter.start(.placeLock, "job")
      try waitUntil("the waiter waits for the lock") { try place.waits(waiter.pid, for: "job") }
      let killedAt = monotonicNanoseconds()
      holder.kill()
      let answer = try waiter.child.readLine(timeout: 60)
      #expect(answer.hasPrefix("ok locked"), "\(answer)")
      #expect(try timestamp(answer) > killedAt, "the waiter held the lock before the holder was killed")
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
        let answer = try peer.send(.placeLock, "job").split(separator: " ")
        tokens.append(try #require(UInt64(answer[1])))
        #expect(try await lock.tryLock(.exclusive) == nil)
        #expect(try await lock.tryLock(.shared) == nil)
        try peer.send(.placeUnlock, "job")
        let held = try #require(try await lock.tryLock(.exclusive))
        tokens.append(try await held.fencingToken())
        await held.unlock()
      }
      #expect(tokens == tokens.sorted() && Set(tokens).count == tokens.count, "tokens \(tokens)")
      let shared = try #require(try await lock.tryLock(.shared))
      #expect(try peer.send(.placeTrylock, "job", "shared").hasPrefix("locked"))
      #expect(try peer.send(.placeTrylock, "other").hasPrefix("locked"))
      #expect(try await lock.tryLock(.exclusive) == nil)
      await #expect(throws: LiaisonError.self) { try await shared.fencingToken() }
      await shared.unlock()
      try peer.send(.placeUnlock, "job")
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
      try #require(try peer.send(.placeLock, "job").hasPrefix("locked"))
      let error = await #expect(throws: LiaisonError.self) {
        try await lock.lock(.exclusive, timeout: .milliseconds(100))
      }
      #expect(error?.code == .timedOut)
      let waiting = Task { try await lock.lock(.exclusive, timeout: nil) }
      waiting.cancel()
      await #expect { try await waiting.value } throws: { ($0 as? LiaisonError)?.code == .cancelled }
      try peer.send(.placeUnlock, "job")
      let held = try await lock.lock(.exclusive, timeout: .seconds(60))
      #expect(held.isHeld)
    }

    // MARK: Presences

    /// A claim is seen from another process; a second claim is refused; the holder killed with
    /// SIGKILL is reported released to an observer (how soon is the benchmark's
    /// `presence.release.kill`)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func aKilledHoldersPresenceIsReleasedToObservers(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let observer = try place.peer()
      try observer.send(.placeWatch, "recorder")
      #expect(try observer.send(.placeNextchange).hasPrefix("released"))
      let holder = try place.peer()
      try holder.send(.placeClaim, "recorder", "episode", "7")
      #expect(try observer.send(.placeNextchange).hasPrefix("claimed \(holder.pid) "))
      #expect(try observer.send(.placeHolder, "recorder") == "\(holder.pid) episode 7")
      #expect(try observer.ask(.placeClaim, "recorder").contains("already claimed"))
      let killedAt = monotonicNanoseconds()
      holder.kill()
      let answer = try observer.send(.placeNextchange)
      #expect(answer.hasPrefix("released"), "\(answer)")
      #expect(try timestamp(answer) > killedAt, "the observer saw the release before the holder was killed")
      #expect(try observer.send(.placeHolder, "recorder") == "none")
      try observer.send(.placeClaim, "recorder")
    }

    // MARK: Signals

    /// After every post, an observer in another process receives at least one notification whose
    /// state is no older than the post's; a burst may coalesce but ends on the last state; an
    /// observer ignoring its own posts does not see them.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func postsReachObserversInOtherProcesses(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let observer = try place.peer()
      try observer.send(.placeObserve, "changed")
      let poster = try place.peer()
      try poster.send(.placePost, "changed", "7")
      #expect(try observer.send(.placeNextnotification).hasPrefix("7 "))
      for state in 1...50 { try poster.send(.placePost, "changed", state) }
      var last = ""
      while !last.hasPrefix("50 ") {
        last = try observer.send(.placeNextnotification)
        try #require(last != "none", "the burst's last state never arrived")
      }
      #expect(try observer.send(.placeState, "changed") == "50")
      try observer.send(.placePost, "changed", "99")  // its own: ignored
      try poster.send(.placePost, "changed", "100")
      #expect(try observer.send(.placeNextnotification).hasPrefix("100 "))
    }
  }
#endif
