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
    try receiver.send("mreceive inbox \(log) \(batchSize)")
    for (index, sender) in senders.enumerated() { sender.child.write("msend inbox s\(index) \(perSender)") }

    // Kill points: after random amounts of the log (each message logs 5 to 8 bytes).
    let total = senderCount * perSender
    let killPoints = (0..<3).map { _ in Int.random(in: total / 4...total * 5) }.sorted()
    for point in killPoints {
      try waitUntil("the receiver logged \(point) bytes", timeout: 120) { fileSize(log) >= point }
      receiver.kill()
      append("restart\n", to: log)
      receiver = try Peer(container: directory.path)
      try receiver.send("mreceive inbox \(log) \(batchSize)")
    }
    for sender in senders { #expect(try sender.child.readLine(timeout: 600) == "ok sent") }
    try waitUntil("every message is acknowledged", timeout: 120) { try receiver.send("mcount inbox") == "0" }

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
    try sender.send("msend later s0 300")
    sender.child.closeInput()
    #expect(sender.child.wait() == 0)

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
    #expect(try first.send("msendid orders order-42 first") == "order-42")
    #expect(try second.send("msendid orders order-42 second") == "order-42")
    let mailbox = try SharedContainer(directory: directory.path).mailbox("orders")
    #expect(try mailbox.count() == 1)
    let receiver = try mailbox.receiver()
    let received = try receiver.receiveAvailable(String.self)
    #expect(received.map(\.payload) == ["first"])
    try receiver.acknowledge(received)
    try second.send("msendid orders order-42 third")  // a retry after the acknowledgement
    #expect(try mailbox.count() == 0)
    #expect(try receiver.receiveAvailable(String.self).isEmpty)
  }

  @Test func anUndecodableMessageIsQuarantinedWithItsReasonAndTheStreamGoesOn() async throws {
    let sender = try Peer(container: directory.path)
    try sender.send("msendraw inbox not-json")
    try sender.send("msendid inbox plain just-a-string")
    try sender.send("msend inbox s0 2")
    let mailbox = try SharedContainer(directory: directory.path).mailbox("inbox")
    let receiver = try mailbox.receiver()
    var received: [TestMessage] = []
    for try await envelope in receiver.messages(TestMessage.self) {
      received.append(envelope.payload)
      try receiver.acknowledge(envelope)
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
    #expect(try receiver.removeQuarantined() == 2)
    #expect(try mailbox.peek().isEmpty)
    #expect(try SharedContainer(directory: directory.path).mailboxes().isEmpty)
  }

  @Test func aSecondReceiverIsRefusedAtOnceUntilTheFirstOneDies() throws {
    let holder = try Peer(container: directory.path)
    try holder.send("mreceiver inbox")
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
    #expect(closed?.code == .suspended)
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

  @Test func limitsRefuseWithAClearErrorAndStoreNothing() throws {
    let container = try SharedContainer(directory: directory.path)
    let mailbox = try container.mailbox(
      "small", limits: .init(maximumMessageSize: 100, maximumMessages: 3, maximumBytes: 1_000))
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
    #expect(throws: LiaisonError.self) { try mailbox.send(Data(count: 50), id: "") }
    #expect(throws: LiaisonError.self) { try container.mailbox("../escape") }
  }

  @Test func aWaitingReceiveEndsWhenItsTaskIsCancelledOrTheReceiverCloses() async throws {
    let mailbox = try SharedContainer(directory: directory.path).mailbox("idle")
    let receiver = try mailbox.receiver()
    let cancelled = Task { try await receiver.receive(String.self) }
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }

    // A waiting receive is woken by a send…
    let woken = Task { try await receiver.receive(String.self) }
    try mailbox.send("first")
    #expect(try await woken.value.map(\.payload) == ["first"])
    // …and ended by closing the receiver, whether it is already waiting or about to look.
    let waiting = Task { try await receiver.receive(String.self) }
    receiver.close()
    let error = await #expect(throws: LiaisonError.self) { try await waiting.value }
    #expect(error?.code == .suspended)
  }

  @Test func aWaitingReceiverInAnotherProcessIsWokenBySend() throws {
    let log = directory.path + "/received"
    let receiver = try Peer(container: directory.path)
    try receiver.send("mreceive wake \(log) 8")
    let mailbox = try SharedContainer(directory: directory.path).mailbox("wake", sender: "test")
    for n in 0..<5 {
      try mailbox.send(TestMessage(sender: "t", n: n))
      try waitUntil("the receiver logged message \(n)") { (try? logged(log))?.contains("t \(n)") == true }
    }
    try waitUntil("all acknowledged") { try receiver.send("mcount wake") == "0" }
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
