import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the model below

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A mailbox's receiving end as an `@Observable` model for a view: the ``messages`` received and
/// not yet acknowledged, and how many wait in all, on the main actor. New messages appear as
/// other processes send them; the view's actions acknowledge them.
///
/// ```swift
/// let inbox = try await ObservedInbox(try await place.mailbox("shared-links", sender: "app"), of: SavedLink.self)
/// List(inbox.messages, id: \.id) { envelope in
///   HStack {
///     Text(envelope.payload.url.absoluteString)
///     Button("Done") { inbox.acknowledge([envelope]) }
///   }
/// }
/// ```
///
/// The model is the mailbox's one receiver (``CoordinationMailbox/receiver(timeout:)``) for as
/// long as it lives. While another receiver has the mailbox (a second window's inbox, or a view
/// rebuilt before the old model was released), the model waits, showing no messages, and takes
/// over when that receiver closes. Messages arrive in batches (one update per batch, up to
/// `batchSize` messages). When the model is released (or ``close()`` is called), its receiver is
/// closed: the messages it showed and did not acknowledge go to the next receiver.
///
/// A container's `suspend()` ends the receiver (iOS must not suspend a process holding a lock):
/// the messages shown and not acknowledged go back to the mailbox and leave ``messages``, and
/// after `resume()` the model receives again, those messages first.
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor
public final class ObservedInbox<Mailbox: CoordinationMailbox, Payload: Decodable & Sendable>: Observable {
  /// The messages received and not yet acknowledged, oldest first.
  public var messages: [MailboxEnvelope<Payload>] {
    registrar.access(self, keyPath: \.messages)
    return follower.messages
  }
  /// How many messages wait in the mailbox, the unacknowledged ones shown here included
  /// (quarantined ones not).
  public var waitingCount: Int {
    registrar.access(self, keyPath: \.waitingCount)
    return follower.waitingCount
  }
  /// Why the model could not receive or acknowledge, the last time it failed.
  public var error: LiaisonError? {
    registrar.access(self, keyPath: \.error)
    return follower.error
  }
  /// The mailbox this model receives from.
  public let mailbox: Mailbox

  private let follower: InboxFollower<Payload>
  private let registrar = ObservationRegistrar()

  /// Becomes the mailbox's receiver, at once or when the receiver before it closes, and shows
  /// its messages as they come.
  ///
  /// - Parameters:
  ///   - mailbox: the mailbox to receive from.
  ///   - type: the payloads' type; a message that cannot be decoded as it is quarantined.
  ///   - batchSize: the most messages one update adds.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz):
  ///     what changes within it comes as one update, after it; the first change after a quiet
  ///     moment shows at once.
  /// - Throws: a ``LiaisonError`` when the store cannot be read.
  public init(
    _ mailbox: Mailbox, of type: Payload.Type, batchSize: Int = 256,
    updateInterval: Duration = .milliseconds(16)
  ) async throws(LiaisonError) {
    self.mailbox = mailbox
    follower = InboxFollower(
      mailbox, of: type, waitingCount: try await mailbox.count(), batchSize: batchSize,
      updateInterval: updateInterval)
    follower.didChange = { [weak self] in
      guard let self else { return }
      registrar.withMutation(of: self, keyPath: \.messages) {}
      registrar.withMutation(of: self, keyPath: \.waitingCount) {}
      registrar.withMutation(of: self, keyPath: \.error) {}
    }
  }

  /// Acknowledges messages: they leave ``messages`` and the mailbox for good. A view calls it
  /// without `await` and reads a failure in ``error``; code that must know awaits the returned
  /// task's `value`, which throws the ``LiaisonError``.
  @discardableResult
  public func acknowledge(_ envelopes: [MailboxEnvelope<Payload>]) -> Task<Void, any Error> {
    follower.acknowledge(envelopes)
  }

  /// Ends the receiver now: the messages shown and not acknowledged go to the next receiver, and
  /// the model shows no new ones.
  public func close() async { await follower.close() }
}
