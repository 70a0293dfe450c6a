#if Postgres
  import Foundation
  import Liaison
  @testable import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// Liaison behind a real PgBouncer (Debian's), as a managed service's pooled endpoint is: in
  /// session mode every part works; in transaction or statement mode, where a lock would belong
  /// to whichever client gets the session next, opening the place fails at once and says what to
  /// do, so that nothing is ever shared; in transaction mode with `pool_mode=transaction`, locks
  /// and claims are leases (the conformance suite runs through it too: the `pooled` backend).
  @Suite("PostgreSQL behind PgBouncer")
  struct PoolerTests {
    static let message: Comment = "needs PostgreSQL and PgBouncer (apt-get install postgresql pgbouncer)"
    static var mustRun: Bool { PostgresTestServer.mustRun && PgBouncerTestServer.mustRun }

    private var namespace: String { "pooled-\(UInt32.random(in: 0...UInt32.max))" }

    /// A throwaway server with a PgBouncer in `mode` in front of it (both removed by ``remove(_:_:)``).
    private static func serverBehindPooler(_ mode: PgBouncerTestServer.PoolMode, settings: [String] = []) throws
      -> (PostgresTestServer, PgBouncerTestServer)
    {
      let server = try PostgresTestServer.start()
      do {
        return (server, try PgBouncerTestServer.start(in: server, mode: mode, settings: settings))
      } catch {
        server.remove()
        throw error
      }
    }

    private static func remove(_ server: PostgresTestServer, _ bouncer: PgBouncerTestServer) {
      bouncer.remove()
      server.remove()
    }

    /// The pooler's URL with `pool_mode=transaction`: leases.
    private static func leaseURL(_ bouncer: PgBouncerTestServer) -> String { bouncer.url + "&pool_mode=transaction" }

    /// Through a pooler in transaction or statement mode, opening the place throws
    /// `invalidArgument`, naming the pooler and what to do (before any lock is asked for); the
    /// test's own server has no Liaison schema afterwards: nothing was set up through the pooler.
    @Test(.enabled(if: Self.mustRun, Self.message), arguments: [PgBouncerTestServer.PoolMode.transaction, .statement])
    func aPoolerThatSharesSessionsIsRefusedAtOnce(_ mode: PgBouncerTestServer.PoolMode) async throws {
      let (server, bouncer) = try Self.serverBehindPooler(mode)
      defer { Self.remove(server, bouncer) }
      let error = await #expect(throws: LiaisonError.self) {
        try await PostgresContainer(url: bouncer.url, namespace: namespace)
      }
      #expect(error?.code == .invalidArgument)
      #expect(
        error?.message.contains("pooler in transaction or statement mode") == true, "\(String(describing: error))")
      #expect(error?.message.contains("Connect to the server directly") == true)
      #expect(error?.message.contains("pool_mode=transaction") == true)
      #expect(try server.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'liaison'") == "0")
      // With pool_mode=transaction, a transaction pooler is what is expected; a statement pooler,
      // which refuses transactions, is still refused.
      if mode == .statement {
        let refused = await #expect(throws: LiaisonError.self) {
          try await PostgresContainer(url: Self.leaseURL(bouncer), namespace: namespace)
        }
        #expect(refused?.message.contains("refuses transactions") == true, "\(String(describing: refused))")
        #expect(try server.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'liaison'") == "0")
      }
    }

    /// A transaction pooler that hands out its idle sessions in turn (`server_round_robin`) or
    /// the most recently used first, with several idle sessions: opening a place without
    /// `pool_mode=transaction` is refused every time (as `liaison` opens it: no command runs), and
    /// nothing is set up on the server. (Before,
    /// in turn with two idle sessions, the check passed every time, and lock sections overlapped.)
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: Self.mustRun, Self.message), arguments: [(true, 2), (false, 2), (true, 1), (true, 5)])
    func aTransactionPoolerIsRefusedEveryTime(_ inTurn: Bool, idle: Int) async throws {
      // On a thread of its own: its blocking calls (psql, the server's start and stop, a child's
      // end) never hold a thread of the cooperative pool that the suites beside it need.
      try await withTaskExecutorPreference(OwnThreadExecutor()) {
        let (server, bouncer) = try Self.serverBehindPooler(
          .transaction, settings: ["server_round_robin = \(inTurn ? 1 : 0)"])
        defer { Self.remove(server, bouncer) }
        // `idle` sessions in the pool: as many transactions held at once, then ended.
        let sessions = try (0..<idle).map { _ in try RawSession(bouncer: bouncer, of: server) }
        for session in sessions { try session.run("BEGIN; SELECT 1;") }
        for session in sessions { try session.run("COMMIT;") }
        for attempt in 0..<10 {
          let error = await #expect(throws: LiaisonError.self, "attempt \(attempt)") {
            try await PostgresContainer(url: bouncer.url, namespace: namespace)
          }
          #expect(error?.message.contains("add pool_mode=transaction") == true, "\(String(describing: error))")
        }
        #expect(try server.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'liaison'") == "0")
        for session in sessions { session.end() }
      }
    }

    /// A pooler that passed the check at open (in session mode then) and hands sessions out in
    /// turn per transaction since: every grant on a connection made since, whose statement runs
    /// in another session than the one the connection learned when it was made, is refused,
    /// saying what to add, and takes nothing in that session: the pooler's sessions hold no
    /// advisory lock after. (Before, the check ran at open alone, and the locks and the claim
    /// were granted in sessions that belonged to whichever client got them next.) The heartbeat
    /// of a hold checks its session the same way.
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: Self.mustRun, Self.message))
    func aPoolerThatStartsSharingSessionsAfterTheOpenIsRefusedAtTheGrant() async throws {
      // On a thread of its own: its blocking calls (psql, the pooler's reload) never hold a
      // thread of the cooperative pool that the suites beside it need.
      try await withTaskExecutorPreference(OwnThreadExecutor()) {
        let (server, bouncer) = try Self.serverBehindPooler(.session)
        defer { Self.remove(server, bouncer) }
        let place = try await PostgresContainer(url: bouncer.url, namespace: namespace)
        let lock = try place.lock("job")
        let presence = try place.presence("worker")
        // Taken once before, so that their rows' ids are known: a grant is then one statement.
        await (try #require(try await lock.tryLock())).unlock()
        await (try await presence.claim()).release()
        // Sessions handed out in turn per transaction from now on; the connections made before
        // keep theirs, and go. Three idle sessions in the pool: as many transactions at once.
        try bouncer.reload(mode: .transaction, settings: ["server_round_robin = 1"])
        place.connector.closeIdle()
        let sessions = try (0..<3).map { _ in try RawSession(bouncer: bouncer, of: server) }
        for session in sessions { try session.run("BEGIN; SELECT 1;") }
        for session in sessions { try session.run("COMMIT;") }
        for session in sessions { session.end() }
        for mode in [LockMode.exclusive, .shared] {
          let refused = await #expect(throws: LiaisonError.self, "\(mode)") { try await lock.tryLock(mode) }
          #expect(refused?.message.contains("add pool_mode=transaction") == true, "\(String(describing: refused))")
        }
        let refused = await #expect(throws: LiaisonError.self) { try await presence.claim() }
        #expect(refused?.message.contains("add pool_mode=transaction") == true, "\(String(describing: refused))")
        #expect(try server.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == "0")
        await place.close()
      }
    }

    // MARK: Leases (pool_mode=transaction)

    /// A lease holder whose process is stopped (SIGSTOP) for longer than its trust: the first
    /// thing it reads when it resumes, `isHeld`, is `false`, while its cooperative pool is too busy
    /// for the lease's monitor to run (before, the flag stayed `true` until that task had a thread
    /// and noticed, and the code under the lock went on). The bound here is 3 s, trusted for 1.8 s.
    @Test(.enabled(if: Self.mustRun, Self.message))
    func aLeaseHolderStoppedPastItsTrustReadsNotHeldWhenItResumes() throws {
      let place = try BackendPlace(.pooled)
      let holder = try place.peer(environment: ["LIAISON_TEST_DETECTION_BOUND": "3"])
      #expect(try holder.send(.placeLock, "job").hasPrefix("locked "))
      #expect(try holder.send(.placeIsheld, "job") == "held")
      // Its cooperative pool busy until 2 s after it resumes: the lease's monitor cannot run then.
      #expect(try holder.send(.busyPool, "6000") == "busy")
      holder.child.kill(SIGSTOP)
      let stoppedAt = monotonicNanoseconds()
      // Stopped past its trust: the time is the subject here (the holder runs nothing meanwhile).
      try waitUntil("4 s pass", timeout: 60) { milliseconds(from: stoppedAt, to: monotonicNanoseconds()) >= 4000 }
      holder.child.kill(SIGCONT)
      #expect(try holder.send(.placeIsheld, "job") == "not-held")
    }

    /// Through a transaction pooler with `pool_mode=transaction`, a lock and a claim are leases:
    /// rows with a holder and an end, and no advisory lock on the server. A lease and a session
    /// (a container connected directly) exclude each other both ways, and the fencing token grows
    /// across both.
    @Test(.enabled(if: Self.mustRun, Self.message))
    func leasesAndSessionsExcludeEachOther() async throws {
      let (server, bouncer) = try Self.serverBehindPooler(.transaction)
      defer { Self.remove(server, bouncer) }
      let namespace = namespace
      let pooled = try await PostgresContainer(url: Self.leaseURL(bouncer), namespace: namespace)
      let direct = try await PostgresContainer(url: BackendPlace.url(server), namespace: namespace)

      let leased = try #require(try await pooled.lock("job").tryLock())
      let leaseToken = try await leased.fencingToken()
      #expect(
        try server.psql("SELECT count(*) FROM liaison.lock WHERE name = 'job' AND lease_end > now()") == "1")
      #expect(try server.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted") == "0")
      #expect(try await direct.lock("job").tryLock(.exclusive) == nil)
      #expect(try await direct.lock("job").tryLock(.shared) == nil)
      await #expect { try await direct.lock("job").lock(timeout: .milliseconds(600)) } throws: {
        ($0 as? LiaisonError)?.code == .timedOut
      }
      await leased.unlock()
      let session = try await direct.lock("job").lock(timeout: .seconds(30))
      #expect(try await session.fencingToken() > leaseToken)
      #expect(try await pooled.lock("job").tryLock(.exclusive) == nil)
      #expect(try await pooled.lock("job").tryLock(.shared) == nil)
      // A lease's waiter takes it once the session lets go.
      let waiter = Task { try await pooled.lock("job").lock(timeout: .seconds(30)) }
      await session.unlock()
      let next = try await waiter.value
      #expect(try await next.fencingToken() > leaseToken + 1)
      await next.unlock()

      // Shared leases share, with each other and with shared sessions; they exclude exclusive.
      let sharedLease = try #require(try await pooled.lock("job").tryLock(.shared))
      let otherShared = try #require(try await pooled.lock("job").tryLock(.shared))
      let sharedSession = try #require(try await direct.lock("job").tryLock(.shared))
      #expect(try await direct.lock("job").tryLock(.exclusive) == nil)
      #expect(try await pooled.lock("job").tryLock(.exclusive) == nil)
      await sharedLease.unlock()
      await otherShared.unlock()
      await sharedSession.unlock()

      // A claim is a lease too, and excludes a session's claim (and the other way round).
      let claim = try await pooled.presence("recorder").claim(info: "pooled")
      #expect(try await direct.presence("recorder").holder?.info == "pooled")
      await #expect { try await direct.presence("recorder").claim() } throws: {
        ($0 as? LiaisonError)?.code == .alreadyClaimed
      }
      await claim.release()
      #expect(try await direct.presence("recorder").isActive == false)
      let sessionClaim = try await direct.presence("recorder").claim()
      await #expect { try await pooled.presence("recorder").claim() } throws: {
        ($0 as? LiaisonError)?.code == .alreadyClaimed
      }
      // An observer through the pooler follows a session's claim too, waiting in no session (a
      // wait there would strand its lock in a pooled session and block the next claim).
      let changes = try await pooled.presence("recorder").changes()
      var observed = changes.makeAsyncIterator()
      #expect(try await observed.next() == .claimed(try #require(try await direct.presence("recorder").holder)))
      await sessionClaim.release()
      #expect(try await observed.next() == .released)
      let again = try await direct.presence("recorder").claim()
      await again.release()
      await pooled.close()
      await direct.close()
    }

    /// Closing a container frees its leases before it returns: its holds are lost, and another
    /// container takes the lock and the claim at once.
    @Test(.enabled(if: Self.mustRun, Self.message))
    func closeFreesEveryLease() async throws {
      let (server, bouncer) = try Self.serverBehindPooler(.transaction)
      defer { Self.remove(server, bouncer) }
      let namespace = namespace
      let pooled = try await PostgresContainer(url: Self.leaseURL(bouncer), namespace: namespace)
      let direct = try await PostgresContainer(url: BackendPlace.url(server), namespace: namespace)
      let held = try await pooled.lock("job").lock()
      let claim = try await pooled.presence("recorder").claim()
      await pooled.close()
      #expect(held.loss?.code == .lost)
      #expect(claim.loss?.code == .lost)
      #expect(pooled.activity.backgroundTasks == 0 && pooled.activity.connections == 0)
      let taken = try await direct.lock("job").tryLock()
      #expect(taken != nil)
      await taken?.unlock()
      let claimed = try await direct.presence("recorder").claim()
      await claimed.release()
      await #expect { try await pooled.lock("job").tryLock() } throws: { ($0 as? LiaisonError)?.code == .closed }
      await direct.close()
    }

    /// A lease does not live in a connection: a restart of the pooler leaves it held, and it is
    /// renewed through the pooler once it is back. (A bound of 20 s: under Thread Sanitizer, a
    /// renewal that reconnects through the restarted pooler took longer than a 3 s bound trusts.)
    @Test(.enabled(if: Self.mustRun, Self.message))
    func aLeaseOutlivesAPoolerRestart() async throws {
      let (server, bouncer) = try Self.serverBehindPooler(.transaction)
      defer { Self.remove(server, bouncer) }
      let place = try await PostgresContainer(
        url: Self.leaseURL(bouncer), namespace: namespace, configuration: .init(detectionBound: .seconds(20)))
      let held = try await place.lock("job").lock()
      let restartedAt = try server.psql("SELECT clock_timestamp()")
      try bouncer.restart()
      try await waitUntilOffThePool("a renewal through the pooler after its restart") {
        let renewed = try server.psql(
          "SELECT count(*) FROM liaison.lock WHERE name = 'job' AND lease_end > '\(restartedAt)'::timestamptz + interval '20 s'"
        )
        return renewed == "1"
      }
      #expect(held.isHeld)
      #expect(held.loss == nil)
      await held.unlock()
      await place.close()
    }

    /// A holder cut off from the server (the pooler frozen: its statements go unanswered)
    /// learns that its lease is lost before another process may take the lock, which then takes
    /// it with a larger token: the order the fencing token relies on.
    @Test(.enabled(if: Self.mustRun, Self.message))
    func aHolderCutOffLearnsOfTheLossBeforeAnotherTakesTheLock() async throws {
      let (server, bouncer) = try Self.serverBehindPooler(.transaction)
      defer { Self.remove(server, bouncer) }
      let namespace = namespace
      let pooled = try await PostgresContainer(
        url: Self.leaseURL(bouncer), namespace: namespace, configuration: .init(detectionBound: .seconds(5)))
      let direct = try await PostgresContainer(url: BackendPlace.url(server), namespace: namespace)
      let held = try await pooled.lock("job").lock()
      let firstToken = try await held.fencingToken()
      bouncer.freeze()
      defer { bouncer.thaw() }
      try await withThrowingTaskGroup(of: (String, ContinuousClock.Instant).self) { group in
        group.addTask {
          let loss = try await held.waitForLoss()
          #expect(loss?.code == .lost, "\(String(describing: loss))")
          return ("loss", .now)
        }
        group.addTask {
          let taken = try await direct.lock("job").lock(timeout: .seconds(60))
          #expect(try await taken.fencingToken() > firstToken)
          await taken.unlock()
          return ("taken", .now)
        }
        var order: [String] = []
        for try await (event, _) in group { order.append(event) }
        #expect(order == ["loss", "taken"])
      }
      bouncer.thaw()
      await pooled.close()
      await direct.close()
    }

    /// Through a pooler in session mode, every part works as on a direct connection (the one
    /// test body of the protocol family), although PgBouncer refuses the server settings Liaison
    /// sends to a server.
    @Test(.enabled(if: Self.mustRun, Self.message))
    func everyPartWorksThroughASessionPooler() async throws {
      let (server, bouncer) = try Self.serverBehindPooler(.session)
      defer { Self.remove(server, bouncer) }
      let place = try await PostgresContainer(url: bouncer.url, namespace: namespace)
      try await OneAPITests().exercise(place)
      await place.close()
    }

    /// A pooler that restarts ends its clients' sessions: a lock held through it is reported
    /// lost (its connection closed), another container then takes it with a larger fencing
    /// token, through the pooler back up.
    @Test(.enabled(if: Self.mustRun, Self.message))
    func aPoolerRestartLosesTheLockAndItIsTakenAgain() async throws {
      let (server, bouncer) = try Self.serverBehindPooler(.session)
      defer { Self.remove(server, bouncer) }
      let namespace = namespace
      let holderPlace = try await PostgresContainer(url: bouncer.url, namespace: namespace)
      let held = try await holderPlace.lock("job").lock()
      let firstToken = try await held.fencingToken()
      try bouncer.restart()
      let loss = try await held.waitForLoss()
      #expect(loss?.code == .lost, "\(String(describing: loss))")
      let otherPlace = try await PostgresContainer(url: bouncer.url, namespace: namespace)
      let taken = try await otherPlace.lock("job").lock(timeout: .seconds(30))
      #expect(try await taken.fencingToken() > firstToken)
      await taken.unlock()
      await holderPlace.close()
      await otherPlace.close()
    }
  }
#endif
