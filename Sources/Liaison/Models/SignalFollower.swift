#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A signal's last post, followed for a view, in plain Swift: the logic of ``ObservedSignal``
/// and of LiaisonSwiftUI's `SharedSignal`, which only tell SwiftUI when it changed
/// (``didChange``). Posts coalesce as a signal's notifications do; it follows the signal until it
/// is released.
@MainActor
package final class SignalFollower {
  /// The signal's state: read when the follower was made, then the state of each notification.
  package private(set) var state: UInt64
  /// How many posts the signal has had in all, read with ``state``.
  package private(set) var sequence: UInt64
  /// When the last notification reached this process; `nil` when none has since the follower was
  /// made.
  package private(set) var notifiedAt: Date?
  /// Why the follower stopped following the signal, if it did (the watch failed).
  package private(set) var error: LiaisonError?
  /// Called after any of the above changed.
  package var didChange: (@MainActor () -> Void)?
  private let following = ModelFollowing()

  /// Follows `signal`, showing `state` and `sequence` (read just before) until the first read:
  /// watches the signal, reads them again (a post between the two reads is not missed), then
  /// shows every post by any process, this one's included.
  package init<Signal: CoordinationSignal>(
    _ signal: Signal, state: UInt64, sequence: UInt64, updateInterval: Duration
  ) {
    self.state = state
    self.sequence = sequence
    let clock = ModelFollowing.clock(of: signal)
    following.start { [weak self] in
      do {
        let notifications = try await signal.notifications(ignoringOwnPosts: false)
        let sequence = try await signal.sequence
        let state = try await signal.state
        // Through the weak reference: the rest below must not keep a released follower alive.
        if await self?.show(state: state, sequence: sequence, at: nil) == nil { return }
        for try await notification in notifications {
          let date = Date(timeIntervalSince1970: clock.wallSeconds)
          if await self?.show(state: notification.state, sequence: notification.sequence, at: date) == nil {
            return
          }
          await ModelFollowing.rest(updateInterval, on: clock)
        }
      } catch {
        await self?.fail(.from(error, doing: "follow the signal '\(signal.name)'"))
      }
    }
  }

  /// Shows a post: the one read at the start (`date` `nil`), if later than the one shown, or a
  /// notification's, unless it is older.
  private func show(state newState: UInt64, sequence newSequence: UInt64, at date: Date?) {
    if let date {
      guard newSequence >= sequence else { return }
      notifiedAt = date
    } else {
      guard newSequence > sequence else { return }
    }
    state = newState
    sequence = newSequence
    didChange?()
  }

  private func fail(_ failure: LiaisonError) {
    error = failure
    didChange?()
  }
}
