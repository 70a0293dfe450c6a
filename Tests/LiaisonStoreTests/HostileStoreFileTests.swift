import Foundation
import GRDB
import Liaison
import LiaisonStore
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A file that the store (`SharedDefaults`) or a shared database (`SharedDatabase`) keeps in a
/// container, by its path inside `.liaison`.
enum StoreFile: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case storeDatabase = "store/defaults.sqlite"
  case storeLog = "store/defaults.sqlite-wal"
  case storeIndex = "store/defaults.sqlite-shm"
  case counters = "store/defaults.generations"
  case storeWriteLock = "store/defaults.write"
  case storeSignal = "store-signals/settings"
  case database = "databases/journal.sqlite"
  case databaseLog = "databases/journal.sqlite-wal"
  case databaseIndex = "databases/journal.sqlite-shm"
  case databaseOpenLock = "database-locks/journal"
  case databaseSignal = "database-signals/journal"

  /// Whether the file belongs to the store (else to the shared database `journal`).
  var isStore: Bool { rawValue.hasPrefix("store") }

  func path(in directory: String) -> String { directory + "/.liaison/" + rawValue }

  /// The SQLite database this file belongs to or stands beside.
  var database: SQLiteDatabase { isStore ? .store : .shared }

  var testDescription: String { rawValue }
}

/// One of the two SQLite databases a container holds: the store, or a user's shared database.
enum SQLiteDatabase: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case store
  case shared

  var file: StoreFile { self == .store ? .storeDatabase : .database }
  var log: StoreFile { self == .store ? .storeLog : .databaseLog }
  var index: StoreFile { self == .store ? .storeIndex : .databaseIndex }

  var testDescription: String { self == .store ? "the store" : "a shared database" }

  /// Opens the database in this process, as a process starting now would; it stays open while
  /// the value returned lives (the store, for the life of the process).
  func open(in directory: String) throws -> AnyObject {
    let container = try SharedContainer(directory: directory)
    switch self {
    case .store: return try container.defaults("settings")
    case .shared: return try container.database("journal", migrator: Self.journalMigrator)
    }
  }

  /// Opens the database and reads what ``HostileStoreFileTests/makeFiles()`` wrote: the value of
  /// `theme` in the store, the number of rows in the shared database.
  func read(in directory: String) throws -> Int? {
    switch try open(in: directory) {
    case let defaults as SharedDefaults:
      return try defaults.get(DefaultsKey<Int>("theme"))
    case let database as SharedDatabase:
      return try database.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM item") }
    default:
      return nil
    }
  }

  /// The shared database's migrations, as the test peer's `dbopen journal 1` registers them.
  static var journalMigrator: DatabaseMigrator {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in
      try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    }
    return migrator
  }

  /// What ``read(in:)`` finds in the files ``HostileStoreFileTests/makeFiles()`` leaves.
  var written: Int { self == .store ? 7 : 3 }
}

/// The folders of the store and of shared databases, inside `.liaison`.
let storeFolders = ["store", "store-signals", "databases", "database-signals", "database-locks"]

/// Every hostile case the threat model lists, for the files of the store and of shared databases:
/// each ends in a `LiaisonError` that names the file and the fix, or in a documented recovery.
///
/// The files are made by another process (the test peer), which is then killed: so this process
/// has not opened them (it keeps its store open for its whole life), and the SQLite files are as
/// a crash leaves them, the latest commits still in the write-ahead log.
@Suite("Hostile files: the store and shared databases")
struct HostileStoreFileTests {
  let directory = TemporaryDirectory()

  /// Makes every file of ``StoreFile`` in another process: the store with `theme = 7`, the
  /// shared database `journal` with 3 rows (each in a transaction of its own).
  func makeFiles() throws {
    let maker = try Peer(container: directory.path)
    try maker.send(.dset, "settings", "theme", "7")
    try maker.send(.dbopen, "journal", "1")
    try maker.send(.dbinsert, "journal", "3")
    maker.kill()
  }

  /// Makes the files, then moves every commit from the logs into the database files (a
  /// checkpoint, as SQLite makes when the last connection closes), leaving no log.
  func makeCheckpointedFiles() throws {
    try makeFiles()
    for database in SQLiteDatabase.allCases {
      let queue = try DatabaseQueue(path: database.file.path(in: directory.path))
      try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
      try queue.close()
    }
  }

  /// Opens the database of `file` in this process, as a process starting now would.
  func use(_ file: StoreFile) throws {
    _ = try file.database.read(in: directory.path)
  }

  // MARK: Damaged content

  /// A database file that is garbage or cut short is never replaced: Liaison throws
  /// `corruptFile`, naming the file and saying how to keep its data, and leaves it as it is.
  @Test(arguments: SQLiteDatabase.allCases, ["garbage", "truncated"])
  func aDamagedDatabaseIsACorruptFileErrorAndIsLeftAsItIs(_ database: SQLiteDatabase, _ damage: String) throws {
    try makeCheckpointedFiles()
    let file = database.file.path(in: directory.path)
    if damage == "garbage" {
      try overwrite(file, with: garbage(count: try fileBytes(file).count))
    } else {
      try truncateFile(file, to: 100)
    }
    let damaged = try fileBytes(file)
    #expect { _ = try database.read(in: directory.path) } throws: {
      isError($0, .corruptFile, naming: file, saying: "move it (and its -wal and -shm files) aside")
    }
    #expect(try fileBytes(file) == damaged)
  }

  /// A database file that is missing or empty while its write-ahead log holds commits: SQLite
  /// would start a new database and then discard the log. Liaison refuses, so that the commits
  /// in the log can still be recovered.
  @Test(arguments: SQLiteDatabase.allCases, ["missing", "zero-length"])
  func aDatabaseGoneFromBesideItsLogIsRefusedAndTheLogKept(_ database: SQLiteDatabase, _ damage: String) throws {
    try makeFiles()
    let file = database.file.path(in: directory.path)
    if damage == "missing" { try FileManager.default.removeItem(atPath: file) } else { try truncateFile(file, to: 0) }
    let log = try fileBytes(database.log.path(in: directory.path))
    #expect(!log.isEmpty)
    #expect { _ = try database.read(in: directory.path) } throws: {
      isError($0, .corruptFile, naming: file, saying: "-wal")
    }
    #expect(try fileBytes(database.log.path(in: directory.path)) == log)
  }

  /// An empty database file with no log beside it is what a new database is for a moment; SQLite
  /// reads it as an empty database, and so does Liaison: the migrations run, and it is used.
  @Test(arguments: SQLiteDatabase.allCases)
  func aZeroLengthDatabaseWithoutALogIsANewDatabase(_ database: SQLiteDatabase) throws {
    try makeCheckpointedFiles()
    try truncateFile(database.file.path(in: directory.path), to: 0)
    #expect(try database.read(in: directory.path) == (database == .store ? nil : 0))
  }

  /// A write-ahead log that is garbage or empty holds no commit SQLite can check: SQLite ignores
  /// it, as after a crash, and the database reads as of its last checkpoint.
  @Test(arguments: SQLiteDatabase.allCases, ["garbage", "zero-length"])
  func aDamagedLogIsIgnoredAndTheCheckpointedDataKept(_ database: SQLiteDatabase, _ damage: String) throws {
    try makeCheckpointedFiles()
    let log = database.log.path(in: directory.path)
    try writeFile(log, damage == "garbage" ? garbage(count: 8192) : [])
    #expect(try database.read(in: directory.path) == database.written)
  }

  /// A log damaged after acknowledged writes, as a person or a program may leave it (removed,
  /// cut short, torn in its last commit, or overwritten): the store is refused as damaged, naming
  /// its log, and never read as older than what it acknowledged — the defaults and the mailbox
  /// alike, whose writes live in the log until it is checkpointed. (Before, SQLite ignored the
  /// log, and the store read as it was before those writes, with no error; the next write then
  /// overwrote the log.) The files are left as they are, for recovery.
  @Test(arguments: ["defaults", "mailboxes"], ["removed", "zero-length", "torn", "garbage"])
  func aLogDamagedAfterAcknowledgedWritesIsRefusedNeverReadAsOlder(_ store: String, _ damage: String) throws {
    let maker = try Peer(container: directory.path)
    try maker.send(.dset, "settings", "theme", "7")
    try maker.send(.msendid, "inbox", "a", "first")
    try maker.send(.dset, "settings", "theme", "8")
    try maker.send(.msendid, "inbox", "b", "second")
    maker.kill()
    let file = directory.path + "/.liaison/store/\(store).sqlite"
    let log = file + "-wal"
    switch damage {
    case "removed": try FileManager.default.removeItem(atPath: log)
    case "zero-length": try truncateFile(log, to: 0)
    case "torn": try tearLastCommit(log)
    default: try overwrite(log, with: garbage(count: try fileBytes(log).count))
    }
    let left = try? fileBytes(log)
    let container = try SharedContainer(directory: directory.path)
    #expect {
      if store == "defaults" {
        _ = try container.defaults("settings").get(DefaultsKey<Int>("theme"))
      } else {
        _ = try container.mailbox("inbox").peek()
      }
    } throws: {
      isError($0, .corruptFile, naming: log, saying: "lost commits it acknowledged")
    }
    // A removed log may come back empty (SQLite makes one to read the database); nothing else.
    #expect(((try? fileBytes(log)) ?? []) == (left ?? []), "the log is left as it was")
  }

  /// A log torn in its last commit after the machine started again: a power loss may take back
  /// the last commits (`synchronous = NORMAL`, as the store documents), so across a boot the store
  /// keeps every commit whose frames are whole, as SQLite reads it, and is used. (The commit
  /// record is made for this boot; here, one made for another boot is written over it.) A user's
  /// shared database, which keeps no record, always reads so.
  @Test(arguments: SQLiteDatabase.allCases)
  func aTornLogFromAnotherBootKeepsTheCommitsBeforeTheTear(_ database: SQLiteDatabase) throws {
    let maker = try Peer(container: directory.path)
    try maker.send(.dset, "settings", "theme", "7")
    try maker.send(.dset, "settings", "theme", "8")
    try maker.send(.dbopen, "journal", "1")
    try maker.send(.dbinsert, "journal", "4")
    maker.kill()
    let counters = StoreFile.counters.path(in: directory.path)
    var words = try fileBytes(counters)
    words[4096] ^= 0xFF  // the record's stamp: another boot
    try overwrite(counters, with: words)
    try tearLastCommit(database.log.path(in: directory.path))
    #expect(try database.read(in: directory.path) == database.written)
  }

  /// A store moved aside (its database, log and index), as the errors advise, starts anew:
  /// the record of the old one, left in the counters file, is not taken for this one's.
  @Test func aStoreMovedAsideStartsAnew() throws {
    try makeFiles()
    for file in [StoreFile.storeDatabase, .storeLog, .storeIndex] {
      try? FileManager.default.removeItem(atPath: file.path(in: directory.path))
    }
    #expect(try SQLiteDatabase.store.read(in: directory.path) == nil)
  }

  /// SQLite's shared-memory index (`-shm`) is rebuilt from the log by the first connection: a
  /// damaged one loses nothing.
  @Test(arguments: SQLiteDatabase.allCases, ["garbage", "truncated", "zero-length"])
  func aDamagedIndexIsRebuiltFromTheLog(_ database: SQLiteDatabase, _ damage: String) throws {
    try makeFiles()
    let index = database.index.path(in: directory.path)
    switch damage {
    case "garbage": try overwrite(index, with: garbage(count: try fileBytes(index).count))
    case "truncated": try truncateFile(index, to: 100)
    default: try truncateFile(index, to: 0)
    }
    #expect(try database.read(in: directory.path) == database.written)
  }

  /// The generation counters are only ever compared for change: garbage, a short file or an empty
  /// one costs a reload of the cache, never a stale or wrong value. A short file is grown back.
  @Test(arguments: ["garbage", "truncated", "zero-length"])
  func damagedCountersCostAReloadNeverAWrongValue(_ damage: String) throws {
    try makeFiles()
    let counters = StoreFile.counters.path(in: directory.path)
    switch damage {
    case "garbage": try overwrite(counters, with: garbage(count: 4096))
    case "truncated": try truncateFile(counters, to: 100)
    default: try truncateFile(counters, to: 0)
    }
    let defaults = try SharedContainer(directory: directory.path).defaults("settings")
    let theme = DefaultsKey<Int>("theme")
    #expect(try defaults.get(theme) == 7)
    try defaults.set(8, for: theme)
    #expect(try defaults.get(theme) == 8)
    let other = try Peer(container: directory.path)
    #expect(try other.send(.dget, "settings", "theme") == "8")
    try other.send(.dset, "settings", "theme", "9")
    #expect(try defaults.get(theme) == 9)
    #expect(try fileBytes(counters).count == 4096 + 16, "the slots and the commit record")
  }

  /// The one case that crashes, and why it is outside the threat model: the counters and SQLite's
  /// `-shm` are mapped into memory, and a file truncated under a mapping raises `SIGBUS` at the
  /// next access (the kernel's rule for every shared mapping). Only a process of the same user can
  /// truncate them (the folder is 0700, the files 0600), and such a process can as well delete
  /// the database. This test pins the behaviour that the "Hostile Files" article documents.
  @Test(arguments: [StoreFile.counters, .storeIndex])
  func aMappedFileTruncatedUnderARunningProcessKillsIt(_ file: StoreFile) throws {
    // Under a sanitizer, the victim's report of its SIGBUS is expected: it goes to the victim's
    // standard error, not to the folder where CI collects reports (any report there fails CI).
    let victim = try Peer(container: directory.path, environment: ["TSAN_OPTIONS": "", "ASAN_OPTIONS": ""])
    try victim.send(.dset, "settings", "theme", "7")
    try truncateFile(file.path(in: directory.path), to: 0)
    victim.start(.dset, "settings", "theme", "8")
    #expect(throws: PeerError.self) { try victim.child.readLine(timeout: 30) }
    let ending = victim.child.wait()
    if runsUnderASanitizer() {
      // Thread and Address Sanitizer catch the SIGBUS, report it, and exit with their own status.
      #expect(ending != .exited(0) && ending != .killed(by: SIGBUS))
    } else {
      #expect(ending == .killed(by: SIGBUS))
    }
  }

  /// Listing the defaults domains and the mailboxes (what `liaison status` does) checks the store
  /// files without opening them: a read transaction open in this process keeps its SQLite lock on
  /// the store file (a descriptor closed on that file would drop it).
  @Test(.enabled(if: readsProc, "reads /proc (Linux)")) func listingDomainsAndMailboxesKeepsAnOpenReadTransactionsLock()
    throws
  {
    let container = try SharedContainer(directory: directory.path)
    try container.defaults("settings").set(1, for: DefaultsKey<Int>("volume"))
    try container.mailbox("inbox").send("hello")
    for file in ["store/defaults.sqlite", "store/mailboxes.sqlite"] {
      let path = directory.path + "/.liaison/" + file
      let reader = try DatabaseQueue(path: path)
      try reader.inDatabase { db in
        try db.execute(sql: "BEGIN DEFERRED")
        _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master")  // the read takes its lock
        let held = try posixLocks(on: path)
        #expect(!held.isEmpty, "this process's locks: \((try? KernelLocks.lines(ofProcess: getpid())) ?? [])")
        #expect(try container.defaultsDomains().map(\.domain.rawValue) == ["settings"])
        #expect(try container.mailboxes().map(\.name.rawValue) == ["inbox"])
        #expect(try posixLocks(on: path) == held, "\(file)")
        try db.execute(sql: "COMMIT")
      }
    }
  }

  /// The store's and databases' signals are Liaison's doorbells; a damaged one is refused when the
  /// store or database is opened (as any signal is), naming the file to remove.
  @Test(arguments: [StoreFile.storeSignal, .databaseSignal])
  func aDamagedSignalIsACorruptFileErrorAtOpen(_ file: StoreFile) throws {
    try makeFiles()
    try overwrite(file.path(in: directory.path), with: garbage(count: 32))
    #expect { try use(file) } throws: {
      isError($0, .corruptFile, naming: file.path(in: directory.path), saying: "remove the file")
    }
  }

  @Test(arguments: [StoreFile.storeWriteLock, .databaseOpenLock])
  func garbageInALockFileIsIgnoredAndLeftAsItIs(_ file: StoreFile) throws {
    try makeFiles()
    try overwrite(file.path(in: directory.path), with: garbage(count: 100))
    #expect(try file.database.read(in: directory.path) == file.database.written)
    #expect(try fileBytes(file.path(in: directory.path)) == garbage(count: 100))
  }

  // MARK: Owners and modes

  @Test(.enabled(if: isRoot, "giving a file to another user needs root"), arguments: StoreFile.allCases)
  func aFileOfAnotherUserIsRefused(_ file: StoreFile) throws {
    try makeFiles()
    let path = file.path(in: directory.path)
    let before = try fileBytes(path)
    try changeOwner(path, to: anotherUserID)
    #expect { try use(file) } throws: {
      isError($0, .unsafeFile, naming: path, saying: "belongs to user \(anotherUserID)")
    }
    #expect(try fileBytes(path) == before)
  }

  @Test(.enabled(if: isRoot, "giving a folder to another user needs root"), arguments: storeFolders)
  func aFolderOfAnotherUserIsRefused(_ folder: String) throws {
    try makeFiles()
    let path = directory.path + "/.liaison/" + folder
    try changeOwner(path, to: anotherUserID)
    let file = StoreFile.allCases.first { $0.rawValue.hasPrefix(folder + "/") }!
    #expect { try use(file) } throws: { isError($0, .unsafeFile, naming: path) }
  }

  @Test(arguments: StoreFile.allCases)
  func looseModesOnAFileAreTightened(_ file: StoreFile) throws {
    try makeFiles()
    try setPermissions(file.path(in: directory.path), 0o666)
    let opened = try file.database.open(in: directory.path)  // SQLite removes the log and index at close
    #expect(try permissionBits(file.path(in: directory.path)) == 0o600)
    withExtendedLifetime(opened) {}
  }

  @Test(arguments: storeFolders)
  func looseModesOnAFolderAreTightened(_ folder: String) throws {
    try makeFiles()
    let path = directory.path + "/.liaison/" + folder
    try setPermissions(path, 0o777)
    try use(StoreFile.allCases.first { $0.rawValue.hasPrefix(folder + "/") }!)
    #expect(try permissionBits(path) == 0o700)
  }

  // MARK: Planted links

  @Test(arguments: StoreFile.allCases)
  func aSymbolicLinkInPlaceOfAFileIsRefusedAndItsTargetUntouched(_ file: StoreFile) throws {
    try makeFiles()
    let target = directory.path + "/precious"
    try writeFile(target, Array("precious".utf8))
    try plantSymbolicLink(at: file.path(in: directory.path), to: target)
    #expect { try use(file) } throws: { isError($0, .unsafeFile, naming: file.path(in: directory.path)) }
    #expect(try fileBytes(target) == Array("precious".utf8))
  }

  @Test(arguments: storeFolders)
  func aSymbolicLinkInPlaceOfAFolderIsRefusedAndItsTargetUntouched(_ folder: String) throws {
    try makeFiles()
    let elsewhere = TemporaryDirectory()
    let path = directory.path + "/.liaison/" + folder
    try plantSymbolicLink(at: path, to: elsewhere.path)
    #expect { try use(StoreFile.allCases.first { $0.rawValue.hasPrefix(folder + "/") }!) } throws: {
      isError($0, .unsafeFile, naming: path)
    }
    #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
  }

  @Test(arguments: StoreFile.allCases)
  func aHardLinkInPlaceOfAFileIsRefusedAndItsTargetUntouched(_ file: StoreFile) throws {
    try makeFiles()
    let target = directory.path + "/precious"
    try writeFile(target, Array("precious".utf8))
    try plantHardLink(at: file.path(in: directory.path), to: target)
    #expect { try use(file) } throws: {
      isError($0, .unsafeFile, naming: file.path(in: directory.path), saying: "hard links")
    }
    #expect(try fileBytes(target) == Array("precious".utf8))
  }

  /// `liaison status` lists shared databases without opening them through Liaison's pool: it
  /// checks their files all the same, and never opens SQLite on a planted link.
  @Test(arguments: [StoreFile.database, .databaseLog, .databaseIndex])
  func listingDatabasesRefusesAPlantedLinkAndLeavesItsTargetUntouched(_ file: StoreFile) throws {
    try makeFiles()
    let target = directory.path + "/precious"
    try writeFile(target, Array("precious".utf8))
    try plantSymbolicLink(at: file.path(in: directory.path), to: target)
    #expect { _ = try SharedContainer(directory: directory.path).sharedDatabases() } throws: {
      isError($0, .unsafeFile, naming: file.path(in: directory.path))
    }
    #expect(try fileBytes(target) == Array("precious".utf8))
  }

  /// Liaison checks SQLite's files without opening them: a descriptor opened and closed on a
  /// file drops every `fcntl` lock the process holds on it, and SQLite's locks on its `-shm` are
  /// such locks. Opening a database a second time in a process, or listing it, must leave them in
  /// place: the one every open connection holds for its life, shared, on the `-shm`'s byte 128
  /// (SQLite's "DMS" lock, which tells another process opening the database that the index is in
  /// use). The read marks beside it come and go with each read (a relay of a commit, say), and are
  /// not compared.
  @Test(.enabled(if: readsProc, "reads /proc (Linux)")) func checkingTheFilesOfAnOpenDatabaseKeepsSQLitesLocks() throws
  {
    let container = try SharedContainer(directory: directory.path)
    let journal = try container.database("journal", migrator: SQLiteDatabase.journalMigrator)
    try journal.pool.write { db in try db.execute(sql: "INSERT INTO item (name) VALUES ('x')") }
    let index = StoreFile.databaseIndex.path(in: directory.path)
    /// Whether this process holds the `-shm`'s byte 128 shared (POSIX locks of one process on
    /// touching ranges show as one range).
    func holdsTheDMSLock() throws -> Bool {
      try posixLocks(on: index).contains { lock in
        let fields = lock.split(separator: " ")  // MODE START END
        guard fields.count == 3, let start = Int(fields[1]), let end = Int(fields[2]) else { return false }
        return fields[0] == "READ" && start <= 128 && 128 <= end
      }
    }
    #expect(try holdsTheDMSLock(), "this process's locks: \((try? KernelLocks.lines(ofProcess: getpid())) ?? [])")
    let again = try container.database("journal", migrator: SQLiteDatabase.journalMigrator)
    #expect(try holdsTheDMSLock())
    #expect(try container.sharedDatabases().map(\.name.rawValue) == ["journal"])
    #expect(try holdsTheDMSLock())
    withExtendedLifetime((journal, again)) {}
  }

  // MARK: Read-only folders

  /// Run by the test peer as `nobody` (root ignores permission bits; see `UnprivilegedPeer`):
  /// what must be created in a read-only folder fails with an error naming it: `readOnly` for
  /// what Liaison makes, `system` for what SQLite does ("store, database there" is a store whose
  /// database exists but whose log SQLite must create).
  @Test(
    .enabled(if: UnprivilegedPeer.isAvailable, "needs root and setpriv"),
    arguments: storeFolders + ["store, database there"])
  func aReadOnlyFolderIsAClearError(_ folder: String) throws {
    let name = folder.hasPrefix("store,") ? "store" : folder
    let path = directory.path + "/.liaison/" + name
    if name == folder {
      _ = try SharedContainer(directory: directory.path)
      try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    } else {
      try makeCheckpointedFiles()
    }
    try changeOwnerRecursively(directory.path, to: anotherUserID)
    try setPermissions(path, 0o500)
    let peer = try UnprivilegedPeer(container: directory.path)
    #expect(peer.greeting.hasPrefix("ready"))
    let answer =
      name.hasPrefix("store") ? try peer.ask(.dset, "settings", "theme", "1") : try peer.ask(.dbopen, "journal", "1")
    #expect(answer.contains("'\(path)/"), "\(answer)")  // the file that could not be made
    if name == folder {
      // A file Liaison makes itself: the container is read-only for this process.
      #expect(answer.hasPrefix("error read-only: "), "\(answer)")
      #expect(answer.contains("read-only for this process"), "\(answer)")
    } else {
      // The log that SQLite makes beside a database that is there, as SQLite reports it.
      #expect(answer.hasPrefix("error system error: "), "\(answer)")
      #expect(answer.contains("permissions") || answer.contains("Check that this process may"), "\(answer)")
    }
  }

  // MARK: Missing folders and files

  /// A folder missing at open is made again. The store and databases folders hold the data: what
  /// was in them went with them, and a new, empty database is made. The signals' folders hold
  /// only doorbells.
  @Test(arguments: storeFolders)
  func aFolderMissingAtOpenIsMadeAgain(_ folder: String) throws {
    try makeFiles()
    try FileManager.default.removeItem(atPath: directory.path + "/.liaison/" + folder)
    let database: SQLiteDatabase = folder.hasPrefix("store") ? .store : .shared
    let holdsData = folder == "store" || folder == "databases"
    #expect(try database.read(in: directory.path) == (holdsData ? (database == .store ? nil : 0) : database.written))
    #expect(try permissionBits(directory.path + "/.liaison/" + folder) == 0o700)
  }

  /// Every file but the database itself and its log is made again when missing, and nothing is
  /// lost: the index is rebuilt from the log, the counters start again, locks and signals are
  /// fresh.
  @Test(arguments: [
    StoreFile.storeIndex, .counters, .storeWriteLock, .storeSignal, .databaseIndex, .databaseOpenLock,
    .databaseSignal,
  ])
  func aFileMissingAtOpenIsMadeAgainAndNothingIsLost(_ file: StoreFile) throws {
    try makeFiles()
    try FileManager.default.removeItem(atPath: file.path(in: directory.path))
    #expect(try file.database.read(in: directory.path) == file.database.written)
  }

  /// A database deleted (or replaced) while a process has it open: SQLite would go on writing
  /// into the deleted file, and every write would vanish with the last process. Liaison checks
  /// before each commit that the path still names the file it opened, and refuses the write.
  @Test(
    .enabled(if: readsProc, "reads /proc (Linux)"), arguments: SQLiteDatabase.allCases,
    ["the database file", "its folder", ".liaison", "replaced"])
  func aDatabaseDeletedWhileInUseRefusesWrites(_ database: SQLiteDatabase, _ deleted: String) throws {
    let container = try SharedContainer(directory: directory.path)
    let file = database.file.path(in: directory.path)
    let write: (Int) throws -> Void
    let read: () throws -> Int?
    if database == .store {
      let defaults = try container.defaults("settings")
      write = { try defaults.set($0, for: DefaultsKey<Int>("theme")) }
      read = { try defaults.get(DefaultsKey<Int>("theme")) }
    } else {
      let journal = try container.database("journal", migrator: SQLiteDatabase.journalMigrator)
      write = { value in
        try journal.pool.write { db in
          try db.execute(sql: "INSERT INTO item (id, name) VALUES (?, 'x')", arguments: [value])
        }
      }
      read = { try journal.pool.read { db in try Int.fetchOne(db, sql: "SELECT max(id) FROM item") } }
    }
    try write(1)
    switch deleted {
    case "the database file": try FileManager.default.removeItem(atPath: file)
    case "its folder": try FileManager.default.removeItem(atPath: (file as NSString).deletingLastPathComponent)
    case ".liaison": try FileManager.default.removeItem(atPath: directory.path + "/.liaison")
    default:
      try FileManager.default.moveItem(atPath: file, toPath: file + ".moved")
      try writeFile(file, [])
    }
    #expect { try write(2) } throws: { error in
      if deleted == "replaced" { return isError(error, .system, naming: file, saying: "was replaced by another file") }
      return isError(error, .system, naming: file, saying: "was deleted")
        && (error as? LiaisonError)?.errno?.rawValue == ENOENT
    }
    #expect(try read() == 1)
  }
}

/// Whether `error` is a `LiaisonError` with `code` whose path is `path`, and whose message names
/// `path` and says `phrase`.
func isError(_ error: any Error, _ code: LiaisonError.Code, naming path: String, saying phrase: String = "") -> Bool {
  guard let error = error as? LiaisonError else { return false }
  return error.code == code && error.path == path && error.message.contains(path)
    && (phrase.isEmpty || error.message.contains(phrase))
}

/// Cuts the write-ahead log at `path` 100 bytes before the end of its last commit, as a crash
/// in the middle of writing that commit leaves it. The last commit is the last frame that ends a
/// transaction (a database size in its header) with the log header's salts: a log that SQLite
/// started again from its beginning keeps older frames after it, with other salts.
private func tearLastCommit(_ path: String) throws {
  let log = try fileBytes(path)
  func word(_ offset: Int) -> UInt32 { log[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) } }
  let pageSize = Int(word(8))
  let frameSize = 24 + pageSize
  var end: Int?
  var frame = 32
  while frame + frameSize <= log.count {
    guard word(frame + 8) == word(16), word(frame + 12) == word(20) else { break }
    if word(frame + 4) != 0 { end = frame + frameSize }
    frame += frameSize
  }
  try truncateFile(path, to: try #require(end, "the log holds no commit") - 100)
}

/// Creates (or replaces) the file at `path` with `bytes`.
private func writeFile(_ path: String, _ bytes: [UInt8]) throws {
  try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// The `fcntl` (POSIX) locks this process holds on the file at `path`, as `/proc/locks` lists
/// them: "READ 128 128" for a shared lock on byte 128.
private func posixLocks(on path: String) throws -> [String] {
  var info = stat()
  guard stat(path, &info) == 0 else { throw PeerError("cannot stat \(path): errno \(errno)") }
  let file = ":\(info.st_ino) "
  return try KernelLocks.lines(ofProcess: getpid())
    .filter { $0.contains("POSIX") && $0.contains(file) }
    .map { line in
      let fields = line.split(separator: " ")  // … MODE PID DEVICE:INODE START END
      return "\(fields[fields.count - 5]) \(fields[fields.count - 2]) \(fields[fields.count - 1])"
    }
    .sorted()
}
