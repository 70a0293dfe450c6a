#if Postgres
  import Foundation
  import Liaison
  import LiaisonPostgres
  import LiaisonTestSupport
  import Testing

  /// The cross-process promises of mailboxes, on both backends: the same test, through the test
  /// peer's `place-m…` commands, on a folder's `Mailbox` and on a `PostgresMailbox`.
  @Suite("Conformance: mailboxes keep the same promises on every backend")
  struct MailboxConformanceTests {
    static let backends = Backend.allCases

    /// The messages a receiver's log holds: "SENDER N MONOTONIC-NS" lines, in the order received.
    private func received(_ log: String) -> [(sender: String, n: Int, at: UInt64)] {
      let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
      return text.split(separator: "\n").compactMap { line in
        let words = line.split(separator: " ")
        guard words.count == 3, let n = Int(words[1]), let at = UInt64(words[2]) else { return nil }
        return (String(words[0]), n, at)
      }
    }

    private func errors(_ log: String) -> [String] {
      let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
      return text.split(separator: "\n").filter { $0.hasPrefix("error") }.map(String.init)
    }

    /// A receiver killed with SIGKILL before acknowledging: the next receiver, in another process,
    /// gets every message, in order, once it has become the receiver.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func aKilledReceiversMessagesGoToTheNextReceiver(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let logs = TemporaryDirectory()
      try place.peer().send(.placeMsend, "inbox", "a", "20")
      let first = try place.peer()
      #expect(try first.send(.placeMreceive, "inbox", "\(logs.path)/first", "64", "noack").hasPrefix("receiving"))
      try waitUntil("the first receiver has every message") { received("\(logs.path)/first").count == 20 }
      first.kill()
      let next = try place.peer()
      let answer = try next.send(.placeMreceive, "inbox", "\(logs.path)/next", "64", "10000")
      let askedAt = try timestamp(answer)
      try waitUntil("the next receiver has every message") { received("\(logs.path)/next").count == 20 }
      let messages = received("\(logs.path)/next")
      #expect(messages.map(\.n) == Array(0..<20), "\(messages.map(\.n))")
      #expect(messages[0].at > askedAt, "the next receiver had the messages before it asked for them")
      try waitUntil("every message is acknowledged") { try next.send(.placeMcount, "inbox") == "0" }
    }

    /// A receiver whose task is cancelled in the middle of a batch it read ahead hands back the
    /// messages it did not deliver: the cancelled loop ends without them, the receiver delivers
    /// them first to the next call, and once it is closed the next receiver gets them all, in
    /// order.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func aReceiverCancelledMidBatchHandsItsMessagesToTheNextReceiver(_ backend: Backend) async throws {
      let backendPlace = try BackendPlace(backend)
      let inbox = try await backendPlace.openStore().mailbox("inbox", sender: "test")
      _ = try await inbox.sendAll(Array(0..<10), timeout: nil)
      let first = try await inbox.receiver()
      let handling = Task { try await handleThreeThenCancel(first) }
      #expect(try await handling.value == [0, 1, 2])
      let handedBack = try await first.receive(Int.self, limit: 64, timeout: .zero)
      #expect(handedBack.map(\.payload) == Array(3..<10))
      await first.close()  // not acknowledged: the next receiver gets them
      let next = try await inbox.receiver()
      let received = try await next.receive(Int.self, limit: 64, timeout: .zero)
      #expect(received.map(\.payload) == Array(3..<10))
      try await next.acknowledge(received, timeout: nil)
      await next.close()
      withExtendedLifetime(backendPlace) {}
    }

    /// Handles and acknowledges messages one at a time from `receiver`'s main loop, reading ten
    /// at once, and cancels its own task after the third: what it handled.
    private func handleThreeThenCancel(_ receiver: some CoordinationReceiver) async throws -> [Int] {
      var handled: [Int] = []
      for try await envelope in receiver.messages(Int.self, batchSize: 10) {
        handled.append(envelope.payload)
        try await receiver.acknowledge([envelope], timeout: nil)
        if handled.count == 3 { withUnsafeCurrentTask { $0?.cancel() } }  // seven more read ahead
      }
      return handled
    }

    /// Every envelope carries its receiver's claim token, and a later receiver's is larger: what
    /// a handler guards its writes with, so that a receiver that went on from its read-ahead
    /// after its claim ended is refused once the next one has written.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func eachReceiversEnvelopesCarryALargerClaimToken(_ backend: Backend) async throws {
      let backendPlace = try BackendPlace(backend)
      let inbox = try await backendPlace.openStore().mailbox("inbox", sender: "test")
      _ = try await inbox.sendAll(["one", "two"], timeout: nil)
      var tokens: [UInt64] = []
      for _ in 0..<3 {
        let receiver = try await inbox.receiver()
        let received = try await receiver.receive(String.self, limit: 2, timeout: nil)
        #expect(received.map(\.payload) == ["one", "two"])
        #expect(Set(received.map(\.claimToken)).count == 1)
        tokens += received.prefix(1).map(\.claimToken)
        await receiver.close()  // not acknowledged: the next receiver gets them again
      }
      #expect(tokens.count == 3 && tokens[0] < tokens[1] && tokens[1] < tokens[2], "\(tokens)")
      withExtendedLifetime(backendPlace) {}
    }

    /// A receiver in another process whose acknowledgement waits behind another writer's row lock
    /// (the receipt's row, held by a removal not yet committed) for longer than its claim's
    /// trust (0.6 of the bound) keeps its claim, and acknowledges once the row is free: in a
    /// session, and as a lease. (Before, a lease's fence locked its row `FOR SHARE`, which the
    /// renewals queued behind until the trust ran out: the claim was lost, and the messages went
    /// to the next receiver.) The receiver is a process of its own, whose threads renew its lease
    /// whatever the suites here keep busy. The wait is the subject, not a synchronisation: the
    /// renewals would fail in it.
    @Test(
      .enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: [Backend.postgres, .pooled])
    func anAcknowledgementWaitingBehindARowLockPastTheTrustKeepsTheClaim(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let server = try #require(place.server)
      let logs = TemporaryDirectory()
      let log = "\(logs.path)/log"
      try place.peer().send(.placeMsend, "inbox", "a", "2")
      let session = try RawSession(server)
      defer { session.end() }
      try session.run(
        """
        BEGIN;
        SELECT 1 FROM liaison.mailbox_receipt WHERE namespace = '\(place.namespace)' AND name = 'inbox' FOR UPDATE;
        """)
      // A lease's bound long enough for a sanitizer's run (see BackendPlace's detection bound).
      let bound = backend == .pooled ? 30.0 : 10.0
      let receiver = try place.peer(environment: ["LIAISON_TEST_DETECTION_BOUND": "\(Int(bound))"])
      try receiver.send(.placeMreceive, "inbox", log, "2")
      try waitUntil("the receiver's acknowledgement waits for the receipt's row") { try session.blocksAnother(server) }
      Thread.sleep(forTimeInterval: bound * 0.8)  // past the trust (0.6 of the bound) by a renewal's interval
      #expect(errors(log).isEmpty, "\(errors(log))")
      try session.run("COMMIT;")
      try waitUntil("the receiver acknowledges") {
        (try? String(contentsOfFile: log, encoding: .utf8))?.contains("acked") == true
      }
      #expect(errors(log).isEmpty, "\(errors(log))")
      #expect(received(log).map(\.n) == [0, 1])
      #expect(try receiver.send(.placeMcount, "inbox") == "0")
    }

    /// Two processes send at once, one of them twice with the same ids: the receiver gets each
    /// message exactly once, each sender's messages in the order they were sent, and the mailbox
    /// ends empty.
    @Test(.enabled(if: PostgresTestServer.mustRun, BackendPlace.postgresMessage), arguments: backends)
    func concurrentSendersRetriedIdsAndOrder(_ backend: Backend) throws {
      let place = try BackendPlace(backend)
      let logs = TemporaryDirectory()
      let receiver = try place.peer()
      try receiver.send(.placeMreceive, "inbox", "\(logs.path)/log", "16")
      let (a, b) = (try place.peer(), try place.peer())
      a.start(.placeMsend, "inbox", "a", "300")
      b.start(.placeMsend, "inbox", "b", "300")
      #expect(try a.child.readLine(timeout: 120) == "ok sent")
      #expect(try b.child.readLine(timeout: 120) == "ok sent")
      #expect(try a.send(.placeMsend, "inbox", "a", "300") == "sent")  // the same ids: stores nothing
      try place.peer().send(.placeMsend, "inbox", "c", "250", "100")  // sendAll, in batches
      try waitUntil("the receiver has every message") { received("\(logs.path)/log").count >= 850 }
      try waitUntil("every message is acknowledged") { try receiver.send(.placeMcount, "inbox") == "0" }
      let messages = received("\(logs.path)/log")
      #expect(errors("\(logs.path)/log").isEmpty, "\(errors("\(logs.path)/log"))")
      #expect(messages.count == 850, "\(messages.count) messages received")
      for sender in ["a", "b", "c"] {
        let ns = messages.filter { $0.sender == sender }.map(\.n)
        #expect(ns == Array(0..<(sender == "c" ? 250 : 300)), "sender \(sender): \(ns.count) messages, in order")
      }
    }
  }
#endif
