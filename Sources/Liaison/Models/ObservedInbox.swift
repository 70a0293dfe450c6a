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
/// The model is the mailbox's one receiver (``CoordinationMailbox/receiver()``) for as long as
/// it lives: making it throws ``LiaisonError/Code/alreadyClaimed`` when another receiver has the
/// mailbox. Messages arrive in batches (one update per batch, up to `batchSize` messages). When the
/// model is released (or ``close()`` is called), its receiver is closed: the messages it showed and
/// did not acknowledge go to the next receiver.
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor @Observable
public final class ObservedInbox<Mailbox: CoordinationMailbox, Payload: Decodable & Sendable> {
  /// The messages received and not yet acknowledged, oldest first.
  public private(set) var messages: [MailboxEnvelope<Payload>] = []
  /// How many messages wait in the mailbox, the unacknowledged ones shown here included
  /// (quarantined ones not).
  public private(set) var waitingCount: Int
  /// Why the model could not receive or acknowledge, the last time it failed.
  public private(set) var error: LiaisonError?
  /// The mailbox this model receives from.
  public let mailbox: Mailbox

  @ObservationIgnored private let receiver: Mailbox.Receiver
  @ObservationIgnored private let following = ModelFollowing()

  /// Becomes the mailbox's receiver and shows its messages as they come.
  ///
  /// - Parameters:
  ///   - mailbox: the mailbox to receive from.
  ///   - type: the payloads' type; a message that cannot be decoded as it is quarantined.
  ///   - batchSize: the most messages one update adds.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz):
  ///     what changes within it comes as one update, after it; the first change after a quiet
  ///     moment shows at once.
  /// - Throws: ``LiaisonError/Code/alreadyClaimed`` when another receiver has the mailbox; a
  ///   ``LiaisonError`` when the store cannot be read.
  public init(
    _ mailbox: Mailbox, of type: Payload.Type, batchSize: Int = 256,
    updateInterval: Duration = .milliseconds(16)
  ) async throws(LiaisonError) {
    self.mailbox = mailbox
    let receiver = try await mailbox.receiver()
    self.receiver = receiver
    do {
      waitingCount = try await mailbox.count()
    } catch {
      await receiver.close()
      throw error
    }
    let limit = max(1, batchSize)
    let clock = ModelFollowing.clock(of: mailbox)
    following.start { [weak self] in
      while !Task.isCancelled {
        let batch: [MailboxEnvelope<Payload>]
        do throws(LiaisonError) {
          batch = try await receiver.receive(Payload.self, limit: limit, timeout: nil)
        } catch {
          // Released or closed (``close()``) is the end the model asked for, not a failure.
          if error.code != .cancelled && error.code != .closed { await self?.fail(error) }
          break
        }
        let waiting = try? await mailbox.count()
        // Through the weak reference: the rest below must not keep a released model alive.
        if await self?.show(batch, waiting: waiting) == nil { break }
        await ModelFollowing.rest(updateInterval, on: clock)
      }
      // Released, closed or failed: the messages not acknowledged go to the next receiver.
      await receiver.close()
    }
  }

  /// Acknowledges messages: they leave ``messages`` and the mailbox for good. A view calls it
  /// without `await` and reads a failure in ``error``; code that must know awaits the returned
  /// task's `value`, which throws the ``LiaisonError``.
  @discardableResult
  public func acknowledge(_ envelopes: [MailboxEnvelope<Payload>]) -> Task<Void, any Error> {
    let (receiver, mailbox) = (receiver, mailbox)
    return Task { @MainActor [weak self] in
      do throws(LiaisonError) {
        try await receiver.acknowledge(envelopes, timeout: nil)
        let waiting = try? await mailbox.count()
        let ids = Set(envelopes.map(\.id))
        self?.messages.removeAll { ids.contains($0.id) }
        if let waiting { self?.waitingCount = waiting }
      } catch {
        self?.error = error
        throw error
      }
    }
  }

  /// Ends the receiver now: the messages shown and not acknowledged go to the next receiver, and
  /// the model shows no new ones.
  public func close() async {
    following.cancel()
    await receiver.close()
  }

  private func show(_ batch: [MailboxEnvelope<Payload>], waiting: Int?) {
    messages.append(contentsOf: batch)
    if let waiting { waitingCount = waiting }
    error = nil
  }

  private func fail(_ failure: LiaisonError) { error = failure }
}
