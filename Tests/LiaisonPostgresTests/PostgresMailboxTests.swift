#if Postgres
  import Foundation
  import Liaison
  @testable import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// A `PostgresMailbox` in one process: ids, limits, quarantine, handing back, and the receive
  /// claim. What crosses processes (a killed receiver, concurrent senders) is in
  /// ``MailboxConformanceTests``; what the server and the network do, in ``MailboxFailureTests``.
  @Suite("PostgreSQL: a mailbox's API")
  struct PostgresMailboxTests {
    struct Note: Codable, Sendable, Equatable {
      let text: String
    }

    private func open() async throws -> PostgresContainer {
      try await BackendPlace(.postgres).open() as! PostgresContainer
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aRetriedIdStoresNothingEvenAfterItsAcknowledgement() async throws {
      let place = try await open()
      let inbox = try await place.mailbox("inbox")
      #expect(try await inbox.send(Note(text: "one"), id: "draft-1") == MailboxReceipt(id: "draft-1", isStored: true))
      // A duplicate is visible to its sender: the receipt says that nothing was stored.
      #expect(
        try await inbox.send(Note(text: "again"), id: "draft-1") == MailboxReceipt(id: "draft-1", isStored: false))
      #expect(try await inbox.count() == 1)
      let receiver = try await inbox.receiver()
      let received = try await receiver.receive(Note.self)
      #expect(received.map(\.payload) == [Note(text: "one")])
      try await receiver.acknowledge(received)
      #expect(try await inbox.send(Note(text: "after"), id: "draft-1").isStored == false)
      #expect(try await inbox.count() == 0)
      #expect(try await receiver.receive(Note.self, timeout: .zero).isEmpty)
      await #expect(throws: LiaisonError.self) { try await inbox.send(Note(text: ""), id: "") }
    }

    /// A send that retries the id of a message whose removal (an acknowledgement) is not yet
    /// committed waits for that removal, and then stores nothing: the id is acknowledged. (Sends
    /// and removals no longer lock the same row: without the wait, the send would store the
    /// message again once the removal had deleted it.)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aRetriedIdSentWhileItsRemovalIsUncommittedStoresNothing() async throws {
      let backend = try BackendPlace(.postgres)
      let server = try #require(backend.server)
      let place = try await backend.open() as! PostgresContainer
      let inbox = try await place.mailbox("inbox")
      #expect(try await inbox.send(Note(text: "one"), id: "draft-1").isStored)
      let session = try RawSession(server)
      defer { session.end() }
      let removed = try session.run(
        """
        BEGIN;
        SELECT count(*) FROM liaison.mailbox_remove('\(backend.namespace)', 'inbox',
          ARRAY(SELECT position FROM liaison.mailbox_message
            WHERE namespace = '\(backend.namespace)' AND mailbox = 'inbox' AND id = 'draft-1'),
          ARRAY['draft-1'], extract(epoch FROM now())::float8);
        """)
      #expect(removed.contains("1"), "\(removed)")
      let retried = Task { try await inbox.send(Note(text: "again"), id: "draft-1") }
      try await waitUntilOffThePool("the retried send waits for the removal", timeout: 300) {
        try session.blocksAnother(server)
      }
      try session.run("COMMIT;")
      #expect(try await retried.value == MailboxReceipt(id: "draft-1", isStored: false))
      #expect(try await inbox.count() == 0)
      #expect(try await inbox.peek().isEmpty)
      await place.close()
    }

    /// An acknowledgement that waits behind another writer's row lock for twice the reply bound
    /// (the receipt's row, held by a removal not yet committed) keeps its claim and completes once
    /// the row is free; one with a timeout shorter than the wait times out, saying so, and the
    /// claim stays. (Before, the claim's heartbeat queued behind the waiting statement with its
    /// reply bound running, and the claim was lost: the messages went to the next receiver.) The
    /// wait is the subject here, not a synchronisation: the heartbeat would fire in it.
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func anAcknowledgementWaitingBehindARowLockKeepsItsClaim() async throws {
      // On a thread of its own: its blocking calls (psql, the server's start and stop, a child's
      // end) never hold a thread of the cooperative pool that the suites beside it need.
      // Its task too, explicitly (an unstructured task does not take the preference).
      let thread = OwnThreadExecutor()
      try await withTaskExecutorPreference(thread) {
        let backend = try BackendPlace(.postgres)
        let server = try #require(backend.server)
        let place = try await backend.open() as! PostgresContainer
        let inbox = try await place.mailbox("inbox")
        try await inbox.sendAll([1, 2])
        let receiver = try await inbox.receiver()
        let received = try await receiver.receive(Int.self, limit: 2)
        let session = try RawSession(server)
        defer { session.end() }
        try session.run(
          """
          BEGIN;
          SELECT 1 FROM liaison.mailbox_receipt WHERE namespace = '\(backend.namespace)' AND name = 'inbox' FOR UPDATE;
          """)
        let timedOut = await #expect(throws: LiaisonError.self) {
          try await receiver.acknowledge(received[0], timeout: .seconds(1))
        }
        #expect(timedOut?.code == .timedOut, "\(String(describing: timedOut))")
        let acknowledging = Task(executorPreference: thread) { try await receiver.acknowledge(received) }
        try await waitUntilOffThePool("the acknowledgement waits for the receipt's row", timeout: 300) {
          try session.blocksAnother(server)
        }
        let bound = place.detectionBound
        try await Task.sleep(for: bound / 5 * 2 + bound / 7)
        #expect(receiver.loss == nil, "\(String(describing: receiver.loss))")
        try session.run("COMMIT;")
        try await acknowledging.value
        #expect(receiver.loss == nil)
        #expect(try await inbox.count() == 0)
        await receiver.close()
        await place.close()
      }
    }

    /// Sends and removals do not wait for each other: an acknowledgement goes through while a
    /// send is not yet committed, and a send while a removal is not (each has a timeout that
    /// would pass if it waited). A send's limits count a removal not yet committed as not made:
    /// it is refused rather than let through too early.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func sendsAndRemovalsDoNotWaitForEachOther() async throws {
      let backend = try BackendPlace(.postgres)
      let server = try #require(backend.server)
      let place = try await backend.open() as! PostgresContainer
      let inbox = try await place.mailbox("inbox")
      try await inbox.setLimits(MailboxLimits(maximumMessages: 3))
      try await inbox.sendAll([1, 2])
      let receiver = try await inbox.receiver()
      let received = try await receiver.receive(Int.self, limit: 2)
      #expect(received.map(\.payload) == [1, 2])
      let session = try RawSession(server)
      defer { session.end() }
      // A send not yet committed holds the mailbox's row.
      try session.run(
        """
        BEGIN;
        SELECT liaison.mailbox_send('\(backend.namespace)', 'inbox', 'raw', extract(epoch FROM now())::float8,
          60, ARRAY['raw-1'], ARRAY[true], ARRAY[0::smallint], ARRAY['\\x33'::bytea]);
        """)
      try await receiver.acknowledge(received[0], timeout: .seconds(20))
      try session.run("ROLLBACK;")
      #expect(try await inbox.count() == 1)
      // A removal not yet committed holds the receipt's row.
      try session.run(
        """
        BEGIN;
        SELECT count(*) FROM liaison.mailbox_remove('\(backend.namespace)', 'inbox',
          ARRAY(SELECT position FROM liaison.mailbox_message
            WHERE namespace = '\(backend.namespace)' AND mailbox = 'inbox' ORDER BY position),
          ARRAY(SELECT id FROM liaison.mailbox_message
            WHERE namespace = '\(backend.namespace)' AND mailbox = 'inbox' ORDER BY position),
          extract(epoch FROM now())::float8);
        """)
      try await inbox.sendAll([3, 4], timeout: .seconds(20))
      #expect(try await inbox.count() == 3, "the removal is not committed")
      let full = await #expect(throws: LiaisonError.self) { try await inbox.send(5, timeout: .seconds(20)) }
      #expect(full?.code == .tooLarge)
      try session.run("COMMIT;")
      #expect(try await inbox.count() == 2)
      try await inbox.send(5, timeout: .seconds(20))
      var rest: [Int] = []
      while rest.count < 3 { rest += try await receiver.receive(Int.self, limit: 5).map(\.payload) }
      #expect(rest == [3, 4, 5])
      #expect(try await place.mailboxes().first { $0.name.rawValue == "inbox" }?.waiting == 3)
      await place.close()
    }

    /// An acknowledgement and a quarantine fetch their messages by row id, however cheap a scan
    /// of the whole table looks to the planner. The session makes every fetch by row id look a
    /// thousand times dearer than it is, which without the functions' own setting made the
    /// planner scan the table and compare each row with each id; the table's sequential scans
    /// in the transaction (`pg_stat_xact_user_tables`) stay at none.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func removalsAndQuarantinesNeverScanTheWholeTable() async throws {
      let backend = try BackendPlace(.postgres)
      let server = try #require(backend.server)
      let place = try await backend.open() as! PostgresContainer
      let inbox = try await place.mailbox("inbox")
      try await inbox.sendAll(Array(0..<60))
      let waiting = try server.psql(
        """
        SELECT string_agg(position::text, ',' ORDER BY position) || ' ' || string_agg(id, ',' ORDER BY position)
        FROM liaison.mailbox_message WHERE namespace = '\(backend.namespace)' AND mailbox = 'inbox'
        """
      ).split(separator: " ").map { $0.split(separator: ",").map(String.init) }
      let (positions, ids) = (try #require(waiting.first), try #require(waiting.last))
      #expect(positions.count == 60 && ids.count == 60)
      // psql prints each statement's result on its lines: the last line is the count of scans.
      func sequentialScans(_ call: String) throws -> String {
        try server.psql(
          """
          SET random_page_cost = 4000;
          SELECT \(call);
          SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'liaison.mailbox_message'::regclass;
          """
        ).split(separator: "\n").last.map(String.init) ?? ""
      }
      let acknowledged = positions.prefix(50)
      let removing = try sequentialScans(
        """
        count(*) FROM liaison.mailbox_remove('\(backend.namespace)', 'inbox',
          '{\(acknowledged.joined(separator: ","))}', '{\(ids.prefix(50).joined(separator: ","))}', 0)
        """)
      #expect(removing == "0", "sequential scans of the messages while removing: \(removing)")
      #expect(try await inbox.count() == 10)
      let reasons = Array(repeating: "unreadable", count: 10)
      let quarantining = try sequentialScans(
        """
        liaison.mailbox_quarantine('\(backend.namespace)', 'inbox', '{\(positions.suffix(10).joined(separator: ","))}',
          '{\(reasons.joined(separator: ","))}')
        """)
      #expect(quarantining == "0", "sequential scans of the messages while quarantining: \(quarantining)")
      #expect(try await inbox.count() == 0)
      #expect(try await place.mailboxes().first { $0.name.rawValue == "inbox" }?.quarantined == 10)
      await place.close()
    }

    /// A send of generated ids stores every message or none: an id made twice (which 128 random
    /// bits never are) fails the whole send, instead of dropping a message whose receipt says
    /// it was stored. A send with given ids stores a repeated id once, as a retry.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aGeneratedIdMadeTwiceFailsTheSendAndAGivenOneIsStoredOnce() async throws {
      let backend = try BackendPlace(.postgres)
      let server = try #require(backend.server)
      let place = try await backend.open() as! PostgresContainer
      let inbox = try await place.mailbox("inbox")
      func send(given: Bool) throws -> String {
        try server.psql(
          """
          SELECT liaison.mailbox_send('\(backend.namespace)', 'inbox', 'raw', extract(epoch FROM now())::float8, 60,
            ARRAY['twice', 'twice'], ARRAY[\(given), \(given)], ARRAY[0, 0]::smallint[], ARRAY['\\x31', '\\x32']::bytea[])
          """)
      }
      let generated = #expect(throws: (any Error).self) { try send(given: false) }
      #expect(String(describing: generated).contains("duplicate key"), "\(String(describing: generated))")
      #expect(try await inbox.count() == 0, "nothing of the failed send was stored")
      #expect(try send(given: true) == "1")
      #expect(try await inbox.count() == 1)
      await place.close()
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func limitsRefuseTheWholeSendWithAClearError() async throws {
      let place = try await open()
      let inbox = try await place.mailbox("inbox")
      #expect(try await inbox.limits() == MailboxLimits())
      try await inbox.setLimits(MailboxLimits(maximumMessageSize: 20, maximumMessages: 3))
      #expect(try await inbox.limits() == MailboxLimits(maximumMessageSize: 20, maximumMessages: 3))
      let tooLarge = await #expect(throws: LiaisonError.self) {
        try await inbox.send(String(repeating: "x", count: 30))
      }
      #expect(tooLarge?.code == .tooLarge)
      #expect(tooLarge?.message.contains("at most 20 bytes") == true, "\(tooLarge?.message ?? "")")
      try await inbox.sendAll([1, 2])
      let full = await #expect(throws: LiaisonError.self) { try await inbox.sendAll([3, 4]) }
      #expect(full?.code == .tooLarge)
      #expect(try await inbox.count() == 2, "a refused batch stores none of its messages")
      try await inbox.send(3)
      await #expect(throws: LiaisonError.self) { try await inbox.setLimits(MailboxLimits(maximumMessages: 0)) }
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func anUndecodableMessageIsQuarantinedRequeuedAndRemoved() async throws {
      let place = try await open()
      let inbox = try await place.mailbox("inbox")
      try await inbox.send("not a note")
      try await inbox.send(Note(text: "fine"))
      try await inbox.send(Data([0xFF, 0x00]))
      let receiver = try await inbox.receiver()
      #expect(try await receiver.receive(Note.self).map(\.payload) == [Note(text: "fine")])
      let entries = try await inbox.peek()
      #expect(entries.count == 3)
      #expect(entries.filter { $0.quarantineReason != nil }.count == 2, "\(entries.map(\.quarantineReason))")
      #expect(try await place.mailboxes().first?.quarantined == 2)
      #expect(try await inbox.requeueQuarantined() == 2)
      let again = try await receiver.receive(String.self)
      #expect(again.map(\.payload) == ["not a note"])
      #expect(try await inbox.count() == 2, "the requeued message, and the acknowledged-nothing note")
      #expect(try await receiver.removeQuarantined() == 1, "the raw bytes, quarantined again as a String")
      #expect(try await inbox.peek().count == 2)
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aHandedBackMessageComesBeforeTheNextAndAStrangerIsRefused() async throws {
      let place = try await open()
      let inbox = try await place.mailbox("inbox")
      try await inbox.sendAll([1, 2, 3])
      let receiver = try await inbox.receiver()
      let first = try await receiver.receive(Int.self, limit: 1)
      #expect(first.map(\.payload) == [1])
      try await receiver.redeliver(first)
      #expect(try await receiver.receive(Int.self, limit: 1).map(\.payload) == [1])
      #expect(try await receiver.receive(Int.self, limit: 5).map(\.payload) == [2, 3])
      let other = try await place.mailbox("other")
      try await other.send(9)
      let stranger = try await other.receiver().receive(Int.self)
      let error = await #expect(throws: LiaisonError.self) { try await receiver.acknowledge(stranger) }
      #expect(error?.code == .invalidArgument)
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func oneReceiverAtATimeAndAClosedReceiverSaysSo() async throws {
      let place = try await open()
      let inbox = try await place.mailbox("inbox")
      let receiver = try await inbox.receiver()
      let busy = await #expect(throws: LiaisonError.self) { try await inbox.receiver() }
      #expect(busy?.code == .alreadyClaimed)
      let waited = await #expect(throws: LiaisonError.self) { try await inbox.receiver(timeout: .milliseconds(100)) }
      #expect(waited?.code == .timedOut)
      let waiting = Task { try await receiver.receive(Int.self) }
      await receiver.close()
      let closed = await #expect(throws: LiaisonError.self) { try await waiting.value }
      #expect(closed?.code == .closed)
      let next = try await inbox.receiver()
      try await inbox.send(5)
      #expect(try await next.receive(Int.self).map(\.payload) == [5])
    }

    /// The format between `liaison.mailbox_send` and ``CarriedMessages``: a small send's
    /// notification carries its positions and stored messages; a large one's carries none.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func aSmallSendCarriesItsMessagesAndALargeOneDoesNot() async throws {
      let place = try await open()
      let inbox = try await place.mailbox("inbox", sender: "tests")
      let (events, delivered) = AsyncStream.makeStream(of: CarriedMessages?.self)
      let subscription = try await place.listener.subscribe(kind: "m", namespace: place.namespace, name: inbox.name) {
        event in
        if let event { delivered.yield(CarriedMessages(event.detail)) }
      }
      defer { place.listener.unsubscribe(subscription) }
      try await inbox.sendAll([Note(text: "a"), Note(text: "b")])
      try await inbox.send(Note(text: String(repeating: ".", count: MailboxSchema.carriedBytes + 1)))
      try await inbox.send(Note(text: "c"), id: "given")
      // Notifications come in commit order; a missing one ends the wait after 30 s.
      let deadline = Task {
        try await Task.sleep(for: .seconds(30))
        delivered.finish()
      }
      var received: [CarriedMessages?] = []
      for await event in events {
        received.append(event)
        if received.count == 3 { break }
      }
      deadline.cancel()
      try #require(received.count == 3)
      let small = try #require(received[0])
      let decoder = JSONDecoder()
      #expect(small.count == 2 && small.sender == "tests")
      #expect(small.messages.map(\.position) == [small.first, small.first + 1])
      #expect(
        try small.rows.map { try decoder.decode(Note.self, from: try #require($0.payload).bytes).text } == ["a", "b"])
      #expect(received[1] == nil, "a send over \(MailboxSchema.carriedBytes) bytes carries nothing")
      let given = try #require(received[2])
      #expect(given.first == small.last + 2 && given.messages.map(\.id) == ["given"])
    }

    /// Small sends carry their messages in their notification and the receiver takes them from
    /// there, but only when nothing can lie before them: sends too large to carry, retried ids
    /// (a position taken, nothing stored) and a receiver that has not read everything yet must
    /// not make it skip, repeat or reorder a message.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func carriedAndUncarriedSendsArriveInOrderOnceEach() async throws {
      let place = try await open()
      let inbox = try await place.mailbox("inbox")
      try await inbox.send(Note(text: "before the receiver"))
      let receiver = try await inbox.receiver()
      let large = "large" + String(repeating: ".", count: 5000)
      let sends: [(texts: [String], id: String?)] = [
        (["small 1"], "id-1"), ([large], nil), (["small 2"], nil), (["retried"], "id-1"),
        (["small 3", "small 4"], nil), ((0..<20).map { "batch \($0)" }, nil), (["small 5"], nil),
      ]
      let expected = (["before the receiver"] + sends.filter { $0.texts != ["retried"] }.flatMap(\.texts)).map {
        String($0.prefix(10))
      }
      let receiving = Task {
        var texts: [String] = []
        for try await envelope in receiver.messages(Note.self) {
          texts.append(String(envelope.payload.text.prefix(10)))  // "large" without its 5000 dots
          try await receiver.acknowledge(envelope)
          if texts.count == 9 { break }
        }
        return texts
      }
      for send in sends {
        if let id = send.id {
          try await inbox.send(Note(text: send.texts[0]), id: id)
        } else {
          try await inbox.sendAll(send.texts.map(Note.init))
        }
      }
      // A message skipped would leave the receiving task waiting: it ends after 30 s.
      let deadline = Task {
        try await Task.sleep(for: .seconds(30))
        receiving.cancel()
      }
      let received = try await receiving.value
      deadline.cancel()
      #expect(received == Array(expected.prefix(9)))
      // The rest (every send has returned): nothing skipped, nothing twice.
      var rest: [MailboxEnvelope<Note>] = []
      while case let batch = try await receiver.receive(Note.self, limit: 100, timeout: .zero), !batch.isEmpty {
        rest += batch
      }
      #expect(rest.map { String($0.payload.text.prefix(10)) } == Array(expected.dropFirst(9)))
      try await receiver.acknowledge(rest)
      #expect(try await inbox.count() == 0)
    }

    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage))
    func severalTasksOfOneReceiverNeverGetTheSameMessage() async throws {
      let place = try await open()
      let inbox = try await place.mailbox("inbox")
      let receiver = try await inbox.receiver()
      let received = Locked<[Int]>([])
      let tasks = (0..<4).map { _ in
        Task {
          while let batch = try? await receiver.receive(Int.self, limit: 7) {
            received.withLock { $0 += batch.map(\.payload) }
            try? await receiver.acknowledge(batch)
          }
        }
      }
      try await inbox.sendAll(Array(0..<200))
      let deadline = ContinuousClock.now + .seconds(60)
      while received.withLock({ $0.count }) < 200 && ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(10))
      }
      // Cancelled in the middle of an acknowledgement, a task still finishes it: a cancelled
      // statement would close the claim's connection, and lose the claim.
      for task in tasks { task.cancel() }
      for task in tasks { await task.value }
      #expect(receiver.loss == nil)
      let all = received.withLock { $0 }
      #expect(all.sorted() == Array(0..<200), "\(all.count) received")
      #expect(try await inbox.count() == 0)
    }
  }
#endif
