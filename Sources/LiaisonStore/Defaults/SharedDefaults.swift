import Foundation
import GRDB
import Liaison

/// Typed settings and state shared by every process of a container, atomic across processes and
/// observable: the replacement for App Group `UserDefaults` and hand-made token files.
///
/// ```swift
/// let defaults = try container.defaults("settings")
/// let theme = DefaultsKey<String>("theme")
/// try defaults.set("dark", for: theme)
/// let current = try defaults.get(theme)                   // "dark", in every process at once
/// try defaults.update(DefaultsKey<Int>("launches")) { ($0 ?? 0) + 1 }   // atomic across processes
/// ```
///
/// Values are any `Codable` type, stored as JSON (or as raw bytes for `Data`), at most
/// ``maximumValueSize`` bytes each, in an SQLite database in the container's private folder.
///
/// **Reads** come from an in-process cache that is checked, at every `get`, against a counter
/// that every process maps and every write increments: a `get` that finds the cache current costs
/// a lock and a dictionary lookup, and a `get` after another process's `set` has returned always
/// sees the new value. **Writes** are serialised across processes by a process lock taken before
/// SQLite's `BEGIN IMMEDIATE`, so no caller ever sees `SQLITE_BUSY`; each write rings the domain's
/// signal, which feeds ``changes()`` and ``changes(of:)`` in every process.
public final class SharedDefaults: Sendable {
  /// The largest value, in bytes of its stored form.
  public static let maximumValueSize = StoredValue.maximumDefaultsValueSize

  /// How often SQLite's busy handler ran in this process (a wait inside SQLite for another
  /// connection): zero while only Liaison writes, which the tests check.
  package static var sqliteBusyWaits: Int { StoreDatabase.busyWaits.value }

  /// The domain's name.
  public let domain: LiaisonName
  let store: StoreDatabase
  let container: SharedContainer
  private let slot: Int
  /// The domain's signal; `nil` only in a container read-only for this process where no writer
  /// has opened the domain yet (it has no values, and no change to watch).
  private let signal: Signal?
  private let cache = Locked(Cache())
  /// The watch for writers that die between commit and ring, once the domain is observed.
  private let writerDeaths = Locked<EventRegistration?>(nil)

  private struct Cache {
    /// The counter value the entries are current for; `nil` when empty.
    var generation: UInt64?
    var entries: [String: Entry] = [:]
  }

  private struct Entry {
    let stored: StoredValue?
    /// The value decoded as some type, and that type: a read as the same type returns it
    /// without decoding or a dynamic cast.
    var decoded: (any AnyObject & Sendable)?
    var decodedType: ObjectIdentifier?
  }

  /// A decoded value, boxed so that the cache can hold values of any type.
  private final class Decoded<Value: Sendable>: Sendable {
    let value: Value?
    init(_ value: Value?) { self.value = value }
  }

  private enum Lookup {
    case miss
    case decoded(any AnyObject & Sendable)
    case stored(StoredValue?)
  }

  init(domain: LiaisonName, container: SharedContainer, store: StoreDatabase) throws(LiaisonError) {
    self.domain = domain
    self.container = container
    self.store = store
    slot = GenerationCounters.slot(for: domain.rawValue)
    signal = try store.signal(domain, in: .storeSignals, container: container)
  }

  // MARK: Reading

  /// The value of `key`, or `nil` if it has none.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/typeMismatch`` when the stored value cannot be read as
  ///   `Value`; ``/Liaison/LiaisonError/Code/corruptFile`` when the store is damaged.
  public func get<Value>(_ key: DefaultsKey<Value>) throws(LiaisonError) -> Value? {
    let generation = store.generations.load(slot)
    if generation & 1 == 1 {
      // A write is in flight (or its writer died in the middle): read past the cache.
      let stored = try fetch(key.name)
      return try stored.map { stored throws(LiaisonError) in
        try stored.decode(key, domain: domain, decoder: container.makeDecoder())
      }
    }
    let type = ObjectIdentifier(Value.self)
    let lookup = cache.withLock { cache -> Lookup in
      if cache.generation != generation {
        cache.generation = generation
        cache.entries.removeAll(keepingCapacity: true)
      }
      guard let entry = cache.entries[key.name.rawValue] else { return .miss }
      if entry.decodedType == type, let decoded = entry.decoded { return .decoded(decoded) }
      return .stored(entry.stored)
    }
    switch lookup {
    case .decoded(let box):
      return unsafeDowncast(box, to: Decoded<Value>.self).value
    case .stored(let stored):
      return try remember(stored, for: key, generation: generation)
    case .miss:
      return try remember(try fetch(key.name), for: key, generation: generation)
    }
  }

  /// The stored value of the key called `name`, read by one statement: it sees one snapshot of the
  /// store on its own, so it needs no read transaction.
  func fetch(_ name: LiaisonName) throws(LiaisonError) -> StoredValue? {
    try store.readOneStatement { db in
      try DefaultsStatements.fetch(db, store.statements, domain: domain, key: name, path: store.path)
    }
  }

  /// Decodes `stored` and keeps it in the cache, unless the cache has moved on meanwhile.
  private func remember<Value>(
    _ stored: StoredValue?, for key: DefaultsKey<Value>, generation: UInt64
  ) throws(LiaisonError) -> Value? {
    let value: Value? = try stored.map { stored throws(LiaisonError) in
      try stored.decode(key, domain: domain, decoder: container.makeDecoder())
    }
    cache.withLock { cache in
      guard cache.generation == generation else { return }
      cache.entries[key.name.rawValue] = Entry(
        stored: stored, decoded: Decoded(value), decodedType: ObjectIdentifier(Value.self))
    }
    return value
  }

  /// The names of every key that has a value, sorted.
  public func keys() throws(LiaisonError) -> [String] {
    try snapshot().keys.sorted()
  }

  /// Every value of the domain in its stored form, by key name.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/corruptFile`` when a row was not written by Liaison (another
  ///   program wrote the database).
  public func snapshot() throws(LiaisonError) -> [String: DefaultsRawValue] {
    var snapshot: [String: DefaultsRawValue] = [:]
    for (key, value) in try rowsReadOneByOne() { snapshot[key] = try value.get() }
    return snapshot
  }

  /// Every value of the domain by key, each row read on its own, so that a row another program
  /// wrote is reported by its key instead of hiding the others (`liaison defaults read`).
  package func rowsReadOneByOne() throws(LiaisonError) -> [(key: String, value: Result<DefaultsRawValue, LiaisonError>)]
  {
    let path = store.path
    return try store.read { db in
      let rows = try Row.fetchAll(
        db, sql: "SELECT key, kind, value FROM defaults_entry WHERE domain = ?", arguments: [domain.rawValue])
      return rows.map { row in
        do throws(LiaisonError) {
          let entry = try StoredValue.snapshotEntry(row, path: path)
          return (entry.key, .success(entry.value))
        } catch {
          let key = row[0] as DatabaseValue
          return (String.fromDatabaseValue(key) ?? "\(key)", .failure(error))
        }
      }
    }
  }

  // MARK: Writing
  //
  // Each write waits for other processes' writes through the store's process lock. Every write
  // has two forms of one signature: the blocking one waits at most `timeout` (for threads of
  // your own, or the main thread with a short timeout); the `async` one waits on a thread of its
  // own, never on one of the cooperative pool, so a process stopped while it writes (a debugger,
  // SIGSTOP) never freezes the caller's actor.

  /// Stores `value` for `key`. Once this returns, a `get` in any process returns it.
  ///
  /// - Parameters:
  ///   - value: the value to store.
  ///   - key: the key to store it for.
  ///   - timeout: how long to wait at most for another process's write; `nil` waits as long as
  ///     it takes.
  /// - Throws: ``/Liaison/LiaisonError/Code/tooLarge`` when the stored form exceeds
  ///   ``maximumValueSize``; ``/Liaison/LiaisonError/Code/timedOut`` when another process's write lasts
  ///   longer than `timeout` (nothing is written then).
  @available(*, noasync, message: "Use `try await set(_:for:timeout:)`, which does not block the cooperative pool.")
  public func set<Value>(_ value: Value, for key: DefaultsKey<Value>, timeout: Duration? = nil) throws(LiaisonError) {
    let stored = try StoredValue(value, key: key, domain: domain, encoder: container.makeEncoder())
    try write(timeout: timeout) { db in
      try DefaultsStatements.save(stored, db, store.statements, domain: domain, key: key.name)
    }
  }

  /// Stores `value` for `key`, waiting for other processes' writes without blocking the
  /// cooperative pool. Once this returns, a `get` in any process returns it.
  ///
  /// - Throws: what the blocking form throws, and ``/Liaison/LiaisonError/Code/cancelled`` when the task
  ///   is cancelled while waiting (nothing is written then).
  public func set<Value>(_ value: Value, for key: DefaultsKey<Value>, timeout: Duration? = nil)
    async throws(LiaisonError)
  {
    let stored = try StoredValue(value, key: key, domain: domain, encoder: container.makeEncoder())
    try await write(timeout: timeout) { db in
      try DefaultsStatements.save(stored, db, store.statements, domain: domain, key: key.name)
    }
  }

  /// Removes the value of `key`, if any.
  @available(*, noasync, message: "Use `try await remove(_:timeout:)`, which does not block the cooperative pool.")
  public func remove<Value>(_ key: DefaultsKey<Value>, timeout: Duration? = nil) throws(LiaisonError) {
    try remove(named: key.name, timeout: timeout)
  }

  /// Removes the value of `key`, if any, waiting without blocking the cooperative pool.
  public func remove<Value>(_ key: DefaultsKey<Value>, timeout: Duration? = nil) async throws(LiaisonError) {
    try await remove(named: key.name, timeout: timeout)
  }

  /// Removes the value of the key called `name`, whatever its type.
  @available(*, noasync, message: "Use `try await remove(named:timeout:)`, which does not block the cooperative pool.")
  public func remove(named name: LiaisonName, timeout: Duration? = nil) throws(LiaisonError) {
    try write(timeout: timeout) { db in try Self.delete(db, domain: domain, key: name) }
  }

  /// Removes the value of the key called `name`, whatever its type, waiting without blocking the
  /// cooperative pool.
  public func remove(named name: LiaisonName, timeout: Duration? = nil) async throws(LiaisonError) {
    try await write(timeout: timeout) { db in try Self.delete(db, domain: domain, key: name) }
  }

  /// Removes every value of the domain.
  @available(*, noasync, message: "Use `try await removeAll(timeout:)`, which does not block the cooperative pool.")
  public func removeAll(timeout: Duration? = nil) throws(LiaisonError) {
    try write(timeout: timeout) { db in try Self.deleteAll(db, domain: domain) }
  }

  /// Removes every value of the domain, waiting without blocking the cooperative pool.
  public func removeAll(timeout: Duration? = nil) async throws(LiaisonError) {
    try await write(timeout: timeout) { db in try Self.deleteAll(db, domain: domain) }
  }

  private static func delete(_ db: Database, domain: LiaisonName, key: LiaisonName) throws {
    try db.execute(
      sql: "DELETE FROM defaults_entry WHERE domain = ? AND key = ?", arguments: [domain.rawValue, key.rawValue])
  }

  private static func deleteAll(_ db: Database, domain: LiaisonName) throws {
    try db.execute(sql: "DELETE FROM defaults_entry WHERE domain = ?", arguments: [domain.rawValue])
  }

  /// Replaces the value of `key` with `transform(old)`, atomically across processes: no other
  /// process writes the domain between the read and the write. Returning `nil` removes the value.
  ///
  /// ```swift
  /// try await defaults.update(launches) { ($0 ?? 0) + 1 }
  /// ```
  ///
  /// - Returns: the new value.
  /// - Throws: what `transform` throws (nothing is written then), or a ``/Liaison/LiaisonError``
  ///   (``/Liaison/LiaisonError/Code/timedOut`` when another process's write lasts longer than `timeout`).
  @available(*, noasync, message: "Use `try await update(_:timeout:_:)`, which does not block the cooperative pool.")
  @discardableResult
  public func update<Value>(
    _ key: DefaultsKey<Value>, timeout: Duration? = nil, _ transform: (Value?) throws -> Value?
  ) throws -> Value? {
    try transaction(timeout: timeout) { transaction in try Self.apply(transform, to: key, in: transaction) }
  }

  /// Replaces the value of `key` with `transform(old)`, atomically across processes, waiting for
  /// other processes' writes without blocking the cooperative pool; `transform` runs once the
  /// store's lock is held, in the caller's isolation (`isolation`, which is the caller's: on the
  /// main actor in a view's code).
  @discardableResult
  public func update<Value>(
    _ key: DefaultsKey<Value>, timeout: Duration? = nil, isolation: isolated (any Actor)? = #isolation,
    _ transform: (Value?) throws -> Value?
  ) async throws -> Value? {
    try await transaction(timeout: timeout, isolation: isolation) { transaction in
      try Self.apply(transform, to: key, in: transaction)
    }
  }

  private static func apply<Value>(
    _ transform: (Value?) throws -> Value?, to key: DefaultsKey<Value>, in transaction: DefaultsTransaction
  ) throws -> Value? {
    let new = try transform(try transaction.get(key))
    if let new { try transaction.set(new, for: key) } else { try transaction.remove(key) }
    return new
  }

  /// Runs `body` as one transaction over the domain, atomically across processes: its reads see
  /// no other process's writes, and its writes are seen all together or not at all.
  ///
  /// Inside `body`, read and write through the transaction it is given. Starting another write
  /// of the store there (this domain's `set`, `update`, `transaction`, or another domain's) throws
  /// ``/Liaison/LiaisonError/Code/invalidArgument`` rather than waiting for itself; a plain `get` there
  /// sees the values from before the transaction.
  ///
  /// - Throws: what `body` throws (nothing is written then), or a ``/Liaison/LiaisonError``
  ///   (``/Liaison/LiaisonError/Code/timedOut`` when another process's write lasts longer than `timeout`).
  @available(*, noasync, message: "Use `try await transaction(timeout:_:)`, which does not block the cooperative pool.")
  public func transaction<Result>(
    timeout: Duration? = nil, _ body: (DefaultsTransaction) throws -> Result
  ) throws -> Result {
    // What `body` throws rolls the transaction back and reaches the caller as it was thrown.
    var failure: (any Error)?
    do {
      return try write(timeout: timeout) { db in try run(body, in: db, failure: &failure) }
    } catch {
      throw failure ?? error
    }
  }

  /// Runs `body` as one transaction over the domain, atomically across processes, waiting for
  /// other processes' writes without blocking the cooperative pool; `body` runs once the store's
  /// lock is held, in the caller's isolation (`isolation`).
  public func transaction<Result>(
    timeout: Duration? = nil, isolation: isolated (any Actor)? = #isolation,
    _ body: (DefaultsTransaction) throws -> Result
  ) async throws -> Result {
    var failure: (any Error)?
    do {
      return try await write(timeout: timeout, isolation: isolation) { db in try run(body, in: db, failure: &failure) }
    } catch {
      throw failure ?? error
    }
  }

  private func run<Result>(
    _ body: (DefaultsTransaction) throws -> Result, in db: Database, failure: inout (any Error)?
  ) throws -> Result {
    do {
      return try body(
        DefaultsTransaction(
          db: db, domain: domain, path: store.path, container: container, statements: store.statements))
    } catch {
      failure = error
      throw error
    }
  }

  /// Rings the domain's signal with its counter, after a commit and before the store's lock is
  /// released: at once, or, when ``/Liaison/SharedContainer/suspend()`` came between the write and
  /// its ring, at ``/Liaison/SharedContainer/resume()``.
  private func ringAfterCommit(waiting: Bool) -> Bool {
    if !waiting { StoreTestHooks.beforeRing.run() }  // once: the first attempt does not wait
    // No signal only in a read-only container, where no write commits.
    return signal?.ring(waiting: waiting, state: { [generations = store.generations, slot] in generations.load(slot) })
      ?? true
  }

  /// Writes, then tells every process: the counter has moved (twice, around the transaction)
  /// and the signal has rung before the store's lock is released, hence before this returns. A
  /// failed post only delays observers; `get` is exact without it.
  @available(*, noasync)
  func write<T>(timeout: Duration?, _ body: (Database) throws -> T) throws(LiaisonError) -> T {
    try store.write(slot: slot, timeout: timeout, ring: ringAfterCommit, body)
  }

  /// The `async` twin of ``write(timeout:_:)``.
  func write<T>(
    timeout: Duration?, isolation: isolated (any Actor)? = #isolation, _ body: (Database) throws -> T
  ) async throws(LiaisonError) -> T {
    try await store.write(slot: slot, timeout: timeout, ring: ringAfterCommit, isolation: isolation, body)
  }

  // MARK: Observing

  /// Every change of the domain, as the notifications of its signal (coalescing, like every
  /// ``/Liaison/Signal``): after each, `get` returns the new values.
  ///
  /// A writer killed between its commit and its ring wakes observers all the same. It rings before
  /// it releases the store's write lock, so its death is seen as the end of that hold: on Linux as
  /// the close of its descriptor on the write-lock file, on Apple platforms as that lock's release
  /// (`NOTE_FUNLOCK`). If the domain's counter then differs from the state its signal last rang
  /// with, this process rings for it.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/readOnly`` in a container read-only for this process
  ///   where no process that may write it has opened the domain yet: there is nothing to watch.
  public func changes() throws(LiaisonError) -> SignalNotifications {
    guard let signal else {
      let path = store.folder.path(of: domain.rawValue)
      throw LiaisonError(
        .readOnly,
        "The changes of the domain '\(domain)' cannot be watched: no process that may write the container has opened "
          + "it yet, and the container is read-only for this process, so its signal cannot be made. It has no values; "
          + "watch it once a writer has opened it.",
        path: path)
    }
    try watchWriterDeaths(signal)
    return try signal.notifications()
  }

  private func watchWriterDeaths(_ signal: Signal) throws(LiaisonError) {
    try writerDeaths.withLock { registration throws(LiaisonError) in
      guard registration == nil else { return }
      let (signal, generations, slot) = (signal, store.generations, slot)
      registration = try store.folder.watchWriterCloses(of: store.writeLockFile) {
        // On the event loop's queue, which never waits: a ring that would wait for another poster
        // is made from another queue. (Suspended, it is made at resume().)
        let generation = generations.load(slot)
        guard let state = try? signal.state, state != generation else { return }
        if !signal.ring(waiting: false, state: { generation }) {
          DispatchQueue.global().async { signal.ring { generation } }
        }
      }
    }
  }

  // MARK: Schema

  static let migrator: DatabaseMigrator = {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("defaults v1") { db in
      try db.execute(
        sql: """
          CREATE TABLE defaults_entry (
            domain TEXT NOT NULL,
            key TEXT NOT NULL,
            kind INTEGER NOT NULL,
            value BLOB NOT NULL,
            PRIMARY KEY (domain, key)
          ) WITHOUT ROWID
          """)
    }
    return migrator
  }()
}

/// The reads and writes of one ``SharedDefaults/transaction(timeout:isolation:_:)``.
public struct DefaultsTransaction {
  let db: Database
  let domain: LiaisonName
  let path: String
  /// Whose JSON coders the values are read and written with.
  let container: SharedContainer
  let statements: PreparedStatements

  /// The value of `key` as this transaction sees it.
  public func get<Value>(_ key: DefaultsKey<Value>) throws(LiaisonError) -> Value? {
    let db = try open()
    return try translating { try DefaultsStatements.fetch(db, statements, domain: domain, key: key.name, path: path) }?
      .decode(key, domain: domain, decoder: container.makeDecoder())
  }

  /// Stores `value` for `key` when the transaction commits.
  public func set<Value>(_ value: Value, for key: DefaultsKey<Value>) throws(LiaisonError) {
    let (stored, db) = (try StoredValue(value, key: key, domain: domain, encoder: container.makeEncoder()), try open())
    try translating { try DefaultsStatements.save(stored, db, statements, domain: domain, key: key.name) }
  }

  /// Removes the value of `key` when the transaction commits.
  public func remove<Value>(_ key: DefaultsKey<Value>) throws(LiaisonError) {
    let db = try open()
    try translating {
      try db.execute(
        sql: "DELETE FROM defaults_entry WHERE domain = ? AND key = ?",
        arguments: [domain.rawValue, key.name.rawValue])
    }
  }

  /// Runs `body`, turning a database error into a ``/Liaison/LiaisonError`` that names the store.
  private func translating<T>(_ body: () throws -> T) throws(LiaisonError) -> T {
    do {
      return try body()
    } catch let error as LiaisonError {
      throw error
    } catch {
      throw StoreDatabase.translate(error, path: path)
    }
  }

  /// The database, once checked that the transaction is still open: after some errors (an
  /// interruption, a full disk) SQLite rolls the whole transaction back by itself, and a statement
  /// run after that, if `body` caught the error and went on, would be committed on its own.
  fileprivate func open() throws(LiaisonError) -> Database {
    guard db.isInsideTransaction else {
      throw LiaisonError(
        .system,
        "SQLite rolled back the transaction on the store '\(path)' after an earlier error in it, so nothing of it "
          + "was written. Do not go on after an error inside a transaction: let it reach `transaction`, and try again.",
        path: path)
    }
    return db
  }
}

extension StoredValue {
  /// Reads a row of `SELECT key, kind, value` as ``SharedDefaults/snapshot()`` lists it, without
  /// trusting it.
  package static func snapshotEntry(_ row: Row, path: String) throws(LiaisonError) -> (
    key: String, value: DefaultsRawValue
  ) {
    guard let key = String.fromDatabaseValue(row[0] as DatabaseValue) else { throw foreignRow(path) }
    return (key, try StoredValue(row: row, kindColumn: 1, valueColumn: 2, path: path).raw)
  }
}

extension SharedContainer {
  /// The shared defaults domain called `domain`.
  ///
  /// The first domain a process opens opens the store, which waits (at most `timeout`) while
  /// another process writes or migrates it; the `async` twin waits without blocking a thread of
  /// the cooperative pool.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/invalidName`` when `domain` breaks the naming rule;
  ///   ``/Liaison/LiaisonError/Code/corruptFile`` when the store is damaged;
  ///   ``/Liaison/LiaisonError/Code/incompatibleSchema`` when a newer version of Liaison migrated it;
  ///   ``/Liaison/LiaisonError/Code/timedOut`` when another process holds the store longer than `timeout`.
  @available(*, noasync, message: "Use `try await defaults(_:timeout:)`, which does not block the cooperative pool.")
  public func defaults(_ domain: String, timeout: Duration? = nil) throws(LiaisonError) -> SharedDefaults {
    let domain = try LiaisonName(domain)
    let store = try StoreDatabase.shared(
      self, name: ContainerLayout.Store.defaults.rawValue, migrator: SharedDefaults.migrator, timeout: timeout)
    return try SharedDefaults(domain: domain, container: self, store: store)
  }

  /// The shared defaults domain called `domain`, waiting for another process's write or
  /// migration of the store without blocking a thread of the cooperative pool.
  public func defaults(_ domain: String) async throws(LiaisonError) -> SharedDefaults {
    try await defaults(domain, timeout: nil)
  }

  /// The shared defaults domain called `domain`, waiting at most `timeout` for another process's
  /// write or migration of the store, without blocking a thread of the cooperative pool.
  public func defaults(_ domain: String, timeout: Duration?) async throws(LiaisonError) -> SharedDefaults {
    let domain = try LiaisonName(domain)
    let store = try await StoreDatabase.shared(
      self, name: ContainerLayout.Store.defaults.rawValue, migrator: SharedDefaults.migrator, timeout: timeout)
    return try SharedDefaults(domain: domain, container: self, store: store)
  }
}

extension SharedDefaults {
  /// The stored form of the key called `name`, for tools that do not know its type; `nil` when
  /// it has no value.
  public func rawValue(for name: LiaisonName) throws(LiaisonError) -> DefaultsRawValue? {
    try fetch(name)?.raw
  }

  /// Stores JSON text for the key called `name`, for tools that do not know its type (the
  /// `liaison defaults write` command). Any JSON value is accepted, including a bare string or
  /// number.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when `json` is not valid JSON;
  ///   ``/Liaison/LiaisonError/Code/tooLarge`` over ``maximumValueSize``.
  @available(*, noasync, message: "Use `try await setJSON(_:for:timeout:)`, which does not block the cooperative pool.")
  public func setJSON(_ json: Data, for name: LiaisonName, timeout: Duration? = nil) throws(LiaisonError) {
    let stored = try StoredValue(checkedJSON: json, key: name, domain: domain)
    try write(timeout: timeout) { db in
      try DefaultsStatements.save(stored, db, store.statements, domain: domain, key: name)
    }
  }

  /// Stores JSON text for the key called `name`, waiting without blocking the cooperative pool.
  public func setJSON(_ json: Data, for name: LiaisonName, timeout: Duration? = nil) async throws(LiaisonError) {
    let stored = try StoredValue(checkedJSON: json, key: name, domain: domain)
    try await write(timeout: timeout) { db in
      try DefaultsStatements.save(stored, db, store.statements, domain: domain, key: name)
    }
  }

  /// Stores JSON text for the key called `name` only if its value is `expected` now, atomically
  /// across processes: the compare-and-set of tools that do not know the key's type (the
  /// `liaison defaults write --if-value` command), for which `update(_:timeout:_:)` is
  /// the typed form.
  ///
  /// ```swift
  /// // One more, unless another process wrote in between (then read again and retry):
  /// let stored = try defaults.rawValue(for: name)
  /// let written = try await defaults.setJSON(Data("8".utf8), for: name, replacing: stored)
  /// ```
  ///
  /// - Parameters:
  ///   - json: the value to store, as JSON text.
  ///   - name: the key's name.
  ///   - expected: the stored form the value must have, byte for byte; `nil` stores only if the
  ///     key has no value.
  ///   - timeout: how long to wait for another process's write, at most (`nil`: as long as it
  ///     takes).
  /// - Returns: `true` when it stored `json`; `false`, having written nothing, when the value
  ///   was not `expected`.
  /// - Throws: as `setJSON(_:for:timeout:)` does.
  @available(*, noasync, message: "Use `try await setJSON(_:for:replacing:timeout:)`, which does not block the pool.")
  public func setJSON(
    _ json: Data, for name: LiaisonName, replacing expected: DefaultsRawValue?, timeout: Duration? = nil
  ) throws(LiaisonError) -> Bool {
    let stored = try StoredValue(checkedJSON: json, key: name, domain: domain)
    return try Self.comparing {
      try transaction(timeout: timeout) { transaction in try transaction.replace(name, expected, with: stored) }
    }
  }

  /// Stores JSON text for the key called `name` only if its value is `expected` now, waiting
  /// without blocking the cooperative pool.
  public func setJSON(
    _ json: Data, for name: LiaisonName, replacing expected: DefaultsRawValue?, timeout: Duration? = nil
  ) async throws(LiaisonError) -> Bool {
    let stored = try StoredValue(checkedJSON: json, key: name, domain: domain)
    do {
      try await transaction(timeout: timeout) { transaction in try transaction.replace(name, expected, with: stored) }
      return true
    } catch is ValueDiffers {
      return false
    } catch {
      throw error as? LiaisonError ?? StoreDatabase.translate(error, path: store.path)
    }
  }

  /// Runs a compare-and-set: `true` once it wrote, `false` when ``ValueDiffers`` rolled it back.
  private static func comparing(_ body: () throws -> Void) throws(LiaisonError) -> Bool {
    do {
      try body()
      return true
    } catch is ValueDiffers {
      return false
    } catch let error as LiaisonError {
      throw error
    } catch {
      throw LiaisonError(.system, "The compare-and-set failed: \(error)", cause: error)
    }
  }
}

/// Thrown inside a compare-and-set whose value was not the one expected: it rolls the
/// transaction back, and the caller returns `false`.
private struct ValueDiffers: Error {}

extension DefaultsTransaction {
  /// Stores `stored` for `name` if its value is `expected` now; throws ``ValueDiffers`` if not.
  fileprivate func replace(_ name: LiaisonName, _ expected: DefaultsRawValue?, with stored: StoredValue) throws {
    let current = try DefaultsStatements.fetch(try open(), statements, domain: domain, key: name, path: path)
    guard current?.raw == expected else { throw ValueDiffers() }
    try DefaultsStatements.save(stored, try open(), statements, domain: domain, key: name)
  }
}

extension SharedContainer {
  /// Every defaults domain that has values, with how many keys each has, by name. Opens no store
  /// that does not exist yet.
  public func defaultsDomains() throws(LiaisonError) -> [(domain: LiaisonName, keyCount: Int)] {
    guard
      let store = try StoreDatabase.existing(
        self, name: ContainerLayout.Store.defaults.rawValue, migrator: SharedDefaults.migrator)
    else {
      return []
    }
    return try store.read { db in
      try Row.fetchAll(db, sql: "SELECT domain, count(*) AS n FROM defaults_entry GROUP BY domain ORDER BY domain")
        .compactMap { row in
          // Rows of another program's (a domain that is not text, or breaks the rule) are skipped.
          guard let text = String.fromDatabaseValue(row[0] as DatabaseValue), let name = LiaisonName(storedName: text),
            let count = Int.fromDatabaseValue(row[1] as DatabaseValue)
          else { return nil }
          return (name, count)
        }
    }
  }
}

extension LiaisonName {
  /// A name read back from the store; `nil` if it does not follow the rule (never written by
  /// Liaison).
  init?(storedName: String) {
    guard let name = try? LiaisonName(storedName) else { return nil }
    self = name
  }
}

extension SharedDefaults: ClockedPart {
  /// The container's clock.
  package var clock: LiaisonClock { container.clock }
}
