import Foundation
import GRDB
import Liaison

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The store's count of its own commits, kept in the database (each write adds one in its
/// transaction) and, once the commit is acknowledged, in the counters file beside it
/// (``GenerationCounters/commitRecord``): what an opening checks the database against, so that a
/// store whose write-ahead log was damaged, cut short or removed is refused as damaged instead of
/// read as older than what it acknowledged.
///
/// SQLite ignores a log it cannot check, or the part of it after a damaged frame, and the commits
/// there are gone. While a store is small, its database file may hold none of them: SQLite copies
/// the log into it at 1,000 pages, or when the last connection closes. Within one boot of the
/// machine the kernel keeps every write a process made, whatever happens to the process
/// (`synchronous = NORMAL`), so a database that counts fewer commits than the record has lost
/// some: it is damaged. A power loss or a kernel crash may take back the last commits, as the
/// store documents, and the record with them (or not: the two files reach the disk in no set
/// order), so the record is made anew at each boot. It also names the database by a random
/// identity that the database keeps, written into its file (not only its log) when made: a store
/// moved aside and begun anew is not taken for a damaged one.
///
/// A program of an earlier version neither counts nor records its commits: a record it leaves
/// behind is only ever lower than the count.
enum CommitRecord {
  /// The table of the count: one row, made at the first opening by a version that counts.
  static let create = """
    CREATE TABLE IF NOT EXISTS liaison_commits (
      id INTEGER PRIMARY KEY CHECK (id = 0), identity INTEGER NOT NULL, count INTEGER NOT NULL)
    """

  /// Sets the count, in a write's transaction (to one more than the record: see
  /// ``StoreDatabase``).
  static let increment = PreparedStatements.Query("UPDATE liaison_commits SET count = ?1 WHERE id = 0")

  /// Checks the count of the database at `sqlitePath` against `counters`' record, under the
  /// store's write lock (no write is under way), before the store's pool opens it: on a
  /// read-only connection, which writes nothing and never checkpoints, so that a refused store's
  /// files stay as they were for a recovery (a pool's writer would start a log it could not
  /// read anew, and its closing connection would checkpoint and cut it). A database this
  /// connection cannot read is left to the pool's opening, which says why.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/corruptFile`` when the database counts fewer commits
  ///   than were acknowledged in this boot.
  static func check(_ sqlitePath: String, counters: GenerationCounters, path: String) throws(LiaisonError) {
    guard let boot = bootIdentity else { return }
    // The record first: a writer records a commit only after making it, so a count read after
    // the record is never below it, even while writers go on (the store may be opened beside one).
    let record = counters.commitRecord
    var configuration = Configuration()
    configuration.readonly = true
    guard let connection = try? DatabaseQueue(path: sqlitePath, configuration: configuration) else { return }
    defer { try? connection.close() }
    guard let (identity, count) = (try? connection.read(stored)) ?? nil else { return }
    let counted = UInt64(clamping: count)
    if record.stamp == stamp(identity, boot), record.commits > counted {
      throw LiaisonError(
        .corruptFile,
        "The store '\(path)' has lost commits it acknowledged: it holds \(counted) of the \(record.commits) commits "
          + "made since the machine started. Its write-ahead log '\(path)-wal' was damaged, cut short or removed (a "
          + "crash of a process cannot do that). Liaison will not use it: stop every process that uses the container, "
          + "then restore the store from a backup, or move it (and its -wal and -shm files) aside to keep the data "
          + "for recovery; a new store is created on next use.",
        path: path + "-wal")
    }
  }

  /// Once ``check(_:counters:path:)`` passed and the migrations ran: under the store's write
  /// lock, makes the count if the database has none, and the record if it was made for another
  /// database or another boot. Returns whether writes are to keep the record (`false` where this
  /// boot cannot be told from another, or, opened beside a writer, where the record is not this
  /// database's of this boot: the next opening under the lock makes it); `nil` when the count is
  /// to be made and the lock is not held.
  static func begin(_ pool: DatabasePool, counters: GenerationCounters, holdingTheLock: Bool) throws -> Bool? {
    let found = try pool.read(stored)
    guard holdingTheLock else {
      guard let (identity, _) = found else { return nil }
      return bootIdentity.map { counters.commitRecord.stamp == stamp(identity, $0) } ?? false
    }
    let (identity, count) =
      try found
      ?? pool.writeWithoutTransaction { db -> (Int64, Int64) in
        let identity = Int64.random(in: .min ... .max)
        try db.execute(sql: create)
        try db.execute(sql: "INSERT INTO liaison_commits (id, identity, count) VALUES (0, ?, 0)", arguments: [identity])
        // Into the database file, with the migrations before it: the identity must outlive the
        // log. No reader of an earlier snapshot can be left (this runs under the store's write
        // lock, at the first opening); should one hold the checkpoint back, the next one copies it.
        try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)")
        return (identity, 0)
      }
    guard let boot = bootIdentity else { return false }
    let current = stamp(identity, boot)
    let counted = UInt64(clamping: count)
    let record = counters.commitRecord
    if record.stamp != current || record.commits < counted { counters.commitRecord = (current, counted) }
    return true
  }

  /// The database's identity and count, if it has them.
  private static func stored(_ db: Database) throws -> (identity: Int64, count: Int64)? {
    guard try db.tableExists("liaison_commits") else { return nil }
    return try Row.fetchOne(db, sql: "SELECT identity, count FROM liaison_commits WHERE id = 0").map { ($0[0], $0[1]) }
  }

  /// What a record is made for: the database `identity` in the boot `boot`.
  private static func stamp(_ identity: Int64, _ boot: UInt64) -> UInt64 { UInt64(bitPattern: identity) ^ boot }

  /// This boot of the machine, as a number; `nil` where it cannot be read (then nothing is
  /// recorded, and nothing refused).
  static let bootIdentity: UInt64? = {
    #if canImport(Darwin)
      // The time the machine started (`kern.boottime`); a change of the clock may move it, which
      // only makes a record anew.
      var started = timeval()
      var size = MemoryLayout<timeval>.size
      guard sysctlbyname("kern.boottime", &started, &size, nil, 0) == 0 else { return nil }
      return UInt64(bitPattern: Int64(started.tv_sec)) &* 1_000_000 &+ UInt64(truncatingIfNeeded: started.tv_usec)
    #else
      // A random id the kernel makes at each boot.
      guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8),
        !text.isEmpty
      else { return nil }
      return fnv1a(text.utf8)
    #endif
  }()
}
