import Liaison
import LiaisonStore

#if canImport(SwiftUI)
  import SwiftUI
#else
  import SwiftUIModel  // Linux, where SwiftUI does not exist: its model, for Liaison's tests
#endif

/// A mailbox's messages as a view property: the view shows the messages received and not yet
/// acknowledged, as other processes send them, and its actions acknowledge them.
///
/// ```swift
/// struct SharedLinks: View {
///   @SharedInbox("shared-links", sender: "app") var links: [MailboxEnvelope<SavedLink>]
///
///   var body: some View {
///     List(links, id: \.id) { link in
///       Text(link.payload.url.absoluteString)
///         .swipeActions { Button("Done") { $links.acknowledge([link]) } }
///     }
///   }
/// }
/// ```
///
/// The property is the mailbox's one receiver while its view is shown, as ``/Liaison/ObservedInbox``
/// is: a second one (another window) waits, showing nothing, and takes over when the first
/// closes; `suspend()` hands the messages not acknowledged back, and after `resume()` they come
/// again. `$name.waitingCount` and `$name.error` say how many wait, and what failed. From iOS 16
/// and macOS 13.
@propertyWrapper
public struct SharedInbox<Payload: Decodable & Sendable>: DynamicProperty {
  private var followed: FollowedPart<InboxFollower<Payload>>
  private let name: String
  private let sender: String
  private let batchSize: Int
  private let updateInterval: Duration

  /// The mailbox `name`, received as this process's `sender`.
  ///
  /// - Parameters:
  ///   - name: the mailbox's name (a ``/Liaison/LiaisonName``).
  ///   - sender: who this process is, in what it sends (see ``/Liaison/CoordinationMailbox/sender``).
  ///   - container: the container to read from, in place of the environment's.
  ///   - batchSize: the most messages one update adds.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz).
  public init(
    _ name: String, sender: String, container: (any CoordinationStore)? = nil, batchSize: Int = 256,
    updateInterval: Duration = .milliseconds(16)
  ) {
    followed = FollowedPart(container: container)
    self.name = name
    self.sender = sender
    self.batchSize = batchSize
    self.updateInterval = updateInterval
  }

  /// The messages received and not yet acknowledged, oldest first.
  @MainActor public var wrappedValue: [MailboxEnvelope<Payload>] { followed.follower?.messages ?? [] }

  /// The property itself: `$name.acknowledge(_:)`, `$name.waitingCount`, `$name.error`.
  public var projectedValue: SharedInbox { self }

  /// How many messages wait in the mailbox, the ones shown included.
  @MainActor public var waitingCount: Int { followed.follower?.waitingCount ?? 0 }

  /// Why the property could not open, receive or acknowledge, the last time it failed.
  @MainActor public var error: LiaisonError? { followed.error }

  /// Acknowledges messages: they leave the view and the mailbox for good. A view's action calls
  /// it without `await`; a failure shows in ``error``, and the returned task throws it.
  @discardableResult
  @MainActor public func acknowledge(_ envelopes: [MailboxEnvelope<Payload>]) -> Task<Void, any Error> {
    guard let follower = followed.follower else {
      let error = LiaisonError(.closed, "The inbox '\(name)' is not open yet: it has shown no message.")
      return Task { throw error }
    }
    return follower.acknowledge(envelopes)
  }

  /// Opens the mailbox before the view's first `body`, and from then on redraws the view as
  /// messages come.
  public func update() {
    let (name, sender, batchSize, updateInterval) = (name, sender, batchSize, updateInterval)
    followed.open(
      "the mailbox '\(name)'",
      now: { folder throws(LiaisonError) in
        let mailbox = try folder.mailbox(name, sender: sender)
        return InboxFollower(
          mailbox, of: Payload.self, waitingCount: try mailbox.count(), batchSize: batchSize,
          updateInterval: updateInterval)
      },
      later: { container throws(LiaisonError) in
        try await Self.follow(
          container.mailbox(name, sender: sender), batchSize: batchSize, updateInterval: updateInterval)
      })
  }

  @MainActor private static func follow(_ mailbox: some CoordinationMailbox, batchSize: Int, updateInterval: Duration)
    async throws(LiaisonError) -> InboxFollower<Payload>
  {
    InboxFollower(
      mailbox, of: Payload.self, waitingCount: try await mailbox.count(), batchSize: batchSize,
      updateInterval: updateInterval)
  }
}
