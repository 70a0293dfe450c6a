#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// What the network and the server do to locks on PostgreSQL: a server restart, a cut network,
  /// a paused holder; and fencing tokens refusing whoever held a lock that ended. A test that stops
  /// the server, cuts it off, or owns its counter table has a server of its own.
  @Suite("PostgreSQL: restarts, dead hosts, paused holders")
  struct FailureTests {
    /// The counter the fenced increments write: one row, with the largest token written.
    private func makeCounter(_ server: PostgresTestServer) throws {
      try server.psql(
        """
        CREATE TABLE liaison_test_counter (id integer PRIMARY KEY, value bigint NOT NULL, fencing_token bigint NOT NULL);
        INSERT INTO liaison_test_counter VALUES (1, 0, 0)
        """)
    }

    private func counter(_ server: PostgresTestServer) throws -> String {
      try server.psql("SELECT value FROM liaison_test_counter WHERE id = 1").trimmingCharacters(
        in: .whitespacesAndNewlines)
    }

    /// A lease holder's fenced statement still in flight when its lease ends (a holder paused
    /// mid-statement, played here by a raw session): every taker, lease or session, exclusive or
    /// shared, waits for that statement's transaction to end before it takes the lock. (The
    /// fence locks the row `FOR KEY SHARE`, so that the holder's renewals never wait for it; the
    /// takers lock it `FOR UPDATE`.)
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(
      .enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage),
      arguments: [Backend.postgres, .pooled], [LockMode.exclusive, .shared])
    func everyTakerWaitsForAFencedStatementInFlightPastItsLeasesEnd(_ kind: Backend, _ mode: LockMode) async throws {
      // On a thread of its own: its blocking calls (psql) never hold a thread of the cooperative
      // pool that the suites beside it need.
      // Its task too, explicitly (an unstructured task does not take the preference).
      let thread = OwnThreadExecutor()
      try await withTaskExecutorPreference(thread) {
        let backend = try BackendPlace(kind)
        let server = try #require(backend.server)
        // A reply bound (a fifth of it) long enough for the waits below, however busy the machine.
        let place = try await backend.open(detectionBound: .seconds(120)) as! PostgresContainer
        let lock = try place.lock("job")
        await (try #require(try await lock.tryLock())).unlock()
        let session = try RawSession(server)
        defer { session.end() }
        let row = "namespace = '\(backend.namespace)' AND name = 'job'"
        try session.run(
          """
          UPDATE liaison.lock SET lease_holder = gen_random_uuid(), lease_end = clock_timestamp() + interval '1 second'
          WHERE \(row);
          BEGIN;
          SELECT 1 FROM liaison.lock WHERE \(row) AND lease_end > clock_timestamp() FOR KEY SHARE;
          """)
        try await waitUntilOffThePool("the lease ends", timeout: 300) {
          try server.psql("SELECT lease_end <= clock_timestamp() FROM liaison.lock WHERE \(row)") == "t"
        }
        let ended = Locked(false)
        let taking = Task(executorPreference: thread) {
          defer { ended.withLock { $0 = true } }
          return try await lock.tryLock(mode)
        }
        try await waitUntilOffThePool("the taker waits for the fenced statement, or ends", timeout: 300) {
          try session.blocksAnother(server) || ended.withLock { $0 }
        }
        #expect(!ended.withLock { $0 }, "the taker did not wait for the fenced statement")
        try session.run("COMMIT;")
        let taken = try await taking.value
        #expect(taken != nil)
        await taken?.unlock()
        await place.close()
      }
    }

    /// The server stops while a lock is held: the holder is told at once (its connection closes),
    /// before the server is back and another process can take the lock; tokens after the restart
    /// are larger than before it.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aServerRestartLosesTheLockAndTokensKeepGrowing() throws {
      let server = try PostgresTestServer.start()
      let place = try BackendPlace(.postgres, server: server)
      let holder = try place.peer()
      let before = try #require(UInt64(try holder.send(.placeLock, "job").split(separator: " ")[1]))
      holder.start(.placeLost, "job")
      try server.stop()
      let lost = try holder.child.readLine(timeout: 60)
      #expect(lost.hasPrefix("ok lost"), "\(lost)")
      try server.startAgain()
      let other = try place.peer()
      let answer = try other.send(.placeLock, "job").split(separator: " ")
      let after = try #require(UInt64(answer[1]))
      #expect(after > before, "token \(after) after the restart, \(before) before")
      #expect(milliseconds(from: try timestamp(lost), to: try #require(UInt64(answer[2]))) > 0)
    }

    /// A lease holder whose URL lists first an address that stops answering (cut: a failover
    /// left it behind, say) and whose connections end: its renewal gives that address its share
    /// of the time the lease is still trusted, not the whole connect timeout (30 s), and renews
    /// through the next server in time. (Before, the renewal waited out the connect timeout, and
    /// the lease was lost when its trust, 12 s here, ran out.) The holder is a process of its own,
    /// whose threads renew its lease whatever the suites here keep busy. The wait is the subject,
    /// not a synchronisation: the renewal would fail in it.
    @Test(.enabled(if: PostgresTestServer.mustRun && NetworkNamespace.mustRun, "needs PostgreSQL and root (ip netns)"))
    func aRenewalThatMustReconnectPassesOverAnAddressThatStoppedAnsweringInTime() throws {
      let network = try NetworkNamespace.create()
      let server = try PostgresTestServer.start(durable: false)
      defer { server.remove() }
      // Nothing listens in the namespace: its address refuses connections at once until the cut.
      let place =
        "postgres://liaison@\(network.namespaceAddress):\(server.port),127.0.0.1:\(server.port)/liaison"
        + "?sslmode=disable&pool_mode=transaction#fleet"
      let holder = try Peer(container: place, environment: ["LIAISON_TEST_DETECTION_BOUND": "20"])
      #expect(try holder.send(.placeLock, "job").hasPrefix("locked "))
      try network.cut()
      // Every connection of the holder ends: its next renewal must connect again.
      _ = try server.psql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
          + "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
      Thread.sleep(forTimeInterval: 24)  // twice the trust
      #expect(try holder.send(.placeIsheld, "job") == "held")
      withExtendedLifetime(network) {}
    }

    /// A dead host: the holder's network is cut (a network namespace whose link drops every
    /// packet). Another process takes the lock within the detection bound (10 s); the cut-off
    /// holder learns it lost the lock before that, and once reconnected, its write with its old
    /// token is refused.
    @Test(.enabled(if: PostgresTestServer.mustRun && NetworkNamespace.mustRun, "needs PostgreSQL and root (ip netns)"))
    func aCutOffHolderLosesTheLockWithinTheBoundAndLearnsItFirst() throws {
      let network = try NetworkNamespace.create()
      let server = try PostgresTestServer.start(listenAddresses: ["127.0.0.1", network.hostAddress])
      try makeCounter(server)
      let local = try BackendPlace(.postgres, server: server)
      let remote = try BackendPlace(.postgres, server: server, host: network.hostAddress, namespace: local.namespace)
      let holder = try remote.peer(launcher: network.command)
      let first = try #require(UInt64(try holder.send(.placeLock, "job").split(separator: " ")[1]))
      #expect(try holder.send(.pgFencedwrite, first) == "applied")
      holder.start(.placeLost, "job")
      let waiter = try local.peer()
      waiter.start(.placeLock, "job")
      try waitUntil("the waiter waits for the lock") { try local.waits(waiter.pid, for: "job") }
      let cutAt = monotonicNanoseconds()
      try network.cut()
      let taken = try waiter.child.readLine(timeout: 60)
      let lost = try holder.child.readLine(timeout: 60)
      try network.restore()
      #expect(taken.hasPrefix("ok locked"), "\(taken)")
      #expect(lost.hasPrefix("ok lost"), "\(lost)")
      let takenAfter = milliseconds(from: cutAt, to: try timestamp(taken))
      let lostAfter = milliseconds(from: cutAt, to: try timestamp(lost))
      print(
        "dead host: the holder learned of the loss \(lostAfter) ms after the cut, another process took the lock at \(takenAfter) ms"
      )
      #expect(takenAfter > 0, "another process took the lock before the cut")
      #expect(lostAfter < takenAfter, "the holder learned of the loss at \(lostAfter) ms, after the other took it")
      let second = try #require(UInt64(taken.split(separator: " ")[2]))
      #expect(second > first)
      #expect(try waiter.send(.pgFencedwrite, second) == "applied")
      // Its old connections may have been dropped by the server: a write may fail once with
      // "unavailable"; it must never be applied.
      var verdict = try holder.ask(.pgFencedwrite, first)
      if !verdict.hasPrefix("ok") { verdict = try holder.ask(.pgFencedwrite, first) }
      #expect(verdict == "ok refused")
      #expect(try counter(server) == "2")
    }

    /// 8 processes × 200 increments under one lock, each guarded by its fencing token: exactly
    /// 1,600, and no write refused (every holder held the lock when it wrote).
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func eightProcessesIncrementExactlyUnderOneLock() throws {
      let server = try PostgresTestServer.start()
      try makeCounter(server)
      let place = try BackendPlace(.postgres, server: server)
      let peers = try (0..<8).map { _ in try place.peer() }
      for peer in peers { peer.start(.pgFencedincrement, "job", "200") }
      var applied = 0
      for peer in peers {
        let answer = try peer.child.readLine(timeout: 300)
        let counts = answer.split(separator: " ")
        try #require(counts.count == 3 && counts[0] == "ok", "\(answer)")
        applied += Int(counts[1])!
        #expect(counts[2] == "0", "writes refused: \(answer)")
      }
      #expect(applied == 1_600)
      #expect(try counter(server) == "1600")
    }

    /// A holder paused (SIGSTOP) while its session is ended (here by `pg_terminate_backend`, as a
    /// server restart or a cut network would): another process takes the lock and writes; the
    /// paused holder, resumed, writes with its old token and is refused.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func theFencingTokenRefusesAPausedHolder() throws {
      let server = try PostgresTestServer.start()
      try makeCounter(server)
      let place = try BackendPlace(.postgres, server: server)
      let paused = try place.peer()
      let old = try #require(UInt64(try paused.send(.placeLock, "job").split(separator: " ")[1]))
      paused.child.kill(SIGSTOP)
      let terminated = try server.psql(
        """
        SELECT count(pg_terminate_backend(pid)) FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND classid = \(0x4C49_4C4B)::oid
        """)
      #expect(terminated.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
      let next = try place.peer()
      let new = try #require(UInt64(try next.send(.placeLock, "job", "60000").split(separator: " ")[1]))
      #expect(new > old)
      #expect(try next.send(.pgFencedwrite, new) == "applied")
      paused.child.kill(SIGCONT)
      #expect(try paused.send(.pgFencedwrite, old) == "refused")
      #expect(try paused.send(.placeLost, "job").hasPrefix("lost"))
      #expect(try counter(server) == "1")
    }

    /// A lock lost while `withLock`'s body runs (its session terminated, as by a restart): the
    /// body's task is cancelled, `withLock` throws the loss, and the guard says why.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func withLockCancelsItsBodyWhenTheLockIsLost() async throws {
      let server = try PostgresTestServer.start()
      let place = try await PostgresContainer(
        url: BackendPlace.url(server), namespace: "withlock", configuration: .init(detectionBound: .seconds(10)))
      let (started, entered) = AsyncStream.makeStream(of: Void.self)
      let running = Task {
        try await place.lock("job").withLock {
          entered.yield()
          try? await Task.sleep(for: .seconds(3600))  // ends when cancelled
          return Task.isCancelled
        }
      }
      var iterator = started.makeAsyncIterator()
      await iterator.next()
      let terminated = try server.psql(
        """
        SELECT count(pg_terminate_backend(pid)) FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND classid = \(0x4C49_4C4B)::oid
        """)
      #expect(terminated.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
      let error = await #expect(throws: LiaisonError.self) { try await running.value }
      #expect(error?.code == .lost)
      #expect(try await place.lock("job").tryLock(.exclusive) != nil)
    }

    /// Observers' notifications survive the server's restart: the listening connection comes
    /// back, and a post after the restart reaches the observer.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func notificationsSurviveAServerRestart() throws {
      let server = try PostgresTestServer.start()
      let place = try BackendPlace(.postgres, server: server)
      let observer = try place.peer()
      try observer.send(.placeObserve, "changed")
      try server.restart()
      let poster = try place.peer()
      try poster.send(.placePost, "changed", "5")
      #expect(try observer.send(.placeNextnotification).hasPrefix("5 "))
    }
  }
#endif
