// The local backend's parts, as the coordination protocols see them: their own methods already
// have the protocols' names and meanings (a blocking-free synchronous method answers for an
// `async` requirement).

extension SharedContainer: CoordinationPlace {}
extension ProcessLock: CoordinationLock {}
extension LockGuard: HeldLock {}
extension Presence: CoordinationPresence {}
extension PresenceClaim: HeldClaim {}
extension Signal: CoordinationSignal {}
