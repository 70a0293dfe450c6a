#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// What the server and the network do to a `PostgresMailbox`: a restart, a receiver whose host
  /// is cut off. Each test has a server of its own, since it stops it or cuts it off.
  @Suite("PostgreSQL: mailboxes through restarts and dead hosts")
  struct MailboxFailureTests {
    /// How many old acknowledged ids the mailbox remembers in the test of a receiver's start.
    static let oldIDs = runsUnderASanitizer() ? 300_000 : 3_000_000

    private func lines(_ log: String) -> [String] {
      ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    private func messages(_ log: String) -> [String] {
      lines(log).filter { $0.hasPrefix("a ") }.map { $0.split(separator: " ").prefix(2).joined(separator: " ") }
    }

    /// The messages a receiver's log holds, whoever sent them: "SENDER N" in the order received.
    private func received(_ log: String) -> [String] {
      lines(log).filter { $0.split(separator: " ").count == 3 }.map {
        $0.split(separator: " ").prefix(2).joined(separator: " ")
      }
    }

    /// A failover to a standby that had not received the last sends' commits (asynchronous
    /// replication loses them): a receiver whose lease survives it, through a URL that lists both
    /// servers, reads again from the first message, and so gets the sends that take the lost
    /// positions again on the new primary. (Before, its cursor stayed past those positions, and it
    /// never delivered them.) The messages it had delivered and not acknowledged come again. The
    /// receiver and the senders are processes of their own, whose threads renew the lease
    /// whatever the suites here keep busy.
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aReceiverThatSurvivesAFailoverWhichLostSendsGetsTheNextSends() async throws {
      // On a thread of its own: its blocking calls (psql, the servers' start and stop, the peers)
      // never hold a thread of the cooperative pool that the suites beside it need.
      try await withTaskExecutorPreference(OwnThreadExecutor()) {
        let primary = try PostgresTestServer.start(durable: false)
        defer { primary.remove() }
        let standby = try PostgresTestServer.startStandby(of: primary)
        defer { standby.remove() }
        let place =
          "postgres://liaison@127.0.0.1:\(primary.port),127.0.0.1:\(standby.port)/liaison?sslmode=disable"
          + "&target_session_attrs=read-write&pool_mode=transaction#fleet"
        // A lease (pool_mode=transaction) long enough to outlive the failover.
        func peer() throws -> Peer { try Peer(container: place, environment: ["LIAISON_TEST_DETECTION_BOUND": "60"]) }
        let logs = TemporaryDirectory()
        let log = logs.path + "/log"
        try peer().send(.placeMsend, "inbox", "a", "3")  // positions 1 to 3
        let receiver = try peer()
        // It reads again when it finds no server, while the primary is down and the standby not
        // yet promoted.
        try receiver.send(.placeMreceive, "inbox", log, "10", "noack", "retry")
        try await waitUntilOffThePool("the receiver has the first messages", timeout: 300) {
          received(log).count == 3
        }
        // Until the standby has replayed the schema's creation, the table does not exist there.
        try await waitUntilOffThePool("the standby has the messages and the receiver's lease", timeout: 300) {
          (try? standby.psql("SELECT count(*) FROM liaison.mailbox_message")) == "3"
        }
        try standby.stop()
        try peer().send(.placeMsend, "inbox", "b", "2")  // positions 4 and 5, on the primary alone
        try await waitUntilOffThePool("the receiver has the messages the failover loses", timeout: 300) {
          received(log).count == 5
        }
        primary.kill()
        try standby.startAgain()
        _ = try standby.psql("SELECT pg_promote()")
        try peer().send(.placeMsend, "inbox", "c", "2")  // positions 4 and 5 again, on the new primary
        try await waitUntilOffThePool("the receiver has the messages sent after the failover", timeout: 300) {
          received(log).contains("c 1") || lines(log).contains { $0.hasPrefix("error") }
        }
        #expect(lines(log).filter { $0.hasPrefix("error") }.isEmpty, "\(lines(log))")
        #expect(received(log) == ["a 0", "a 1", "a 2", "b 0", "b 1", "a 0", "a 1", "a 2", "c 0", "c 1"])
        withExtendedLifetime(logs) {}
      }
    }

    /// A receiver on a host that is cut off: another receiver, waiting for the claim in another
    /// process, gets the messages the cut-off one had not acknowledged within the detection
    /// bound (10 s).
    @Test(.enabled(if: PostgresTestServer.mustRun && NetworkNamespace.mustRun, "needs PostgreSQL and root (ip netns)"))
    func aCutOffReceiversMessagesGoToTheNextWithinTheBound() throws {
      let network = try NetworkNamespace.create()
      let server = try PostgresTestServer.start(listenAddresses: ["127.0.0.1", network.hostAddress])
      let local = try BackendPlace(.postgres, server: server)
      let remote = try BackendPlace(.postgres, server: server, host: network.hostAddress, namespace: local.namespace)
      let logs = TemporaryDirectory()
      try local.peer().send(.placeMsend, "inbox", "a", "10")
      let cutOff = try remote.peer(launcher: network.command)
      try cutOff.send(.placeMreceive, "inbox", "\(logs.path)/cut-off", "64", "noack")
      try waitUntil("the cut-off receiver has the messages") { messages("\(logs.path)/cut-off").count == 10 }
      let next = try local.peer()
      next.start(.placeMreceive, "inbox", "\(logs.path)/next", "64", "60000")
      let cutAt = monotonicNanoseconds()
      try network.cut()
      let answer = try next.child.readLine(timeout: 60)
      #expect(answer.hasPrefix("ok receiving"), "\(answer)")
      try waitUntil("the next receiver has the messages") { messages("\(logs.path)/next").count == 10 }
      let firstAt = try #require(UInt64(lines("\(logs.path)/next")[0].split(separator: " ")[2]))
      try network.restore()
      let after = milliseconds(from: cutAt, to: firstAt)
      print("dead host: the next receiver had the cut-off receiver's messages \(after) ms after the cut")
      #expect(after > 0, "the next receiver had the messages before the cut")
      #expect(messages("\(logs.path)/next") == (0..<10).map { "a \($0)" })
      try waitUntil("the cut-off receiver learns it lost its claim", timeout: 30) {
        lines("\(logs.path)/cut-off").contains { $0.hasPrefix("error") && $0.contains("lost") }
      }
    }

    /// A server restart: the receiver's claim is lost and it says so; a send while the server is
    /// down fails clearly; after the restart, a new receiver gets every message, the
    /// unacknowledged ones included, and a send made after the restart reaches it.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aServerRestartLosesTheReceiverAndNothingElse() throws {
      let server = try PostgresTestServer.start()
      let place = try BackendPlace(.postgres, server: server)
      let logs = TemporaryDirectory()
      let sender = try place.peer()
      try sender.send(.placeMsend, "inbox", "a", "5")
      let receiver = try place.peer()
      try receiver.send(.placeMreceive, "inbox", "\(logs.path)/before", "64", "noack")
      try waitUntil("the receiver has the messages") { messages("\(logs.path)/before").count == 5 }
      try server.stop()
      defer { print("receiver log: \(lines("\(logs.path)/before"))") }
      try waitUntil("the receiver learns it lost its claim", timeout: 20) {
        lines("\(logs.path)/before").contains { $0.hasPrefix("error") && $0.contains("lost") }
      }
      let refused = try sender.ask(.placeMsend, "inbox", "b", "1")
      #expect(refused.hasPrefix("error unavailable"), "\(refused)")
      try server.startAgain()
      let next = try place.peer()
      try next.send(.placeMreceive, "inbox", "\(logs.path)/after", "64")
      try sender.send(.placeMsend, "inbox", "a", "6")  // ids a-0 … a-4 are known: stores a-5 only
      try waitUntil("the new receiver has every message") { messages("\(logs.path)/after").count == 6 }
      #expect(messages("\(logs.path)/after") == (0..<6).map { "a \($0)" })
    }

    /// A mailbox that remembers three million acknowledged ids past their retention, one of them
    /// locked by another transaction (a stand-in for any reason the housekeeping may be slow): a
    /// receiver starts at once, three times in a row, with the default detection bound. Once the
    /// transaction ends, the next receiver's start forgets the old ids in the background, and a
    /// recent one stays. (Before, each start deleted the old ids in one statement on the claim's
    /// connection, under the reply bound: no receiver could start while it was slow, and with a
    /// few million ids it always was on a loaded server.)
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aMailboxWithMillionsOfRememberedIDsStartsItsReceiverEveryTime() async throws {
      // On a thread of its own: its blocking calls (psql, the server's start and stop, a child's
      // end) never hold a thread of the cooperative pool that the suites beside it need.
      try await withTaskExecutorPreference(OwnThreadExecutor()) {
        // (Under a sanitizer, a tenth: the server's work is the same, and the suites beside it, slower
        // there, need the machine; the row lock is what makes the old code fail, not the count.)
        let server = try PostgresTestServer.start()
        defer { server.remove() }
        let place = try await PostgresContainer(url: BackendPlace.url(server), namespace: "fleet")
        let inbox = try await place.mailbox("inbox")
        try await inbox.send("waiting", id: "w")
        // Acknowledged long ago, as a busy mailbox's ids are after months of sends with ids.
        try server.psql(
          """
          INSERT INTO liaison.mailbox_acknowledged (namespace, mailbox, id, acknowledged_at)
          SELECT 'fleet', 'inbox', 'old-' || n, 0 FROM generate_series(1, \(Self.oldIDs)) AS n
          """)
        let blocker = try RawSession(server)
        try blocker.run("BEGIN; SELECT 1 FROM liaison.mailbox_acknowledged WHERE id = 'old-1' FOR UPDATE;")
        for _ in 0..<3 {
          let receiver = try await inbox.receiver()
          #expect(try await receiver.receive(String.self, timeout: .zero).map(\.payload) == ["waiting"])
          await receiver.close()
        }
        try blocker.run("COMMIT;")
        blocker.end()
        let receiver = try await inbox.receiver()
        let old: @Sendable () throws -> String = {
          try server.psql("SELECT count(*) FROM liaison.mailbox_acknowledged WHERE acknowledged_at = 0")
        }
        try await waitUntilOffThePool("the old ids are forgotten", timeout: 300) { try old() == "0" }
        // A recent one stays, and still makes a retried send store nothing.
        try await receiver.acknowledge(receiver.receive(String.self))
        #expect(try await inbox.send("again", id: "w").isStored == false)
        #expect(try server.psql("SELECT id FROM liaison.mailbox_acknowledged") == "w")
        await receiver.close()
        await place.close()
      }
    }
  }
#endif
