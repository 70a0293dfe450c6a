/// What a container's private folder, `.liaison`, holds: the one place that names its folders,
/// for every module of the package.
///
/// ```
/// .liaison/
///   locks/              one file per lock; .fencing-tokens/NAME beside them
///   presence/           one file per presence: its lock and its holder's record
///   signals/            one file per signal: its state and sequence
///   store/              the SQLite stores of LiaisonStore: defaults.sqlite, mailboxes.sqlite
///   store-signals/      the signal of each defaults domain
///   mailbox-signals/    the signal of each mailbox (a send wakes its receiver)
///   mailbox-receivers/  the lock of each mailbox's one receiver
///   databases/          the shared databases (NAME.sqlite)
///   database-signals/   the signal of each shared database (a commit wakes observers)
///   database-locks/     the lock that serialises each shared database's opening
/// ```
package enum ContainerLayout {
  /// The private folder, inside the container's directory.
  package static let root = ".liaison"

  /// A folder inside the private folder.
  package enum Folder: String, CaseIterable, Sendable {
    case locks
    case presence
    case signals
    case store
    case storeSignals = "store-signals"
    case mailboxSignals = "mailbox-signals"
    case mailboxReceivers = "mailbox-receivers"
    case databases
    case databaseSignals = "database-signals"
    case databaseLocks = "database-locks"
  }

  /// A SQLite store in ``Folder/store``, by name (its file is NAME.sqlite).
  package enum Store: String, Sendable {
    case defaults
    case mailboxes
  }
}
