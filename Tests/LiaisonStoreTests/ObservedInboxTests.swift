import Foundation
import Liaison
import LiaisonTestSupport
import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the models
import Testing

@testable import LiaisonStore

/// An inbox model on a folder, in every build (no trait): it outlives a suspension of its
/// container, and a second inbox of the same mailbox waits for the first instead of failing.
@Suite("ObservedInbox on a folder")
@MainActor struct ObservedInboxTests {
  let directory = TemporaryDirectory()

  /// What the peer's `msend` sends.
  struct PeerMessage: Codable, Sendable, Equatable {
    let sender: String
    let n: Int
  }

  /// `suspend()` ends the inbox's receiver: the messages it showed go back to the mailbox and
  /// leave the model; after `resume()` the same inbox shows them again, and receives what comes.
  @Test(.enabled(if: modelsExist))
  func anInboxOutlivesASuspension() async throws {
    guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
    let container = try SharedContainer(directory: directory.path)
    let inbox = try await ObservedInbox(try await container.mailbox("links", sender: "app"), of: PeerMessage.self)
    let sender = try Peer(container: directory.path)
    try sender.send(.msend, "links", "web", "2")
    try await until("the inbox shows 2", observing: { inbox.messages.map(\.payload.n) }, satisfies: { $0 == [0, 1] })

    container.suspend()
    try await until("the suspended inbox shows none", observing: { inbox.messages.count }, satisfies: { $0 == 0 })
    #expect(inbox.error == nil, "a suspension is not a failure")
    try container.resume()
    try await until(
      "the inbox shows 2 again", observing: { inbox.messages.map(\.payload.n) }, satisfies: { $0 == [0, 1] })
    try await inbox.acknowledge([inbox.messages[0]]).value
    try sender.send(.msend, "links", "mail", "1")
    try await until(
      "the inbox shows the new message", observing: { inbox.messages.map(\.payload.sender) },
      satisfies: { $0 == ["web", "mail"] })
    #expect(inbox.waitingCount == 2)
    await inbox.close()
  }

  /// A second inbox of a mailbox that an inbox has waits, showing nothing, and takes over with
  /// the messages the first did not acknowledge when the first closes.
  @Test(.enabled(if: modelsExist))
  func aSecondInboxWaitsAndTakesOver() async throws {
    guard #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *) else { return }
    let container = try SharedContainer(directory: directory.path)
    let first = try await ObservedInbox(try await container.mailbox("links", sender: "app"), of: PeerMessage.self)
    let sender = try Peer(container: directory.path)
    try sender.send(.msend, "links", "web", "2")
    try await until("the first shows 2", observing: { first.messages.count }, satisfies: { $0 == 2 })
    try await first.acknowledge([first.messages[0]]).value

    let second = try await ObservedInbox(try await container.mailbox("links", sender: "app"), of: PeerMessage.self)
    #expect(second.messages.isEmpty && second.error == nil)
    #expect(second.waitingCount == 1)
    await first.close()
    try await until(
      "the second shows what the first left", observing: { second.messages.map(\.payload.n) }, satisfies: { $0 == [1] })
    #expect(second.error == nil)
    await second.close()
  }
}
