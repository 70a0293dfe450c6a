import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the model below

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A presence as an `@Observable` model for a view: ``isActive`` and ``holder`` follow claims,
/// releases and silent deaths in every process, on the main actor.
///
/// ```swift
/// let recording = try await ObservedPresence(try place.presence("recording"))
/// if recording.isActive { Label("Recording", systemImage: "record.circle") }
/// ```
///
/// The model follows the presence until it is released: then its task ends, and so does its
/// watch. Changes in quick succession coalesce into the latest.
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor
public final class ObservedPresence<Presence: CoordinationPresence>: Observable {
  /// Whether the presence is held now, by any process.
  public var isActive: Bool { holder != nil }
  /// Who holds the presence; `nil` when nobody does.
  public var holder: PresenceHolder? {
    registrar.access(self, keyPath: \.holder)
    return follower.holder
  }
  /// Why the model stopped following the presence, if it did (the watch failed).
  public var error: LiaisonError? {
    registrar.access(self, keyPath: \.error)
    return follower.error
  }
  /// The presence this model follows.
  public let presence: Presence

  private let follower: PresenceFollower
  private let registrar = ObservationRegistrar()

  /// Follows `presence`: its holder now, then every change.
  ///
  /// - Parameters:
  ///   - presence: the presence to follow.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz):
  ///     what changes within it comes as one update, after it; the first change after a quiet
  ///     moment shows at once.
  /// - Throws: ``LiaisonError`` when the presence cannot be read. (A presence that cannot be
  ///   watched shows in ``error``.)
  public init(
    _ presence: Presence, updateInterval: Duration = .milliseconds(16)
  ) async throws(LiaisonError) {
    self.presence = presence
    follower = PresenceFollower(presence, holder: try await presence.holder, updateInterval: updateInterval)
    follower.didChange = { [weak self] in
      guard let self else { return }
      registrar.withMutation(of: self, keyPath: \.holder) {}
      registrar.withMutation(of: self, keyPath: \.error) {}
    }
  }
}
