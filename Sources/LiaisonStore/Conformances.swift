import Liaison

// The folder's stored parts, as the coordination protocols see them: their own methods have the
// protocols' names and meanings.

extension SharedContainer: CoordinationStore {}
extension SharedDefaults: CoordinationDefaults {}
extension Mailbox: CoordinationMailbox {}
extension MailboxReceiver: CoordinationReceiver {}
