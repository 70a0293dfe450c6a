import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the model below

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A signal as an `@Observable` model for a view: the last ``state`` posted by any process, and
/// when its notification came, on the main actor.
///
/// ```swift
/// let notes = try await ObservedSignal(try place.signal("notes-changed"))
/// List(store.notes()) { … }.id(notes.sequence)   // redrawn after every post
/// ```
///
/// Follow ``sequence`` to act on every post: a plain `post()` keeps ``state``, and a view that
/// reads only `state` is not redrawn for it.
///
/// Posts coalesce as a signal's notifications do: a burst is one update showing the latest
/// state. The model follows the signal until it is released: then its task ends, and so does
/// its watch.
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor @Observable
public final class ObservedSignal<Signal: CoordinationSignal> {
  /// The signal's state: read when the model was made, then the state of each notification.
  public private(set) var state: UInt64
  /// How many posts the signal has had in all, read with ``state``.
  public private(set) var sequence: UInt64
  /// When the last notification reached this process; `nil` when none has since the model was
  /// made.
  public private(set) var notifiedAt: Date?
  /// Why the model stopped following the signal, if it did (the watch failed).
  public private(set) var error: LiaisonError?
  /// The signal this model follows.
  public let signal: Signal

  @ObservationIgnored private let following = ModelFollowing()

  /// Follows `signal`: its state now, then every post by any process, this one's included.
  ///
  /// - Parameters:
  ///   - signal: the signal to follow.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz):
  ///     what changes within it comes as one update, after it; the first change after a quiet
  ///     moment shows at once.
  /// - Throws: ``LiaisonError`` when the signal cannot be watched or read.
  public init(
    _ signal: Signal, updateInterval: Duration = .milliseconds(16)
  ) async throws(LiaisonError) {
    self.signal = signal
    // Watching first, then reading: a post after the read is never missed.
    let notifications = try await signal.notifications(ignoringOwnPosts: false)
    sequence = try await signal.sequence
    state = try await signal.state
    let clock = ModelFollowing.clock(of: signal)
    following.start { [weak self] in
      do {
        for try await notification in notifications {
          // Through the weak reference: the rest below must not keep a released model alive.
          let date = Date(timeIntervalSince1970: clock.wallSeconds)
          if await self?.show(notification, at: date) == nil { return }
          await ModelFollowing.rest(updateInterval, on: clock)
        }
      } catch {
        await self?.fail(.from(error, doing: "follow the signal '\(signal.name)'"))
      }
    }
  }

  private func show(_ notification: SignalNotification, at date: Date) {
    guard notification.sequence >= sequence else { return }
    state = notification.state
    sequence = notification.sequence
    notifiedAt = date
  }

  private func fail(_ failure: LiaisonError) { error = failure }
}
