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

  /// The receiver, while the model has the mailbox.
  @ObservationIgnored private var receiver: Mailbox.Receiver?
  @ObservationIgnored private let following = ModelFollowing()

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
    waitingCount = try await mailbox.count()
    let limit = max(1, batchSize)
    let clock = ModelFollowing.clock(of: mailbox)
    following.start { [weak self] in
      while !Task.isCancelled {
        let ended: LiaisonError
        do throws(LiaisonError) {
          let receiver = try await mailbox.receiver(timeout: nil)
          // Through the weak reference: the waits below must not keep a released model alive.
          guard await self?.adopt(receiver) != nil else {
            await receiver.close()
            return
          }
          ended = await Self.receive(
            from: receiver, of: mailbox, limit: limit, updateInterval: updateInterval, clock: clock
          ) {
            [weak self] batch, waiting in await self?.show(batch, waiting: waiting) != nil
          }
          // Released, closed, suspended or failed: the messages not acknowledged go back.
          await receiver.close()
          await self?.drop(receiver)
        } catch {
          ended = error
        }
        if ended.code == .suspended, let suspendable = mailbox as? any SuspendablePart {
          await suspendable.waitUntilResumed()
          continue
        }
        // Released or closed (``close()``) is the end the model asked for, not a failure.
        if ended.code != .cancelled && ended.code != .closed { await self?.fail(ended) }
        return
      }
    }
  }

  /// Receives from `receiver` and hands each batch to `show` (which says whether the model is
  /// still there), until the receiver ends; returns why it ended.
  private nonisolated static func receive(
    from receiver: Mailbox.Receiver, of mailbox: Mailbox, limit: Int, updateInterval: Duration, clock: LiaisonClock,
    show: @escaping @Sendable ([MailboxEnvelope<Payload>], Int?) async -> Bool
  ) async -> LiaisonError {
    while true {
      let batch: [MailboxEnvelope<Payload>]
      do throws(LiaisonError) {
        batch = try await receiver.receive(Payload.self, limit: limit, timeout: nil)
      } catch {
        return error
      }
      let waiting = try? await mailbox.count()
      guard await show(batch, waiting) else { return LiaisonError(.cancelled, "The model was released.") }
      await ModelFollowing.rest(updateInterval, on: clock)
      if Task.isCancelled { return LiaisonError(.cancelled, "The model was released.") }
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
        guard let receiver else {
          throw LiaisonError(
            .closed,
            "The inbox has no receiver now (another one has the mailbox, or the container is suspended): "
              + "the messages it showed went back to the mailbox, and come again.")
        }
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
    await receiver?.close()
  }

  /// The model has the mailbox now.
  private func adopt(_ receiver: Mailbox.Receiver) {
    self.receiver = receiver
  }

  /// `receiver` ended: what it showed and did not acknowledge went back to the mailbox.
  private func drop(_ receiver: Mailbox.Receiver) {
    self.receiver = nil
    messages = []
  }

  private func show(_ batch: [MailboxEnvelope<Payload>], waiting: Int?) {
    messages.append(contentsOf: batch)
    if let waiting { waitingCount = waiting }
    error = nil
  }

  private func fail(_ failure: LiaisonError) { error = failure }
}
