import Liaison
import LiaisonStore

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

#if canImport(SwiftUI)
  import SwiftUI
#else
  import SwiftUIModel  // Linux, where SwiftUI does not exist: its model, for Liaison's tests
#endif

/// A signal's posts, by any process, as a view property: the view is redrawn after every post.
///
/// ```swift
/// struct NotesList: View {
///   @SharedSignal("notes-changed") var notesChanged
///
///   var body: some View {
///     List(store.notes()) { … }
///       .id(notesChanged)   // read again after every post
///   }
/// }
/// ```
///
/// The value is the signal's sequence, which every post advances (a plain `post()` keeps the
/// state, which `$name.state` reads). Posts in quick succession come as one update, showing the
/// latest. `$name.error` says why the property stopped following the signal. On a folder's
/// container the first frame shows the last post; on PostgreSQL, 0 until the first read returns.
/// From iOS 16 and macOS 13.
@propertyWrapper
public struct SharedSignal: DynamicProperty {
  private var followed: FollowedPart<SignalFollower>
  private let name: String
  private let updateInterval: Duration

  /// The signal `name`.
  ///
  /// - Parameters:
  ///   - name: the signal's name (a ``/Liaison/LiaisonName``).
  ///   - container: the container to read from, in place of the environment's.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz).
  public init(_ name: String, container: (any CoordinationStore)? = nil, updateInterval: Duration = .milliseconds(16)) {
    followed = FollowedPart(container: container)
    self.name = name
    self.updateInterval = updateInterval
  }

  /// How many posts the signal has had in all (0 for a signal never posted, or before the first
  /// read): it grows with every post, so a view that reads it is redrawn after each.
  @MainActor public var wrappedValue: UInt64 { followed.follower?.sequence ?? 0 }

  /// The property itself: ``state``, ``notifiedAt`` and ``error`` as `$name.state`, ….
  public var projectedValue: SharedSignal { self }

  /// The state of the last post (0 for a signal never posted, or before the first read).
  @MainActor public var state: UInt64 { followed.follower?.state ?? 0 }

  /// When the last post's notification reached this process; `nil` when none has since the view
  /// appeared.
  @MainActor public var notifiedAt: Date? { followed.follower?.notifiedAt }

  /// Why the property could not open or follow the signal, if it could not.
  @MainActor public var error: LiaisonError? { followed.error }

  /// Opens the signal before the view's first `body`, and from then on redraws the view after
  /// every post.
  public func update() {
    let (name, updateInterval) = (name, updateInterval)
    followed.open(
      "the signal '\(name)'",
      now: { folder throws(LiaisonError) in
        let signal = try folder.signal(name)
        return SignalFollower(
          signal, state: try signal.state, sequence: try signal.sequence, updateInterval: updateInterval)
      },
      later: { container throws(LiaisonError) in
        try await Self.follow(container.signal(name), updateInterval: updateInterval)
      })
  }

  @MainActor private static func follow(_ signal: some CoordinationSignal, updateInterval: Duration)
    async throws(LiaisonError) -> SignalFollower
  {
    let sequence = try await signal.sequence
    return SignalFollower(signal, state: try await signal.state, sequence: sequence, updateInterval: updateInterval)
  }
}
