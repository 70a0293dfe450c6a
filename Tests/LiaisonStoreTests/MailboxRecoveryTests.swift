import Foundation
import Liaison
import LiaisonTestSupport
import Testing

@testable import LiaisonStore

/// What a receiver does with messages it could not handle: after an app update, a closed
/// receiver, a message handed back.
@Suite("Mailbox recovery")
struct MailboxRecoveryTests {
  let directory = TemporaryDirectory()

  /// A closed receiver says so: `closed`, not `suspended` (which is the container's state, and
  /// whose advice, resume, does not apply); a suspended one still says `suspended`.
  @Test func aClosedReceiverThrowsClosedAndASuspendedOneSuspended() async throws {
    let container = try SharedContainer(directory: directory.path)
    let mailbox = try await container.mailbox("closing")
    let receiver = try mailbox.receiver()
    let waiting = Task { try await receiver.receive(String.self) }
    receiver.close()
    let woken = await #expect(throws: LiaisonError.self) { try await waiting.value }
    #expect(woken?.code == .closed)
    let later = #expect(throws: LiaisonError.self) { try receiver.receiveAvailable(String.self) }
    #expect(later?.code == .closed)
    #expect(later?.message.contains("was closed") == true)
    #expect(later?.message.contains("suspended") == false)
    #expect(throws: LiaisonError.self) { try receiver.removeQuarantined() }

    let next = try mailbox.receiver()
    container.suspend()
    let suspended = #expect(throws: LiaisonError.self) { try next.receiveAvailable(String.self) }
    #expect(suspended?.code == .suspended)
    try container.resume()
  }
}

extension MailboxRecoveryTests {
  /// The app update: an old receiver (another process) quarantines the messages it cannot read;
  /// the new version puts them back, chosen ones first, then all, and receives them.
  @Test func quarantinedMessagesGoBackInTheQueueForAReceiverThatCanReadThem() async throws {
    let log = directory.path + "/received"
    let mailbox = try await SharedContainer(directory: directory.path).mailbox("inbox", sender: "app")
    try await mailbox.send("first", id: "first")
    try await mailbox.send("second", id: "second")
    try await mailbox.send(Marker(sender: "test", n: 1))  // the one the old version can read
    let old = try Peer(container: directory.path)
    try old.send(.mreceive, "inbox", log, "8")
    try await waitUntilOffThePool("the old receiver handled the marker") {
      (try? String(contentsOfFile: log, encoding: .utf8))?.contains("test 1\nacked") == true
    }
    old.kill()
    #expect(try mailbox.peek().map(\.quarantineReason).allSatisfy { $0 != nil })
    #expect(try mailbox.count() == 0)

    // A later message, then the new version's requeue: requeued ones go after it.
    try await mailbox.send("third", id: "third")
    #expect(try await mailbox.requeueQuarantined(ids: ["second", "nonexistent"]) == 1)
    let receiver = try mailbox.receiver()
    let firstLook = try receiver.receiveAvailable(String.self)
    #expect(firstLook.map(\.payload) == ["third", "second"])
    #expect(firstLook.last?.sender == "app")
    try await receiver.acknowledge(firstLook)
    #expect(try mailbox.peek().map(\.id) == ["first"])

    // A running receiver is woken by a requeue from another process.
    let requeuer = try Peer(container: directory.path)
    let waiting = Task { try await receiver.receive(String.self) }
    #expect(try requeuer.send(.mrequeue, "inbox") == "1")
    let woken = try await waiting.value
    #expect(woken.map(\.payload) == ["first"])
    try await receiver.acknowledge(woken)
    #expect(try mailbox.peek().isEmpty)
    #expect(try SharedContainer(directory: directory.path).mailboxes().isEmpty)
  }

  /// A message handed back is delivered again to the same receiver, before later ones, with the
  /// same id; it stays until acknowledged.
  @Test func aMessageHandedBackIsDeliveredAgainToThisReceiver() async throws {
    let mailbox = try await SharedContainer(directory: directory.path).mailbox("inbox")
    try await mailbox.sendAll(["a", "b", "c"])
    let receiver = try mailbox.receiver()
    let delivered = try receiver.receiveAvailable(String.self, limit: 2)
    #expect(delivered.map(\.payload) == ["a", "b"])
    try await receiver.acknowledge(delivered[0])
    try receiver.redeliver(delivered[1])
    let again = try receiver.receiveAvailable(String.self)
    #expect(again.map(\.payload) == ["b"])  // before "c", which waits in the store
    #expect(again.first?.id == delivered[1].id)
    try receiver.redeliver(again)
    var looped: [String] = []
    for try await envelope in receiver.messages(String.self) {
      looped.append(envelope.payload)
      try await receiver.acknowledge(envelope)
      if looped.count == 2 { break }
    }
    #expect(looped == ["b", "c"])
    #expect(try mailbox.count() == 0)
    try receiver.redeliver(again)  // acknowledged meanwhile: nothing to deliver
    #expect(try receiver.receiveAvailable(String.self).isEmpty)
  }
}

/// The peer's message type (`mreceive`).
private struct Marker: Codable, Sendable {
  let sender: String
  let n: Int
}
