import Liaison
import LiaisonStore

#if canImport(SwiftUI)
  import SwiftUI
#else
  import SwiftUIModel  // Linux, where SwiftUI does not exist: its model, for Liaison's tests
#endif

/// Whether a presence is held, by any process, as a view property: the view follows claims,
/// releases and silent deaths.
///
/// ```swift
/// struct KeyboardBar: View {
///   @SharedPresence("recording") var isRecording: Bool
///
///   var body: some View {
///     if isRecording { Label("Recording in the app", systemImage: "record.circle") }
///   }
/// }
/// ```
///
/// `$isRecording.holder` says who holds it, and `$isRecording.error` why the property stopped
/// following it. On a folder's container the first frame shows the presence as it is; on
/// PostgreSQL, not held until the first read returns. The container comes from the environment
/// (`.liaisonContainer(_:)`) or is given to the property. From iOS 16 and macOS 13.
@propertyWrapper
public struct SharedPresence: DynamicProperty {
  private var followed: FollowedPart<PresenceFollower>
  private let name: String
  private let updateInterval: Duration

  /// The presence `name`.
  ///
  /// - Parameters:
  ///   - name: the presence's name (a ``/Liaison/LiaisonName``).
  ///   - container: the container to read from, in place of the environment's.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz).
  public init(_ name: String, container: (any CoordinationStore)? = nil, updateInterval: Duration = .milliseconds(16)) {
    followed = FollowedPart(container: container)
    self.name = name
    self.updateInterval = updateInterval
  }

  /// Whether the presence is held now, by any process.
  @MainActor public var wrappedValue: Bool { holder != nil }

  /// The property itself: ``holder`` and ``error`` as `$name.holder`, `$name.error`.
  public var projectedValue: SharedPresence { self }

  /// Who holds the presence; `nil` when nobody does.
  @MainActor public var holder: PresenceHolder? { followed.follower?.holder }

  /// Why the property could not open or follow the presence, if it could not.
  @MainActor public var error: LiaisonError? { followed.error }

  /// Opens the presence before the view's first `body`, and from then on redraws the view when
  /// its holder changes.
  public func update() {
    let (name, updateInterval) = (name, updateInterval)
    followed.open(
      "the presence '\(name)'",
      now: { folder throws(LiaisonError) in
        let presence = try folder.presence(name)
        return PresenceFollower(presence, holder: try presence.holder, updateInterval: updateInterval)
      },
      later: { container throws(LiaisonError) in
        try await Self.follow(container.presence(name), updateInterval: updateInterval)
      })
  }

  @MainActor private static func follow(_ presence: some CoordinationPresence, updateInterval: Duration)
    async throws(LiaisonError) -> PresenceFollower
  {
    PresenceFollower(presence, holder: try await presence.holder, updateInterval: updateInterval)
  }
}
