/// Who holds a presence, followed for a view, in plain Swift: the logic of ``ObservedPresence``
/// and of LiaisonSwiftUI's `SharedPresence`, which only tell SwiftUI when it changed
/// (``didChange``). Changes in quick succession coalesce into the latest; it follows the presence
/// until it is released.
@MainActor
package final class PresenceFollower {
  /// Who holds the presence; `nil` when nobody does.
  package private(set) var holder: PresenceHolder?
  /// Why the follower stopped following the presence, if it did (the watch failed).
  package private(set) var error: LiaisonError?
  /// Called after ``holder`` or ``error`` changed.
  package var didChange: (@MainActor () -> Void)?
  private let following = ModelFollowing()

  /// Follows `presence`, showing `holder` (read just before) until the first read: watches the
  /// presence, reads its holder again (a change between the two reads is not missed), then shows
  /// every change.
  package init<Presence: CoordinationPresence>(
    _ presence: Presence, holder: PresenceHolder?, updateInterval: Duration
  ) {
    self.holder = holder
    let clock = ModelFollowing.clock(of: presence)
    following.start { [weak self] in
      do {
        let changes = try await presence.changes()
        // Through the weak reference: the rest below must not keep a released follower alive.
        if await self?.show(try await presence.holder) == nil { return }
        for try await change in changes {
          let holder: PresenceHolder? =
            switch change {
            case .claimed(let holder): holder
            case .released: nil
            }
          if await self?.show(holder) == nil { return }
          await ModelFollowing.rest(updateInterval, on: clock)
        }
      } catch {
        await self?.fail(.from(error, doing: "follow the presence '\(presence.name)'"))
      }
    }
  }

  private func show(_ newHolder: PresenceHolder?) {
    guard holder != newHolder else { return }
    holder = newHolder
    didChange?()
  }

  private func fail(_ failure: LiaisonError) {
    error = failure
    didChange?()
  }
}
