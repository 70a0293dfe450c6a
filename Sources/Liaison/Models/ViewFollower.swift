/// A follower of one part for a view (``DefaultsValueFollower``, ``PresenceFollower``,
/// ``SignalFollower``, ``InboxFollower``): what it shows changed when it calls ``didChange``.
@MainActor
package protocol ViewFollower: AnyObject {
  /// Called after what the follower shows changed.
  var didChange: (@MainActor () -> Void)? { get set }
}

extension DefaultsValueFollower: ViewFollower {}
extension PresenceFollower: ViewFollower {}
extension SignalFollower: ViewFollower {}
extension InboxFollower: ViewFollower {}
