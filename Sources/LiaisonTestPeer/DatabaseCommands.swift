// The peer's commands on shared databases.

import GRDB
import Liaison
import LiaisonStore

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

@MainActor private var databases: [String: SharedDatabase] = [:]
@MainActor private var databaseWatches: [AnyDatabaseCancellable] = []
/// Row counts a `dbwatch` observed, for `dbnext`.
private let databaseCounts = Inbox<String>()

let databaseCommands: [PeerCommandHandler] = [
  PeerCommandHandler(
    .dbopen,
    """
    NAME VERSION [COUNTFILE [legacy]]   opens the shared database with migrations v1…vVERSION (and \
    one called legacy); each appends its name to COUNTFILE when it runs → ok opened
    """
  ) { words in
    let countFile = words.count > 3 ? words[3] : nil
    var migrator = DatabaseMigrator()
    var names = (1...Int(words[2])!).map { "v\($0)" }
    if words.count > 4 && words[4] == "legacy" { names.append("legacy") }  // one the newer program never had
    for (index, name) in names.enumerated() {
      let version = index + 1
      migrator.registerMigration(name) { db in
        if version == 1 {
          try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        } else {
          try db.execute(sql: "CREATE INDEX item_name_\(version) ON item(name)")
        }
        if let countFile {
          let line = Array("\(name)\n".utf8)
          let fd = open(countFile, O_WRONLY | O_CREAT | O_APPEND, 0o600)
          _ = write(fd, line, line.count)
          close(fd)
        }
      }
    }
    databases[words[1]] = try container.database(words[1], migrator: migrator)
    return "opened"
  },
  PeerCommandHandler(.dbinsert, "NAME COUNT   COUNT rows, a transaction each → ok done") { words in
    let pool = databases[words[1]]!.pool
    for index in 0..<Int(words[2])! {
      try pool.write { db in
        try db.execute(sql: "INSERT INTO item (name) VALUES (?)", arguments: ["\(getpid())-\(index)"])
      }
    }
    return "done"
  },
  PeerCommandHandler(.dbcount, "NAME  → ok N") { words in
    String(
      try databases[words[1]]!.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM item") ?? 0 })
  },
  PeerCommandHandler(.dbwatch, "NAME   a ValueObservation of the row count → ok watching") { words in
    let observation = ValueObservation.tracking { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM item") ?? 0 }
      .removeDuplicates()
    databaseWatches.append(
      observation.start(
        in: databases[words[1]]!.pool, scheduling: .async(onQueue: observerQueue), onError: { _ in },
        onChange: { databaseCounts.put(String($0)) }))
    return "watching"
  },
  PeerCommandHandler(.dbnext, "[MILLISECONDS]   the next row count a dbwatch saw → ok N | ok none") { words in
    databaseCounts.take(milliseconds: waitMilliseconds(words)) ?? "none"
  },
  PeerCommandHandler(.dbexclusive, "NAME   holds the database in SQLite's exclusive locking mode → ok held") { words in
    let queue = try DatabaseQueue(path: try container.privateFolder(.databases).path(of: words[1] + ".sqlite"))
    try queue.writeWithoutTransaction { db in
      try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE")
      try db.execute(sql: "BEGIN EXCLUSIVE; COMMIT")
    }
    exclusiveDatabases[words[1]] = queue
    return "held"
  },
  PeerCommandHandler(
    .dbholdwrite, "NAME   opens a write transaction on the database and keeps it open (SQLite's write lock) → ok held"
  ) { words in
    var configuration = Configuration()
    configuration.allowsUnsafeTransactions = true  // a transaction left open on purpose
    let queue = try DatabaseQueue(
      path: try container.privateFolder(.databases).path(of: words[1] + ".sqlite"), configuration: configuration)
    try queue.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
    exclusiveDatabases[words[1]] = queue
    return "held"
  },
  PeerCommandHandler(
    .dbsuspension,
    """
    OTHER   opens a database observing GRDB's suspension in this container and in the container at \
    OTHER, suspends both containers, resumes this one, and writes here and there; resumes OTHER, \
    and writes there and here → ok (written|refused) ×4
    """
  ) { words in
    var configuration = Configuration()
    configuration.observesSuspensionNotifications = true
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY)") }
    let other = try SharedContainer(directory: words[1])
    let here = try container.database("suspension", migrator: migrator, configuration: configuration)
    let there = try other.database("suspension", migrator: migrator, configuration: configuration)
    func write(_ database: SharedDatabase) -> String {
      do {
        try database.pool.write { db in try db.execute(sql: "INSERT INTO item DEFAULT VALUES") }
        return "written"
      } catch {
        return "refused"
      }
    }
    container.suspend()
    other.suspend()
    try container.resume()
    let outcomes = [write(here), write(there)]
    try other.resume()
    return (outcomes + [write(there), write(here)]).joined(separator: " ")
  },
  PeerCommandHandler(.dbrelease, "NAME   closes what dbexclusive or dbholdwrite holds → ok released") { words in
    exclusiveDatabases[words[1]] = nil
    return "released"
  },
]

/// The connections `dbexclusive` holds.
@MainActor var exclusiveDatabases: [String: DatabaseQueue] = [:]
