import Foundation
import Liaison
import LiaisonTestSupport
import Testing

@testable import LiaisonStore

/// The peer's message type (`msend`).
private struct TestMessage: Codable, Sendable, Equatable {
  let sender: String
  let n: Int
}

@Suite("Mailbox across processes")
struct MailboxTests {
  let directory = TemporaryDirectory()

  /// 4 sender processes × 2,500 messages; the receiving process is killed with SIGKILL three
  /// times, at random points, and restarted. The receiver logs each batch (one write) before
  /// acknowledging it and logs "acked" after: so the log tells exactly which messages were
  /// unacknowledged at each kill — the only ones that may come twice.
  @Test func fourSendersAndAReceiverKilledThreeTimesLoseNothingAndDuplicateOnlyUnacknowledged() throws {
    let (senderCount, perSender, batchSize) = (4, 2_500, 16)
    let log = directory.path + "/received"
    let senders = try (0..<senderCount).map { _ in try Peer(container: directory.path) }
    var receiver = try Peer(container: directory.path)
    try receiver.send(.mreceive, "inbox", log, batchSize)
    for (index, sender) in senders.enumerated() { sender.start(.msend, "inbox", "s\(index)", perSender) }

    // Kill points: after random amounts of the log (each message logs 5 to 8 bytes).
    let total = senderCount * perSender
    let killPoints = (0..<3).map { _ in Int.random(in: total / 4...total * 5) }.sorted()
    for point in killPoints {
      try waitUntil("the receiver logged \(point) bytes", timeout: 120) { fileSize(log) >= point }
      receiver.kill()
      append("restart\n", to: log)
      receiver = try Peer(container: directory.path)
      try receiver.send(.mreceive, "inbox", log, batchSize)
    }
    for sender in senders { #expect(try sender.child.readLine(timeout: 600) == "ok sent") }
    try waitUntil("every message is acknowledged", timeout: 120) { try receiver.send(.mcount, "inbox") == "0" }

    // Replay the log.
    var seen: Set<String> = []
    var unacknowledged: Set<String> = []  // logged, not yet followed by "acked": may come again
    var pendingBatch: [String] = []
    var lastPerSender: [String: Int] = [:]  // within the current receiver
    var firstSeenOrder: [String: [Int]] = [:]
    var duplicates = 0
    for line in try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n") {
      switch line {
      case "acked":
        unacknowledged.subtract(pendingBatch)
        pendingBatch = []
      case "restart":
        pendingBatch = []
        lastPerSender = [:]
      default:
        let words = line.split(separator: " ")
        try #require(words.count == 2, "unexpected log line '\(line)'")
        let (sender, n) = (String(words[0]), Int(words[1])!)
        let message = "\(sender) \(n)"
        if let last = lastPerSender[sender] { #expect(n > last, "\(sender): \(n) after \(last) in one receiver") }
        lastPerSender[sender] = n
        if seen.contains(message) {
          duplicates += 1
          #expect(unacknowledged.contains(message), "\(message) came again after it was acknowledged")
        } else {
          seen.insert(message)
          firstSeenOrder[sender, default: []].append(n)
        }
        unacknowledged.insert(message)
        pendingBatch.append(message)
      }
    }
    #expect(seen.count == total, "received \(seen.count) of \(total) messages")
    for index in 0..<senderCount {
      #expect(firstSeenOrder["s\(index)"] == Array(0..<perSender), "sender s\(index)'s order")
    }
    // At a kill at most one batch is logged and unacknowledged.
    #expect(duplicates <= killPoints.count * batchSize)
    print("mailbox chaos: \(total) messages, \(killPoints.count) receiver kills, \(duplicates) duplicates")
  }

  @Test func messagesSentWhileNoReceiverExistsAreAllReceivedByALaterOne() throws {
    let sender = try Peer(container: directory.path)
    try sender.send(.msend, "later", "s0", "300")
    sender.child.closeInput()
    #expect(sender.child.wait() == .exited(0))

    let receiver = try SharedContainer(directory: directory.path).mailbox("later").receiver()
    let received = try receiver.receiveAvailable(TestMessage.self, limit: 1_000)
    #expect(received.map(\.payload.n) == Array(0..<300))
    #expect(received.allSatisfy { $0.sender == "s0" && $0.payload.sender == "s0" })
    #expect(received.first?.id == "s0-0")
    try receiver.acknowledge(received)
    #expect(try receiver.mailbox.count() == 0)
  }

  @Test func aMessageSentTwiceWithOneIDIsStoredOnceEvenAfterItWasAcknowledged() throws {
    let first = try Peer(container: directory.path)
    let second = try Peer(container: directory.path)
    #expect(try first.send(.msendid, "orders", "order-42", "first") == "order-42")
    #expect(try second.send(.msendid, "orders", "order-42", "second") == "order-42")
    let mailbox = try SharedContainer(directory: directory.path).mailbox("orders")
    #expect(try mailbox.count() == 1)
    let receiver = try mailbox.receiver()
    let received = try receiver.receiveAvailable(String.self)
    #expect(received.map(\.payload) == ["first"])
    try receiver.acknowledge(received)
    try second.send(.msendid, "orders", "order-42", "third")  // a retry after the acknowledgement
    #expect(try mailbox.count() == 0)
    #expect(try receiver.receiveAvailable(String.self).isEmpty)
  }

  /// A retry is recognised for `acknowledgedIDRetention` (7 days) after the acknowledgement; an
  /// id older than that is forgotten when a receiver opens the mailbox, and may be sent again.
  @Test func anAcknowledgedIDIsRememberedForSevenDaysThenForgotten() throws {
    let mailbox = try SharedContainer(directory: directory.path).mailbox("orders")
    try mailbox.send("first", id: "order-6-days")
    try mailbox.send("first", id: "order-8-days")
    let first = try mailbox.receiver()
    try first.acknowledge(try first.receiveAvailable(String.self))
    first.close()
    // As if the acknowledgements had been made 6 and 8 days ago.
    let day = 24 * 3600.0
    try mailbox.store.write { db in
      for (id, age) in [("order-6-days", 6 * day), ("order-8-days", 8 * day)] {
        try db.execute(
          sql: "UPDATE mailbox_acknowledged SET acknowledged_at = acknowledged_at - ? WHERE id = ?",
          arguments: [age, id])
        #expect(db.changesCount == 1)
      }
    }
    let receiver = try mailbox.receiver()
    try mailbox.send("again", id: "order-6-days")
    try mailbox.send("again", id: "order-8-days")
    #expect(try receiver.receiveAvailable(String.self).map(\.id) == ["order-8-days"])
  }

  @Test func anUndecodableMessageIsQuarantinedWithItsReasonAndTheStreamGoesOn() async throws {
    let sender = try Peer(container: directory.path)
    try sender.send(.msendraw, "inbox", "not-json")
    try sender.send(.msendid, "inbox", "plain", "just-a-string")
    try sender.send(.msend, "inbox", "s0", "2")
    let mailbox = try await SharedContainer(directory: directory.path).mailbox("inbox")
    let receiver = try mailbox.receiver()
    var received: [TestMessage] = []
    for try await envelope in receiver.messages(TestMessage.self) {
      received.append(envelope.payload)
      try await receiver.acknowledge(envelope)
      if received.count == 2 { break }
    }
    #expect(received == [TestMessage(sender: "s0", n: 0), TestMessage(sender: "s0", n: 1)])
    let quarantined = try mailbox.peek()
    #expect(quarantined.count == 2)
    #expect(quarantined[0].payload == .data(Data("not-json".utf8)))
    #expect(quarantined[0].quarantineReason?.contains("raw bytes") == true)
    #expect(quarantined[1].id == "plain")
    #expect(quarantined[1].quarantineReason?.contains("TestMessage") == true)
    #expect(try mailbox.count() == 0)
    let info = try SharedContainer(directory: directory.path).mailboxes()
    #expect(info.map(\.quarantined) == [2])
    #expect(try await receiver.removeQuarantined() == 2)
    #expect(try mailbox.peek().isEmpty)
    #expect(try SharedContainer(directory: directory.path).mailboxes().isEmpty)
  }

  @Test func aSecondReceiverIsRefusedAtOnceUntilTheFirstOneDies() throws {
    let holder = try Peer(container: directory.path)
    try holder.send(.mreceiver, "inbox")
    let mailbox = try SharedContainer(directory: directory.path).mailbox("inbox")
    let refusal = #expect(throws: LiaisonError.self) { try mailbox.receiver() }
    #expect(refusal?.code == .alreadyClaimed)
    #expect(refusal?.message.contains("'inbox' already has a receiver") == true)
    holder.kill()
    let receiver = try mailbox.receiver()
    // In this process too, one receiver at a time.
    #expect(throws: LiaisonError.self) { try mailbox.receiver() }
    receiver.close()
    let closed = #expect(throws: LiaisonError.self) { try receiver.receiveAvailable(String.self) }
    #expect(closed?.code == .closed)
    _ = try mailbox.receiver()
  }

  @Test func messagesAReceiverDidNotAcknowledgeGoToTheNextReceiver() throws {
    let mailbox = try SharedContainer(directory: directory.path).mailbox("inbox")
    try mailbox.sendAll(["a", "b", "c"])
    let first = try mailbox.receiver()
    let delivered = try first.receiveAvailable(String.self)
    #expect(delivered.map(\.payload) == ["a", "b", "c"])
    try first.acknowledge(delivered[0])
    #expect(try first.receiveAvailable(String.self).isEmpty)  // once per receiver
    first.close()
    let second = try mailbox.receiver()
    #expect(try second.receiveAvailable(String.self).map(\.payload) == ["b", "c"])
  }

  @Test func aRowAnotherProgramWroteIsQuarantinedAndTheMailboxGoesOn() throws {
    let container = try SharedContainer(directory: directory.path)
    let mailbox = try container.mailbox("inbox")
    try mailbox.send("a")
    try mailbox.store.write { db in
      try db.execute(
        sql: """
          INSERT INTO mailbox_message (mailbox, position, id, given_id, sender, sent_at, kind, payload)
          VALUES ('inbox', 2, 'foreign', 0, 'sqlite3', 'yesterday', 99, x'00');
          UPDATE mailbox_totals SET next_position = 2, messages = messages + 1, bytes = bytes + 1 WHERE mailbox = 'inbox';
          """)
    }
    try mailbox.send("b")
    #expect(try mailbox.peek().last?.payload == .json(Data("\"b\"".utf8)))
    #expect(try mailbox.peek()[1].quarantineReason?.contains("not written by Liaison") == true)
    let receiver = try mailbox.receiver()
    #expect(try receiver.receiveAvailable(String.self).map(\.payload) == ["a", "b"])
    let quarantined = try mailbox.peek().filter { $0.quarantineReason != nil }
    #expect(quarantined.map(\.id) == ["foreign"])
    #expect(quarantined.first?.quarantineReason?.contains("sending time") == true)
    #expect(try container.mailboxes().first?.quarantined == 1)
  }

  /// A sender killed between its commit and its ring: the message is stored, and a waiting
  /// receiver in another process gets it as soon as any process opens the mailbox again.
  @Test func aMessageWhoseRingWasLostIsDeliveredWhenTheMailboxIsOpenedAgain() throws {
    let log = directory.path + "/received"
    let receiver = try Peer(container: directory.path)
    try receiver.send(.mreceive, "inbox", log, "8")
    let mailbox = try SharedContainer(directory: directory.path).mailbox("inbox")
    // What a send does, without the ring that follows it.
    try mailbox.store.write { db in
      try db.execute(
        sql: """
          INSERT INTO mailbox_message (mailbox, position, id, given_id, sender, sent_at, kind, payload)
          VALUES ('inbox', 1, 'lost-ring', 1, 'crashed', 0, 0, CAST(? AS BLOB));
          INSERT INTO mailbox_totals (mailbox, next_position, messages, bytes, quarantined)
          VALUES ('inbox', 1, 1, 21, 0);
          """, arguments: [#"{"sender":"s","n":7}"#])
    }
    let restarted = try Peer(container: directory.path)  // the sender, started again
    _ = try restarted.send(.mcount, "inbox")  // opens the mailbox, which rings
    try waitUntil("the receiver logged the message") { (try? logged(log))?.contains("s 7") == true }
  }

  @Test func limitsRefuseWithAClearErrorAndStoreNothing() throws {
    let container = try SharedContainer(directory: directory.path)
    let mailbox = try container.mailbox("small")
    try mailbox.setLimits(.init(maximumMessageSize: 100, maximumMessages: 3, maximumBytes: 1_000))
    let tooBig = #expect(throws: LiaisonError.self) { try mailbox.send(Data(count: 101)) }
    #expect(tooBig?.code == .tooLarge)
    #expect(tooBig?.message.contains("at most 100 bytes") == true)
    try mailbox.sendAll([1, 2])
    let full = #expect(throws: LiaisonError.self) { try mailbox.sendAll([3, 4]) }
    #expect(full?.code == .tooLarge)
    #expect(full?.message.contains("is full") == true)
    #expect(try mailbox.count() == 2)  // all or none
    try mailbox.send(3)
    #expect(try mailbox.count() == 3)
    let bytes = try container.mailbox("bytes")
    try bytes.setLimits(.init(maximumMessageSize: 100, maximumBytes: 150))
    try bytes.send(Data(count: 100))
    let overBytes = #expect(throws: LiaisonError.self) { try bytes.send(Data(count: 51)) }
    #expect(overBytes?.code == .tooLarge)
    #expect(overBytes?.message.contains("151 bytes") == true)
    try bytes.send(Data(count: 50))  // exactly at the limit
    #expect(try bytes.count() == 2)
    #expect(throws: LiaisonError.self) { try mailbox.send(Data(count: 50), id: "") }
    #expect(throws: LiaisonError.self) { try container.mailbox("../escape") }
    #expect(throws: LiaisonError.self) { try bytes.setLimits(.init(maximumMessages: 0)) }
  }

  @Test func limitsAreTheMailboxsOwnForEverySenderInEveryProcess() throws {
    // Another process sends through handles of its own, which name no limits.
    let sender = try Peer(container: directory.path)
    try sender.send(.msendraw, "inbox", "first")
    let mailbox = try SharedContainer(directory: directory.path).mailbox("inbox")
    #expect(try mailbox.limits() == Mailbox.Limits())
    try mailbox.setLimits(.init(maximumMessageSize: 10, maximumMessages: 2))
    #expect(try mailbox.limits() == Mailbox.Limits(maximumMessageSize: 10, maximumMessages: 2))
    let refused = try sender.ask(.msendraw, "inbox", "more-than-ten-bytes")
    #expect(refused.hasPrefix("error too large: "), "\(refused)")
    try sender.send(.msendraw, "inbox", "second")
    #expect(try sender.ask(.msendraw, "inbox", "third").hasPrefix("error too large: "))  // the mailbox is full at 2
    #expect(try mailbox.count() == 2)
  }

  @Test func aWaitingReceiveEndsWhenItsTaskIsCancelledOrTheReceiverCloses() async throws {
    let mailbox = try await SharedContainer(directory: directory.path).mailbox("idle")
    let receiver = try mailbox.receiver()
    let cancelled = Task { try await receiver.receive(String.self) }
    cancelled.cancel()
    let cancellation = await #expect(throws: LiaisonError.self) { try await cancelled.value }
    #expect(cancellation?.code == .cancelled)

    // A waiting receive is woken by a send…
    let woken = Task { try await receiver.receive(String.self) }
    try await mailbox.send("first")
    #expect(try await woken.value.map(\.payload) == ["first"])
    // …and ended by closing the receiver, whether it is already waiting or about to look.
    let waiting = Task { try await receiver.receive(String.self) }
    receiver.close()
    let error = await #expect(throws: LiaisonError.self) { try await waiting.value }
    #expect(error?.code == .closed)
  }

  /// A receiver that waits for a message sleeps until a send wakes it: it does not poll. Where
  /// `/proc` tells (Linux), each wait is seen asleep (no thread of the receiver's process runs)
  /// before the send that ends it.
  @Test func aWaitingReceiverInAnotherProcessIsWokenBySend() throws {
    let log = directory.path + "/received"
    let receiver = try Peer(container: directory.path)
    try receiver.send(.mreceive, "wake", log, "8")
    let mailbox = try SharedContainer(directory: directory.path).mailbox("wake", sender: "test")
    for n in 0..<3 {
      if readsProc { try expectAsleep(receiver) }
      try mailbox.send(TestMessage(sender: "t", n: n))
      try waitUntil("the receiver acknowledged message \(n)") {
        (try? logged(log))?.filter { $0 == "acked" }.count == n + 1
      }
    }
    #expect(try logged(log) == (0..<3).flatMap { ["t \($0)", "acked"] })
    #expect(try receiver.send(.mcount, "wake") == "0")
  }

  /// Expects `peer` to sleep: every thread of its process asleep, and none running (no context
  /// switch, no CPU time) for 300 ms.
  ///
  /// The 300 ms are an observation, not a synchronisation: a receiver that polled every 100 ms
  /// or more often would wake up at least twice in them. The threads that wake by themselves in
  /// any process are left out (``ThreadActivity/Counters/wakesByItself``): a poll timed by
  /// `Task.sleep` wakes Dispatch's event thread, but still shows on the worker that runs it.
  private func expectAsleep(_ peer: Peer) throws {
    let ran = try ThreadActivity.threadsThatRanWhileLeftAlone(peer.pid)
    #expect(ran.isEmpty, "the waiting receiver's process ran with no message sent (it polls?): \(ran)")
  }
}

extension MailboxTests {
  /// A batch whose messages are all undecodable (quarantined on the way) must not end a look:
  /// the messages after it wait, and no send is coming to wake the receiver.
  @Test func aBatchThatIsAllQuarantinedDoesNotHideTheMessagesAfterIt() async throws {
    let container = try SharedContainer(directory: directory.path)
    let mailbox = try await container.mailbox("inbox")
    try await mailbox.send(Data("not-json".utf8))
    try await mailbox.send("not a TestMessage")
    try await mailbox.send(TestMessage(sender: "t", n: 1))
    let receiver = try mailbox.receiver()
    #expect(try receiver.receiveAvailable(TestMessage.self, limit: 1).map(\.payload.n) == [1])
    #expect(try mailbox.peek().filter { $0.quarantineReason != nil }.count == 2)

    // A waiting receive: the messages were sent before the receiver, so no ring is coming.
    let stalled = try await container.mailbox("stalled")
    try await stalled.send(Data("not-json".utf8))
    try await stalled.send(TestMessage(sender: "t", n: 2))
    let waiting = try stalled.receiver()
    let received = try await within(seconds: 10) { try await waiting.receive(TestMessage.self, limit: 1) }
    #expect(received?.map(\.payload.n) == [2], "receive waited for a send while a message was waiting")
  }

  /// `MailboxReceiver` is `Sendable`: threads that receive from one receiver at once must still
  /// get each message once (the cursor is read, the store queried, and the cursor set in one step).
  @Test func concurrentReceivesFromOneReceiverDeliverEachMessageOnce() throws {
    let mailbox = try SharedContainer(directory: directory.path).mailbox("inbox")
    let total = 4_000
    try mailbox.sendAll(0..<total)
    let receiver = try mailbox.receiver()
    let received = Locked<[Int]>([])
    let failures = Locked<[String]>([])
    let (started, finished) = (Locked(0), DispatchGroup())
    for _ in 0..<4 {  // threads of their own: the test pool may be busy with other tests
      finished.enter()
      Thread {
        defer { finished.leave() }
        started.withLock { $0 += 1 }
        while started.withLock({ $0 }) < 4 { sched_yield() }
        do {
          while true {
            let batch = try receiver.receiveAvailable(Int.self, limit: Int.random(in: 1...16))
            if batch.isEmpty { return }
            received.withLock { $0 += batch.map(\.payload) }
          }
        } catch {
          failures.withLock { $0.append("\(error)") }
        }
      }.start()
    }
    finished.wait()
    #expect(failures.withLock { $0 }.isEmpty)
    let all = received.withLock { $0 }
    #expect(all.count == total, "\(all.count - Set(all).count) deliveries were duplicates")
    #expect(Set(all).count == total)
  }

  /// An envelope carries a position, which means something only in its own mailbox: one given to
  /// another mailbox's receiver must not remove that mailbox's message at the same position.
  @Test func anEnvelopeFromAnotherMailboxIsRefusedAndRemovesNothing() throws {
    let container = try SharedContainer(directory: directory.path)
    let (a, b) = (try container.mailbox("a"), try container.mailbox("b"))
    try a.send("for a")
    try b.send("for b")
    let (receiverA, receiverB) = (try a.receiver(), try b.receiver())
    let fromA = try receiverA.receiveAvailable(String.self)
    let refusal = #expect(throws: LiaisonError.self) { try receiverB.acknowledge(fromA) }
    #expect(refusal?.code == .invalidArgument)
    #expect(try b.count() == 1)
    #expect(try receiverB.receiveAvailable(String.self).map(\.payload) == ["for b"])
    // The same mailbox under another container: positions alike, messages not.
    let other = TemporaryDirectory()
    let elsewhere = try SharedContainer(directory: other.path).mailbox("a")
    try elsewhere.send("for the other a")
    let receiverElsewhere = try elsewhere.receiver()
    #expect(throws: LiaisonError.self) { try receiverElsewhere.acknowledge(fromA) }
    #expect(try elsewhere.count() == 1)
  }

  /// A message's sending time is the container's wall clock (a manual one here), as are the
  /// dates of the ids it remembers.
  @Test func aMessageIsDatedByTheContainersClock() async throws {
    let manual = ManualClock(wallStart: 1_000_000)
    let container = try SharedContainer(directory: directory.path, clock: manual.clock)
    let mailbox = try await container.mailbox("inbox")
    try await mailbox.send("first")
    manual.advance(by: .seconds(90))
    try await mailbox.send("second")
    let received = try mailbox.receiver().receiveAvailable(String.self)
    #expect(received.map(\.sentAt) == [Date(timeIntervalSince1970: 1_000_000), Date(timeIntervalSince1970: 1_000_090)])
  }

  /// `messages()` reads ahead a batch; leaving the loop must not make the rest of that batch
  /// invisible to this receiver (they would wait until the next receiver, i.e. the next launch).
  @Test func leavingAMessagesLoopKeepsTheMessagesItReadAhead() async throws {
    let mailbox = try await SharedContainer(directory: directory.path).mailbox("inbox")
    try await mailbox.sendAll(["a", "b", "c"])
    let receiver = try mailbox.receiver()
    for try await envelope in receiver.messages(String.self) {
      try await receiver.acknowledge(envelope)
      break
    }
    #expect(try receiver.receiveAvailable(String.self).map(\.payload) == ["b", "c"])
  }

  /// `suspend()` gives the receiver's lock up; a receive already waiting must end then, with
  /// `suspended`, rather than sleep on until the next send. Everything runs on threads of its own:
  /// `suspend()` blocks its caller until the waits it ends are over, and on the cooperative pool
  /// (two threads on this machine) it once held up every suite beside it for minutes, under
  /// Thread Sanitizer, past the bound below, which then counted from the receive's start.
  @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)  // OwnThreadExecutor (TaskExecutor)
  @Test func suspendingTheContainerEndsAWaitingReceive() async throws {
    try await withTaskExecutorPreference(OwnThreadExecutor()) {
      let container = try SharedContainer(directory: directory.path)
      let receiver = try await container.mailbox("idle").receiver()
      let waiting = Task(executorPreference: OwnThreadExecutor()) { () async -> LiaisonError.Code? in
        do {
          _ = try await receiver.receive(String.self)
          return nil
        } catch {
          return (error as? LiaisonError)?.code
        }
      }
      // The waiting case, the one that hung: the receive is suspended in its wait for a send.
      try await waitUntilOffThePool("the receive waits for a send", timeout: 300) { receiver.waitingForSends == 1 }
      container.suspend()
      defer { try? container.resume() }
      // A bound for failure, counted from suspend(): a receive still waiting after it is cancelled
      // (and then ends with `cancelled`, not `suspended`).
      let bound = Task(executorPreference: OwnThreadExecutor()) {
        try? await Task.sleep(for: .seconds(300))
        waiting.cancel()
      }
      let outcome = await waiting.value
      bound.cancel()
      #expect(
        outcome == .suspended, "a waiting receive went on waiting after suspend(): \(String(describing: outcome))")
    }
  }

  /// A quarantined message that is removed keeps its id remembered, like an acknowledged one, so
  /// that a retried send is not stored (and quarantined) again.
  @Test func aRetriedSendOfARemovedQuarantinedMessageStoresNothing() throws {
    let mailbox = try SharedContainer(directory: directory.path).mailbox("inbox")
    try mailbox.send("not a TestMessage", id: "draft-1")
    let receiver = try mailbox.receiver()
    #expect(try receiver.receiveAvailable(TestMessage.self).isEmpty)
    #expect(try receiver.removeQuarantined() == 1)
    try mailbox.send("not a TestMessage", id: "draft-1")
    #expect(try mailbox.peek().isEmpty)
  }
}

extension MailboxTests {
  /// Totals that another program damaged are counted again from the messages, not taken as 0
  /// (which restarted the positions: every send failed on "UNIQUE constraint failed").
  @Test func damagedTotalsAreCountedAgainFromTheMessages() throws {
    let mailbox = try SharedContainer(directory: directory.path).mailbox("inbox")
    try mailbox.sendAll(["a", "b", "c"])
    try mailbox.store.write { db in
      try db.execute(sql: "UPDATE mailbox_totals SET next_position = 'y', messages = 'x'")
    }
    try mailbox.send("d")
    #expect(try mailbox.count() == 4)
    let receiver = try mailbox.receiver()
    #expect(try receiver.receiveAvailable(String.self).map(\.payload) == ["a", "b", "c", "d"])
  }
}

/// `body`'s result, or `nil` when it takes longer than `seconds` (it is then cancelled).
private func within<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws
  -> T?
{
  try await withThrowingTaskGroup(of: T?.self) { group in
    group.addTask { try await body() }
    group.addTask {
      try? await Task.sleep(for: .seconds(seconds))
      return nil
    }
    defer { group.cancelAll() }
    return try await group.next()!
  }
}

private func fileSize(_ path: String) -> Int {
  var info = stat()
  return stat(path, &info) == 0 ? Int(info.st_size) : 0
}

private func logged(_ path: String) throws -> [String] {
  try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
}

private func append(_ text: String, to path: String) {
  let handle = FileHandle(forWritingAtPath: path)!
  handle.seekToEndOfFile()
  handle.write(Data(text.utf8))
  handle.closeFile()
}
