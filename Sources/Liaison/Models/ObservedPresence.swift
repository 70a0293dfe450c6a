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
@MainActor @Observable
public final class ObservedPresence<Presence: CoordinationPresence> {
  /// Whether the presence is held now, by any process.
  public var isActive: Bool { holder != nil }
  /// Who holds the presence; `nil` when nobody does.
  public private(set) var holder: PresenceHolder?
  /// Why the model stopped following the presence, if it did (the watch failed).
  public private(set) var error: LiaisonError?
  /// The presence this model follows.
  public let presence: Presence

  @ObservationIgnored private let following = ModelFollowing()

  /// Follows `presence`: its holder now, then every change.
  ///
  /// - Parameters:
  ///   - presence: the presence to follow.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz):
  ///     what changes within it comes as one update, after it; the first change after a quiet
  ///     moment shows at once.
  /// - Throws: ``LiaisonError`` when the presence cannot be watched or read.
  public init(
    _ presence: Presence, updateInterval: Duration = .milliseconds(16)
  ) async throws(LiaisonError) {
    self.presence = presence
    // Watching first, then reading: a change after the read is never missed.
    let changes = try await presence.changes()
    holder = try await presence.holder
    let clock = ModelFollowing.clock(of: presence)
    following.start { [weak self] in
      do {
        for try await change in changes {
          // Through the weak reference: the rest below must not keep a released model alive.
          if await self?.show(change) == nil { return }
          await ModelFollowing.rest(updateInterval, on: clock)
        }
      } catch {
        await self?.fail(.from(error, doing: "follow the presence '\(presence.name)'"))
      }
    }
  }

  private func show(_ change: PresenceChange) {
    switch change {
    case .claimed(let newHolder): if holder != newHolder { holder = newHolder }
    case .released: if holder != nil { holder = nil }
    }
  }

  private func fail(_ failure: LiaisonError) { error = failure }
}
