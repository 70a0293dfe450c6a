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
@MainActor
public final class ObservedSignal<Signal: CoordinationSignal>: Observable {
  /// The signal's state: read when the model was made, then the state of each notification.
  public var state: UInt64 {
    registrar.access(self, keyPath: \.state)
    return follower.state
  }
  /// How many posts the signal has had in all, read with ``state``.
  public var sequence: UInt64 {
    registrar.access(self, keyPath: \.sequence)
    return follower.sequence
  }
  /// When the last notification reached this process; `nil` when none has since the model was
  /// made.
  public var notifiedAt: Date? {
    registrar.access(self, keyPath: \.notifiedAt)
    return follower.notifiedAt
  }
  /// Why the model stopped following the signal, if it did (the watch failed).
  public var error: LiaisonError? {
    registrar.access(self, keyPath: \.error)
    return follower.error
  }
  /// The signal this model follows.
  public let signal: Signal

  private let follower: SignalFollower
  private let registrar = ObservationRegistrar()

  /// Follows `signal`: its state now, then every post by any process, this one's included.
  ///
  /// - Parameters:
  ///   - signal: the signal to follow.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz):
  ///     what changes within it comes as one update, after it; the first change after a quiet
  ///     moment shows at once.
  /// - Throws: ``LiaisonError`` when the signal cannot be read. (A signal that cannot be watched
  ///   shows in ``error``.)
  public init(
    _ signal: Signal, updateInterval: Duration = .milliseconds(16)
  ) async throws(LiaisonError) {
    self.signal = signal
    let sequence = try await signal.sequence
    follower = SignalFollower(
      signal, state: try await signal.state, sequence: sequence, updateInterval: updateInterval)
    follower.didChange = { [weak self] in
      guard let self else { return }
      registrar.withMutation(of: self, keyPath: \.state) {}
      registrar.withMutation(of: self, keyPath: \.sequence) {}
      registrar.withMutation(of: self, keyPath: \.notifiedAt) {}
      registrar.withMutation(of: self, keyPath: \.error) {}
    }
  }
}
