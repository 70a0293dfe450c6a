/// A follower of one part for a view (``DefaultsValueFollower``, ``PresenceFollower``,
/// ``SignalFollower``, ``InboxFollower``): what it shows changed when it calls ``didChange``.
@MainActor
package protocol ViewFollower: AnyObject {
  /// Called after what the follower shows changed.
  var didChange: (@MainActor () -> Void)? { get set }
  /// Why the follower could not read, follow or write its part, the last time it failed.
  var error: LiaisonError? { get }
}

extension DefaultsValueFollower: ViewFollower {}
extension PresenceFollower: ViewFollower {}
extension SignalFollower: ViewFollower {}
extension InboxFollower: ViewFollower {}
