/// A command of the test peer (`LiaisonTestPeer`): the first word of a line a test sends it.
///
/// The peer and the tests share this type, so a misspelled command does not compile: the tests
/// send ``Peer/send(_:_:timeout:)`` a case, and the peer has one handler per case (it stops at
/// start when one is missing). A line that starts with no command is answered with an error,
/// which ``Peer/send(_:_:timeout:)`` throws. Each command's arguments and answer are in the peer's
/// manual, `LiaisonTestPeer --help`, and in the handler beside it (the file named below).
public enum PeerCommand: String, CaseIterable, Sendable {
  // Locks (LockCommands.swift)
  case lock
  case trylock
  case trylockRepeatedly = "trylock-repeatedly"
  case token
  case unlock
  case waitlock
  case increment
  case timedlock
  case residue
  case suspendedWaits = "suspended-waits"
  case holdlock

  // Presences (PresenceCommands.swift)
  case claim
  case release
  case lease
  case active
  case watchPresence = "watch-presence"
  case nextChange = "next-change"
  case lapseResidue = "lapse-residue"

  // Signals (SignalCommands.swift)
  case post
  case burst
  case observe
  case observeManyTimes = "observe-many-times"
  case observeMany = "observe-many"
  case unobserve
  case next
  case signalResidue = "signal-residue"

  // A folder's defaults (DefaultsCommands.swift)
  case dset
  case dget
  case dincrement
  case dread
  case drefresh
  case dwatch
  case dnext
  case dbusy

  // A folder's databases (DatabaseCommands.swift)
  case dbopen
  case dbinsert
  case dbcount
  case dbwatch
  case dbnext
  case dbexclusive
  case dbholdwrite
  case dbsuspension
  case dbrelease

  // A folder's mailboxes (MailboxCommands.swift)
  case msend
  case msendid
  case msendraw
  case mreceive
  case mreceiver
  case mrequeue
  case mcount
  case mpeek

  // The peer's own process (ProcessCommands.swift)
  case counts
  case threadsNamed = "threads-named"
  case busyPool = "busy-pool"
  case suspend
  case resume
  case grdbSuspend = "grdb-suspend"
  case grdbResume = "grdb-resume"
  case holdFileLock = "hold-file-lock"
  case probeFileLock = "probe-file-lock"
  case releaseFileLock = "release-file-lock"
  case hostHandler = "host-handler"
  case dieBeforeRing = "die-before-ring"

  // Any place: locks, presences, signals (PlaceCommands.swift)
  case placeLock = "place-lock"
  case placeTrylock = "place-trylock"
  case placeUnlock = "place-unlock"
  case placeLost = "place-lost"
  case placeIsheld = "place-isheld"
  case placeClaim = "place-claim"
  case placeRelease = "place-release"
  case placeHolder = "place-holder"
  case placeWatch = "place-watch"
  case placeNextchange = "place-nextchange"
  case placePost = "place-post"
  case placeState = "place-state"
  case placeObserve = "place-observe"
  case placeNextnotification = "place-nextnotification"

  // Any place: defaults (PlaceDefaultsCommands.swift)
  case placeDset = "place-dset"
  case placeDsetstring = "place-dsetstring"
  case placeDsetbytes = "place-dsetbytes"
  case placeDget = "place-dget"
  case placeDgetstring = "place-dgetstring"
  case placeDincrement = "place-dincrement"
  case placeDwatch = "place-dwatch"
  case placeDnext = "place-dnext"
  case placeDobserve = "place-dobserve"
  case placeDnextnotification = "place-dnextnotification"
  case placeDrefresh = "place-drefresh"

  // Any place: mailboxes (PlaceMailboxCommands.swift)
  case placeMsend = "place-msend"
  case placeMreceive = "place-mreceive"
  case placeMcount = "place-mcount"

  // A PostgreSQL place's SQL (PostgresCommands.swift)
  case pgFencedincrement = "pg-fencedincrement"
  case pgFencedwrite = "pg-fencedwrite"
}

extension PeerCommand {
  /// The line that sends this command with `arguments`, each one a word of it (the peer splits a
  /// line at its spaces; only a command's last argument, such as a presence's info, may have
  /// spaces in it).
  public func line(_ arguments: [any CustomStringConvertible]) -> String {
    let line = ([rawValue] + arguments.map(\.description)).joined(separator: " ")
    precondition(!line.contains("\n"), "a peer command is one line: \(line)")
    return line
  }
}
