import Liaison

// The folder's stored parts, as the coordination protocols see them: their own methods have the
// protocols' names and meanings.

extension SharedContainer: CoordinationStore {
  public typealias DefaultsType = SharedDefaults
  public typealias MailboxType = Mailbox
}

extension SharedDefaults: CoordinationDefaults {
  public typealias Changes = SignalNotifications
}

extension Mailbox: CoordinationMailbox {
  public typealias Receiver = MailboxReceiver
}

extension MailboxReceiver: CoordinationReceiver {}
