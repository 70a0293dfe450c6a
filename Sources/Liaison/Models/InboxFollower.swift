/// A mailbox's receiving end, followed for a view, in plain Swift: the logic of ``ObservedInbox``
/// and of LiaisonSwiftUI's `SharedInbox`, which only tell SwiftUI when it changed
/// (``didChange``). See ``ObservedInbox`` for what it shows, and when.
@MainActor
package final class InboxFollower<Payload: Decodable & Sendable> {
  /// The messages received and not yet acknowledged, oldest first.
  package private(set) var messages: [MailboxEnvelope<Payload>] = []
  /// How many messages wait in the mailbox, the unacknowledged ones shown included.
  package private(set) var waitingCount: Int
  /// Why the follower could not receive or acknowledge, the last time it failed.
  package private(set) var error: LiaisonError?
  /// Called after any of the above changed.
  package var didChange: (@MainActor () -> Void)?

  /// The receiver's acknowledgement and close, while the follower has the mailbox.
  private var receiver: Receiving?
  private let count: @Sendable () async throws(LiaisonError) -> Int
  private let following = ModelFollowing()

  private struct Receiving: Sendable {
    let acknowledge: @Sendable ([MailboxEnvelope<Payload>]) async throws(LiaisonError) -> Void
    let close: @Sendable () async -> Void
  }

  /// Becomes `mailbox`'s receiver, at once or when the receiver before it closes, and shows its
  /// messages as they come, up to `batchSize` at each update; `waitingCount` was read just before.
  package init<Mailbox: CoordinationMailbox>(
    _ mailbox: Mailbox, of type: Payload.Type, waitingCount: Int, batchSize: Int, updateInterval: Duration
  ) {
    self.waitingCount = waitingCount
    count = { () async throws(LiaisonError) in try await mailbox.count() }
    let limit = max(1, batchSize)
    let clock = ModelFollowing.clock(of: mailbox)
    following.start { [weak self] in
      while !Task.isCancelled {
        let ended: LiaisonError
        do throws(LiaisonError) {
          let receiver = try await mailbox.receiver(timeout: nil)
          let receiving = Receiving(
            acknowledge: { envelopes throws(LiaisonError) in try await receiver.acknowledge(envelopes, timeout: nil) },
            close: { await receiver.close() })
          // Through the weak reference: the waits below must not keep a released follower alive.
          guard await self?.adopt(receiving) != nil else {
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
          await self?.drop()
        } catch {
          ended = error
        }
        if ended.code == .suspended, let suspendable = mailbox as? any SuspendablePart {
          await suspendable.waitUntilResumed()
          continue
        }
        // Released or closed (``close()``) is the end the follower asked for, not a failure.
        if ended.code != .cancelled && ended.code != .closed { await self?.fail(ended) }
        return
      }
    }
  }

  /// Receives from `receiver` and hands each batch to `show` (which says whether the follower is
  /// still there), until the receiver ends; returns why it ended.
  private nonisolated static func receive<Mailbox: CoordinationMailbox>(
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
      guard await show(batch, waiting) else { return LiaisonError(.cancelled, "The follower was released.") }
      await ModelFollowing.rest(updateInterval, on: clock)
      if Task.isCancelled { return LiaisonError(.cancelled, "The follower was released.") }
    }
  }

  /// Acknowledges messages: they leave ``messages`` and the mailbox for good. See
  /// ``ObservedInbox/acknowledge(_:)``.
  @discardableResult
  package func acknowledge(_ envelopes: [MailboxEnvelope<Payload>]) -> Task<Void, any Error> {
    let (receiver, count) = (receiver, count)
    return Task { @MainActor [weak self] in
      do throws(LiaisonError) {
        guard let receiver else {
          throw LiaisonError(
            .closed,
            "The inbox has no receiver now (another one has the mailbox, or the container is suspended): "
              + "the messages it showed went back to the mailbox, and come again.")
        }
        try await receiver.acknowledge(envelopes)
        let waiting = try? await count()
        let ids = Set(envelopes.map(\.id))
        self?.messages.removeAll { ids.contains($0.id) }
        if let waiting { self?.waitingCount = waiting }
        self?.didChange?()
      } catch {
        self?.fail(error)
        throw error
      }
    }
  }

  /// Ends the receiver now: the messages shown and not acknowledged go to the next receiver, and
  /// the follower shows no new ones.
  package func close() async {
    following.cancel()
    await receiver?.close()
  }

  /// The follower has the mailbox now.
  private func adopt(_ receiver: Receiving) {
    self.receiver = receiver
  }

  /// The receiver ended: what it showed and did not acknowledge went back to the mailbox.
  private func drop() {
    receiver = nil
    guard !messages.isEmpty else { return }
    messages = []
    didChange?()
  }

  private func show(_ batch: [MailboxEnvelope<Payload>], waiting: Int?) {
    messages.append(contentsOf: batch)
    if let waiting { waitingCount = waiting }
    error = nil
    didChange?()
  }

  private func fail(_ failure: LiaisonError) {
    error = failure
    didChange?()
  }
}
