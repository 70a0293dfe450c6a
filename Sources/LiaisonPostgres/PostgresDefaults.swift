#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  /// Typed settings and state shared by processes on any number of hosts: the
  /// `SharedDefaults` of `LiaisonStore` on PostgreSQL, with the same keys, values, errors and
  /// meaning, in `async` form.
  ///
  /// ```swift
  /// let defaults = try place.defaults("settings")
  /// let theme = DefaultsKey<String>("theme")
  /// try await defaults.set("dark", for: theme)
  /// let current = try await defaults.get(theme)            // "dark"
  /// try await defaults.update(DefaultsKey<Int>("launches")) { ($0 ?? 0) + 1 }   // atomic across hosts
  /// ```
  ///
  /// Values live in the table `liaison.defaults_entry` (JSON text, or raw bytes for `Data`, at
  /// most ``maximumValueSize`` bytes each). Every write of a domain adds one to the domain's
  /// **generation** (a row of `liaison.defaults_domain`) and sends a `NOTIFY` with it, in the
  /// same transaction: the notification is sent if and only if the write commits.
  ///
  /// ## What a `get` sees ("fresh")
  ///
  /// Reads come from an in-process cache, which this process trusts only while its listening
  /// connection listens. Precisely, a ``get(_:)`` returns:
  /// - after this process's own write has returned: that value or a later one, at once;
  /// - after another process's write has returned **and** this process has been notified of it
  ///   (its ``changes()`` delivered a generation no older than the write's): that value or a
  ///   later one;
  /// - while the listening connection is down or reconnecting: the committed value, read from the
  ///   server (no cache); after a reconnect, the cache is dropped and filled again.
  ///
  /// Between another process's commit and the arrival of its notification (usually well under a
  /// millisecond on a local network) a `get` may return the value from before it; if the
  /// listening connection dies without a word (a cut network), for up to about half the
  /// container's detection bound, until the connection is found dead.
  ///
  /// Costs: a cached `get` is a few uncontended locks and a dictionary lookup (the value is kept decoded as the
  /// type last read); a miss is one round trip. ``set(_:for:)`` is one round trip and one commit; ``update(_:_:)`` is five round trips
  /// (a transaction), ``remove(_:)`` and ``removeAll()`` four; writes of one domain are
  /// serialised by its generation's row lock.
  public final class PostgresDefaults: Sendable {
    /// The largest value, in bytes of its stored form (1 MiB, as for `SharedDefaults`).
    public static let maximumValueSize = StoredValue.maximumDefaultsValueSize

    /// The domain's name.
    public let domain: LiaisonName
    let container: PostgresContainer
    private let cache = DefaultsCache()
    private let subscription = Locked<Subscription>(.none)

    private enum Subscription {
      case none
      case subscribing
      case subscribed(Int)
    }

    init(container: PostgresContainer, domain: LiaisonName) {
      self.container = container
      self.domain = domain
    }

    deinit {
      if case .subscribed(let id) = subscription.withLock({ $0 }) { container.listener.unsubscribe(id) }
    }

    // MARK: Reading

    /// The value of `key`, or `nil` if it has none: from the cache when it can be trusted (see
    /// "What a `get` sees" above), otherwise from the server.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/typeMismatch`` when the stored value cannot be read
    ///   as `Value`; ``/Liaison/LiaisonError/Code/corruptFile`` for a row that Liaison did not
    ///   write; ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached.
    public func get<Value>(_ key: DefaultsKey<Value>) async throws -> Value? {
      let type = ObjectIdentifier(Value.self)
      let epoch = await trustedEpoch()
      let (generation, stored): (UInt64, StoredValue?)
      if let epoch, let hit = cache.lookup(key.name.rawValue, epoch: epoch) {
        if hit.entry.decodedType == type, let decoded = hit.entry.decoded {
          return unsafeDowncast(decoded, to: Decoded<Value>.self).value
        }
        (generation, stored) = (hit.generation, hit.entry.stored)
      } else {
        (generation, stored) = try await read(key.name)
      }
      let value = try stored?.decode(key, domain: domain)
      if let epoch {
        cache.remember(
          DefaultsCache.Entry(stored: stored, decoded: Decoded(value), decodedType: type), for: key.name.rawValue,
          generation: generation, epoch: epoch)
      }
      return value
    }

    /// A decoded value, boxed so that the cache can hold values of any type.
    private final class Decoded<Value>: @unchecked Sendable {
      let value: Value?
      init(_ value: Value?) { self.value = value }
    }

    /// The stored form of the key called `name`, for tools that do not know its type; `nil`
    /// when it has no value.
    public func rawValue(for name: LiaisonName) async throws -> DefaultsRawValue? {
      let epoch = await trustedEpoch()
      if let epoch, let hit = cache.lookup(name.rawValue, epoch: epoch) { return hit.entry.stored?.raw }
      let (generation, stored) = try await read(name)
      if let epoch {
        cache.remember(DefaultsCache.Entry(stored: stored), for: name.rawValue, generation: generation, epoch: epoch)
      }
      return stored?.raw
    }

    /// The names of every key that has a value, sorted.
    public func keys() async throws -> [String] {
      try await snapshot().keys.sorted()
    }

    /// Every value of the domain in its stored form, by key name, read from the server.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/corruptFile`` when a row was not written by
    ///   Liaison (another program wrote the table).
    public func snapshot() async throws -> [String: DefaultsRawValue] {
      var snapshot: [String: DefaultsRawValue] = [:]
      for (key, value) in try await rowsReadOneByOne() { snapshot[key] = try value.get() }
      return snapshot
    }

    /// Every value of the domain by key, each row read on its own, so that a row another program
    /// wrote is reported by its key instead of hiding the others (`liaison defaults read`).
    package func rowsReadOneByOne() async throws -> [(key: String, value: Result<DefaultsRawValue, LiaisonError>)] {
      let rows = try await container.query(
        """
        SELECT key, kind, value FROM liaison.defaults_entry
        WHERE namespace = \(container.namespace.rawValue) AND domain = \(domain.rawValue) ORDER BY key
        """, doing: "read the defaults domain '\(domain)'")
      return rows.map { row in
        let columns = row.makeRandomAccess()
        let key = (try? columns[0].decode(String.self)) ?? "?"
        do throws(LiaisonError) {
          return (key, .success(try stored(kind: columns[1], value: columns[2], key: key).raw))
        } catch {
          return (key, .failure(error))
        }
      }
    }

    /// The listener's epoch when the cache may be used: this domain's subscription is in effect
    /// and the connection listens. Subscribes on first use; `nil` (read from the server) while
    /// that fails or another caller subscribes.
    private func trustedEpoch() async -> UInt64? {
      let listener = container.listener
      let start = subscription.withLock { subscription -> Bool in
        guard case .none = subscription else { return false }
        subscription = .subscribing
        return true
      }
      if start {
        let cache = cache
        do {
          let id = try await listener.subscribe(kind: "d", namespace: container.namespace, name: domain) { event in
            if let event { cache.notified(event.posts) }
          }
          subscription.withLock { $0 = .subscribed(id) }
        } catch {
          subscription.withLock { $0 = .none }
          return nil
        }
      }
      guard case .subscribed = subscription.withLock({ $0 }) else { return nil }
      return listener.listeningEpoch
    }

    /// The domain's generation and the stored value of `name`, from one snapshot.
    private func read(_ name: LiaisonName) async throws -> (generation: UInt64, stored: StoredValue?) {
      let namespace = container.namespace.rawValue
      let rows = try await container.query(
        """
        SELECT coalesce(d.generation, 0), e.kind, e.value FROM (SELECT 1) AS one
        LEFT JOIN liaison.defaults_domain d ON d.namespace = \(namespace) AND d.domain = \(domain.rawValue)
        LEFT JOIN liaison.defaults_entry e
          ON e.namespace = \(namespace) AND e.domain = \(domain.rawValue) AND e.key = \(name.rawValue)
        """, doing: "read '\(name)' in the defaults domain '\(domain)'")
      guard let row = rows.first else { throw foreignRow(key: name.rawValue) }
      let columns = row.makeRandomAccess()
      let generation = try generation(columns[0])
      if columns[1].bytes == nil && columns[2].bytes == nil { return (generation, nil) }
      return (generation, try stored(kind: columns[1], value: columns[2], key: name.rawValue))
    }

    /// A stored value read back, without trusting it: a kind Liaison does not write, or a
    /// column of another type, is ``/Liaison/LiaisonError/Code/corruptFile``.
    func stored(kind: PostgresCell, value: PostgresCell, key: String) throws(LiaisonError) -> StoredValue {
      guard let raw = try? kind.decode(Int16.self), let kind = StoredValue.Kind(rawValue: Int(raw)),
        let bytes = try? value.decode(Data.self)
      else { throw foreignRow(key: key) }
      return StoredValue(kind: kind, bytes: bytes)
    }

    private func generation(_ cell: PostgresCell) throws(LiaisonError) -> UInt64 {
      guard let generation = try? cell.decode(Int64.self), generation >= 0 else {
        throw LiaisonError(
          .corruptFile,
          "The generation of the defaults domain '\(domain)' in the PostgreSQL namespace '\(container.namespace)' "
            + "was not written by Liaison. Delete its row from liaison.defaults_domain; the next write makes a new one."
        )
      }
      return UInt64(generation)
    }

    private func foreignRow(key: String) -> LiaisonError {
      LiaisonError(
        .corruptFile,
        "The value of '\(key)' in the defaults domain '\(domain)' of the PostgreSQL namespace "
          + "'\(container.namespace)' was not written by Liaison (its kind or bytes are not what Liaison stores). "
          + "Remove the key, or write it again.")
    }

    // MARK: Writing

    /// Stores `value` for `key`: one round trip, one commit, and a notification to every
    /// observer committed with it. Once this returns, a `get` in this process returns it, and one
    /// in another process does once that process is notified (see "What a `get` sees").
    ///
    /// Like every write, it waits for the domain's other writes (a transaction in another
    /// process) as long as they take; a server that stops answering is given up within the
    /// detection bound.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/tooLarge`` when the stored form exceeds
    ///   ``maximumValueSize``; ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot
    ///   be reached (then the value may or may not have been stored if the connection ended
    ///   while the statement ran).
    public func set<Value>(_ value: Value, for key: DefaultsKey<Value>) async throws {
      try await write(key.name, try StoredValue(value, key: key, domain: domain))
    }

    /// Stores JSON text for the key called `name`, for tools that do not know its type (the
    /// `liaison defaults write` command). Any JSON value is accepted, including a bare string or
    /// number.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when `json` is not valid JSON;
    ///   ``/Liaison/LiaisonError/Code/tooLarge`` over ``maximumValueSize``.
    public func setJSON(_ json: Data, for name: LiaisonName) async throws {
      try await write(name, try StoredValue(checkedJSON: json, key: name, domain: domain))
    }

    /// Stores JSON text for the key called `name` only if its value is `expected` now, atomically
    /// across processes and hosts: the compare-and-set of tools that do not know the key's type
    /// (the `liaison defaults write --if-value` command), for which ``update(_:_:)`` is the typed
    /// form. A transaction of its own (see ``transaction(_:)``).
    ///
    /// - Parameters:
    ///   - json: the value to store, as JSON text.
    ///   - name: the key's name.
    ///   - expected: the stored form the value must have, byte for byte; `nil` stores only if the
    ///     key has no value.
    /// - Returns: `true` when it stored `json`; `false`, having written nothing, when the value
    ///   was not `expected`.
    /// - Throws: as ``setJSON(_:for:)``.
    public func setJSON(_ json: Data, for name: LiaisonName, replacing expected: DefaultsRawValue?) async throws
      -> Bool
    {
      let stored = try StoredValue(checkedJSON: json, key: name, domain: domain)
      do {
        try await transaction { transaction in
          guard try await transaction.storedValue(of: name)?.raw == expected else { throw ValueDiffers() }
          try await transaction.save(stored, for: name)
        }
        return true
      } catch is ValueDiffers {
        return false
      }
    }

    /// Thrown inside a compare-and-set whose value was not the one expected: it rolls the
    /// transaction back, and the caller returns `false`.
    private struct ValueDiffers: Error {}

    /// Removes the value of `key`, if any: a transaction of its own (see ``transaction(_:)``).
    public func remove<Value>(_ key: DefaultsKey<Value>) async throws {
      try await remove(named: key.name)
    }

    /// Removes the value of the key called `name`, whatever its type.
    public func remove(named name: LiaisonName) async throws {
      try await transaction { transaction in try await transaction.remove(named: name) }
    }

    /// Removes every value of the domain: a transaction of its own (see ``transaction(_:)``).
    public func removeAll() async throws {
      try await transaction { transaction in try await transaction.removeAll() }
    }

    /// Replaces the value of `key` with `transform(old)`, atomically across processes and hosts:
    /// no other write of the domain comes between the read and the write. Returning `nil`
    /// removes the value.
    ///
    /// ```swift
    /// try await defaults.update(launches) { ($0 ?? 0) + 1 }
    /// ```
    ///
    /// - Returns: the new value.
    /// - Throws: what `transform` throws (nothing is written then), or a
    ///   ``/Liaison/LiaisonError`` (see ``transaction(_:)``).
    @discardableResult
    public func update<Value>(_ key: DefaultsKey<Value>, _ transform: (Value?) throws -> Value?) async throws
      -> Value?
    {
      try await transaction { transaction in
        let new = try transform(try await transaction.get(key))
        if let new { try await transaction.set(new, for: key) } else { try await transaction.remove(key) }
        return new
      }
    }

    /// Runs `body` as one transaction over the domain, atomically across processes and hosts: its
    /// reads see no other process's writes, and its writes are seen all together or not at all.
    ///
    /// The transaction holds the domain's write lock (the row lock of its generation) from its
    /// start until it ends: every other write of the domain, in any process, waits for it. Keep
    /// `body` short. Inside `body`, read and write through the transaction it is given; a write
    /// of this domain through ``PostgresDefaults`` there (`set`, `update`, `transaction`,
    /// `refresh`) would wait for itself, and throws ``/Liaison/LiaisonError/Code/invalidArgument``
    /// instead.
    ///
    /// - Throws: what `body` throws (nothing is written then);
    ///   ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached (if the
    ///   connection ended during the commit, the message says that the outcome is unknown).
    public func transaction<Result>(_ body: (PostgresDefaultsTransaction) async throws -> Result) async throws
      -> Result
    {
      try checkOutsideTransaction()
      let epoch = await trustedEpoch()
      let connector = container.connector
      let connection = try await connector.take()
      let what = "write the defaults domain '\(domain)'"
      let generation: UInt64
      do {
        _ = try await Connector.run(
          "BEGIN", on: connection, within: connector.timing.replyTimeout, logger: connector.quietLogger)
        // Waits for the domain's other writers as long as they take: no reply bound, since a
        // long transaction elsewhere is not an outage. A dead server or a cut network is noticed
        // by the connection's keepalives, within the detection bound.
        generation = try await self.generation(
          Connector.run(
            try statement(setting: nil), on: connection, within: nil, logger: connector.quietLogger))
      } catch {
        connector.close(connection)
        throw PostgresErrors.translate(error, doing: what)
      }
      let transaction = PostgresDefaultsTransaction(defaults: self, connection: connection)
      let result: Result
      do {
        result = try await Self.$openTransaction.withValue(transactionKey) { try await body(transaction) }
      } catch {
        await transaction.rollBack()
        throw error
      }
      if let failure = transaction.failure {
        await transaction.rollBack()
        throw failure
      }
      do {
        _ = try await Connector.run(
          "COMMIT", on: connection, within: connector.timing.replyTimeout, logger: connector.quietLogger)
      } catch {
        connector.close(connection)
        throw LiaisonError(
          .unavailable,
          "The connection to the server ended while the transaction on the defaults domain '\(domain)' committed: it "
            + "may or may not have been written. Read the values again once the server answers.", cause: error)
      }
      connector.giveBack(connection)
      cache.wrote(generation: generation, epoch: epoch)
      return result
    }

    /// Stores `stored` for `name` in one statement, then keeps it in the cache.
    private func write(_ name: LiaisonName, _ stored: StoredValue) async throws {
      try checkOutsideTransaction()
      let epoch = await trustedEpoch()
      let connector = container.connector
      let connection = try await connector.take()
      let rows: [PostgresRow]
      do {
        // Waits for the domain's other writers, with no reply bound (as in `transaction`).
        rows = try await Connector.run(
          try statement(setting: (name, stored)), on: connection, within: nil, logger: connector.quietLogger,
          committing: true)
      } catch {
        connector.close(connection)
        throw PostgresErrors.translate(error, doing: "write '\(name)' in the defaults domain '\(domain)'")
      }
      connector.giveBack(connection)
      cache.wrote(generation: try generation(rows), epoch: epoch, name: name.rawValue, stored: stored)
    }

    private func generation(_ rows: [PostgresRow]) throws -> UInt64 {
      guard let row = rows.first else {
        throw LiaisonError(.system, "The server returned no generation for the defaults domain '\(domain)'.")
      }
      return try generation(row.makeRandomAccess()[0])
    }

    /// The statement of a write: it adds one to the domain's generation (taking its row lock,
    /// which serialises the domain's writers, before it touches any value), stores `setting` if
    /// given, and queues the notification that the commit sends; it returns the new generation.
    /// Every value is a bound parameter: `$1` the namespace, `$2` the domain, `$3` the sender,
    /// then the key, kind and bytes.
    ///
    /// Only an upsert shares the statement: `ON CONFLICT DO UPDATE` acts on the latest row even
    /// when the statement's snapshot, taken before it waited for the row lock, does not see it. A
    /// `DELETE` there would miss a row that the writer it waited for inserted, so removals run in
    /// a transaction, after the lock (``transaction(_:)``).
    func statement(setting: (name: LiaisonName, stored: StoredValue)?) throws -> PostgresQuery {
      var binds = PostgresBindings()
      binds.append(container.namespace.rawValue)
      binds.append(domain.rawValue)
      binds.append(String(container.senderID, radix: 16))
      var sql = """
        WITH bumped AS (
          INSERT INTO liaison.defaults_domain AS d (namespace, domain, generation) VALUES ($1, $2, 1)
          ON CONFLICT (namespace, domain) DO UPDATE SET generation = d.generation + 1
          RETURNING generation)
        """
      // The upsert reads `bumped`, so that it runs after the generation's row is locked.
      if let (name, stored) = setting {
        binds.append(name.rawValue)
        binds.append(Int16(stored.kind.rawValue))
        try binds.append(stored.bytes, context: .default)
        sql += """
          ,
          written AS (
            INSERT INTO liaison.defaults_entry (namespace, domain, key, kind, value)
            SELECT $1, $2, $4, $5, $6 FROM bumped
            ON CONFLICT (namespace, domain, key) DO UPDATE SET kind = excluded.kind, value = excluded.value)
          """
      }
      sql += """

        SELECT generation, pg_notify('\(Schema.channel)', concat_ws(' ', 'd', $1::text, $2::text, generation, 0, $3::text))
        FROM bumped
        """
      return PostgresQuery(unsafeSQL: sql, binds: binds)
    }

    /// The domains with a transaction open in this task: a write of one of them would wait for
    /// itself.
    @TaskLocal static var openTransaction: Set<String> = []

    private var transactionKey: Set<String> {
      Self.openTransaction.union(["\(container.namespace)/\(domain)"])
    }

    private func checkOutsideTransaction() throws(LiaisonError) {
      guard Self.openTransaction.contains("\(container.namespace)/\(domain)") else { return }
      throw LiaisonError(
        .invalidArgument,
        "A write of the defaults domain '\(domain)' was started inside a transaction on the same domain, where it "
          + "would wait for that transaction forever. Write through the transaction's own `set` and `remove`.")
    }

    // MARK: Observing

    /// Every change of the domain, as notifications (coalescing, like every
    /// ``/Liaison/Signal``): after each write that commits, each sequence delivers at least one
    /// notification whose `state` (and `sequence`) is the domain's generation, no older than that
    /// write's. After one is delivered, `get` in this process returns the new values.
    ///
    /// The writes committed while the listening connection was down are delivered once it is
    /// back: the generation is read again, and delivered if it moved.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached.
    public func changes() async throws -> PostgresSignalNotifications {
      let (stream, continuation) = AsyncStream.makeStream(
        of: SignalNotification.self, bufferingPolicy: .bufferingNewest(1))
      let delivered = Locked<UInt64>(0)
      let (cache, domain, namespace, connector) = (cache, domain, container.namespace, container.connector)
      let deliver: @Sendable (UInt64) -> Void = { generation in
        // The cache first: whoever receives the notification and then reads must see the change.
        cache.notified(generation)
        let moved = delivered.withLock { last -> Bool in
          guard generation > last else { return false }
          last = generation
          return true
        }
        if moved { continuation.yield(SignalNotification(name: domain, state: generation, sequence: generation)) }
      }
      let id = try await container.listener.subscribe(kind: "d", namespace: namespace, name: domain) { event in
        guard let event else {
          // Reconnected: read the generation again, deliver if it moved. Should this read fail,
          // the listener's connection has most likely ended again, and the next reconnect reads.
          Task {
            if let generation = try? await Self.generation(of: domain, in: namespace, through: connector) {
              deliver(generation)
            }
          }
          return
        }
        deliver(event.posts)
      }
      // Writes committed before the subscription took effect are not this sequence's.
      let baseline = try await Self.generation(of: domain, in: namespace, through: connector)
      delivered.withLock { $0 = max($0, baseline) }
      let listener = container.listener
      continuation.onTermination = { _ in listener.unsubscribe(id) }
      return PostgresSignalNotifications(stream: stream)
    }

    /// The generation of `domain`, read from the server (0 before its first write).
    static func generation(of domain: LiaisonName, in namespace: LiaisonName, through connector: Connector)
      async throws -> UInt64
    {
      let rows = try await connector.query(
        """
        SELECT generation FROM liaison.defaults_domain
        WHERE namespace = \(namespace.rawValue) AND domain = \(domain.rawValue)
        """, doing: "read the generation of the defaults domain '\(domain)'")
      guard let row = rows.first else { return 0 }
      return UInt64(clamping: max(0, try row.decode(Int64.self)))
    }

    /// The value of `key` now, then each new value (`nil` when removed), as an `AsyncSequence`.
    ///
    /// Changes in quick succession may coalesce into the latest; consecutive elements differ.
    /// Ending the iteration ends the watch. Iteration throws when the value cannot be read (a
    /// value of another type, a server that cannot be reached):
    ///
    /// ```swift
    /// for try await theme in try await defaults.changes(of: DefaultsKey<String>("theme")) { apply(theme) }
    /// ```
    public func changes<Value: Equatable>(of key: DefaultsKey<Value>) async throws
      -> PostgresDefaultsValueChanges<Value>
    {
      PostgresDefaultsValueChanges(defaults: self, key: key, notifications: try await changes())
    }

    // MARK: Refreshing

    /// Returns the value of `key` if it is fresh; otherwise refreshes it **once across the
    /// fleet** and returns the new value: the token that many processes on many hosts find
    /// expired at the same moment.
    ///
    /// ```swift
    /// let token = try await defaults.refresh(
    ///   .token, isFresh: { !$0.isExpired }, using: { try await api.refreshToken() })
    /// ```
    ///
    /// The callers that find the value stale take the key's refresh lock (a ``PostgresLock`` in
    /// the same namespace) in turn. The first runs `fetch` and stores its result; each one after
    /// it reads the value again from the server under the lock, finds it fresh, and returns it
    /// without calling `fetch`. The new value is stored **in the lock's own session**, so it is
    /// stored only while the lock is held: a refresher that lost its lock (its connection ended,
    /// its host was cut off) cannot overwrite a later refresher's value. If the refreshing process
    /// dies, the server ends its session and the next waiter refreshes at once; if its host is
    /// cut off, within the container's detection bound.
    ///
    /// - Parameters:
    ///   - key: the key whose value is refreshed.
    ///   - timeout: how long to wait for another process's refresh at most; `nil` waits as long
    ///     as it takes.
    ///   - isFresh: whether a stored value can be used as it is.
    ///   - fetch: makes a new value; runs at most once per refresh, in one process.
    /// - Throws: ``/Liaison/LiaisonError/Code/timedOut`` when the timeout passes while another
    ///   process refreshes; ``/Liaison/LiaisonError/Code/lost`` when the refresh lock was lost
    ///   before the value was stored (nothing is stored then); `CancellationError` when the task
    ///   is cancelled while waiting; what `fetch` throws (nothing is stored then, and the next
    ///   caller tries again).
    public func refresh<Value>(
      _ key: DefaultsKey<Value>, timeout: Duration? = nil, isFresh: (Value) -> Bool,
      using fetch: () async throws -> Value
    ) async throws -> Value {
      if let current = try await get(key), isFresh(current) { return current }
      try checkOutsideTransaction()
      let held = try await refreshLock(for: key).lock(.exclusive, timeout: timeout)
      do {
        // Another process may have refreshed while this one waited: its store committed before
        // it let the lock go, but its notification may not have reached this process yet, so
        // read from the server.
        if let current = try await read(key.name).stored?.decode(key, domain: domain), isFresh(current) {
          await held.unlock()
          return current
        }
        let value = try await fetch()
        let stored = try StoredValue(value, key: key, domain: domain)
        let epoch = await trustedEpoch()
        let rows = try await held.run(
          try statement(setting: (key.name, stored)),
          doing: "store the refreshed value of '\(key.name)' in '\(domain)'",
          committing: true)
        cache.wrote(generation: try generation(rows), epoch: epoch, name: key.name.rawValue, stored: stored)
        await held.unlock()
        return value
      } catch {
        await held.unlock()
        throw error
      }
    }

    /// The lock of refreshes of `key` in this domain. Its name is a hash of the domain and key
    /// (both may be 128 characters long); two keys that share a hash only refresh one at a time.
    private func refreshLock<Value>(for key: DefaultsKey<Value>) throws(LiaisonError) -> PostgresLock {
      let hash = fnv1a(Array(domain.rawValue.utf8) + [0] + Array(key.name.rawValue.utf8))
      return try container.lock("defaults.refresh." + String(hash, radix: 16))
    }
  }

  /// The reads and writes of one ``PostgresDefaults/transaction(_:)``, on its connection.
  public struct PostgresDefaultsTransaction: Sendable {
    let defaults: PostgresDefaults
    let connection: PostgresConnection
    /// The first error of a statement: PostgreSQL refuses every later statement of the
    /// transaction, which is then rolled back whatever `body` does.
    private let failed = Locked<LiaisonError?>(nil)

    init(defaults: PostgresDefaults, connection: PostgresConnection) {
      self.defaults = defaults
      self.connection = connection
    }

    var failure: LiaisonError? { failed.withLock { $0 } }

    /// The value of `key` as this transaction sees it.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/typeMismatch`` when the stored value cannot be read
    ///   as `Value`; ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached.
    public func get<Value>(_ key: DefaultsKey<Value>) async throws -> Value? {
      try await storedValue(of: key.name)?.decode(key, domain: defaults.domain)
    }

    /// The stored form of the key called `name` as this transaction sees it; `nil` when it has
    /// no value.
    func storedValue(of name: LiaisonName) async throws -> StoredValue? {
      let namespace = defaults.container.namespace.rawValue
      let rows = try await run(
        """
        SELECT kind, value FROM liaison.defaults_entry
        WHERE namespace = \(namespace) AND domain = \(defaults.domain.rawValue) AND key = \(name.rawValue)
        """, doing: "read '\(name)' in the defaults domain '\(defaults.domain)'")
      guard let row = rows.first else { return nil }
      let columns = row.makeRandomAccess()
      return try defaults.stored(kind: columns[0], value: columns[1], key: name.rawValue)
    }

    /// Stores `value` for `key` when the transaction commits.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/tooLarge`` when the stored form exceeds
    ///   ``PostgresDefaults/maximumValueSize``.
    public func set<Value>(_ value: Value, for key: DefaultsKey<Value>) async throws {
      try await save(try StoredValue(value, key: key, domain: defaults.domain), for: key.name)
    }

    /// Stores `stored` for the key called `name` when the transaction commits.
    func save(_ stored: StoredValue, for name: LiaisonName) async throws {
      let namespace = defaults.container.namespace.rawValue
      _ = try await run(
        try """
        INSERT INTO liaison.defaults_entry (namespace, domain, key, kind, value)
        VALUES (\(namespace), \(defaults.domain.rawValue), \(name.rawValue), \(Int16(stored.kind.rawValue)), \
        \(stored.bytes))
        ON CONFLICT (namespace, domain, key) DO UPDATE SET kind = excluded.kind, value = excluded.value
        """, doing: "write '\(name)' in the defaults domain '\(defaults.domain)'")
    }

    /// Removes the value of `key` when the transaction commits.
    public func remove<Value>(_ key: DefaultsKey<Value>) async throws {
      try await remove(named: key.name)
    }

    func remove(named name: LiaisonName) async throws {
      let namespace = defaults.container.namespace.rawValue
      _ = try await run(
        """
        DELETE FROM liaison.defaults_entry
        WHERE namespace = \(namespace) AND domain = \(defaults.domain.rawValue) AND key = \(name.rawValue)
        """, doing: "remove '\(name)' in the defaults domain '\(defaults.domain)'")
    }

    func removeAll() async throws {
      let namespace = defaults.container.namespace.rawValue
      _ = try await run(
        """
        DELETE FROM liaison.defaults_entry WHERE namespace = \(namespace) AND domain = \(defaults.domain.rawValue)
        """, doing: "remove every value of the defaults domain '\(defaults.domain)'")
    }

    private func run(_ query: PostgresQuery, doing what: String) async throws -> [PostgresRow] {
      if let failure { throw failure }
      let connector = defaults.container.connector
      do {
        return try await Connector.run(
          query, on: connection, within: connector.timing.replyTimeout, logger: connector.quietLogger)
      } catch {
        let translated = PostgresErrors.translate(error, doing: what)
        failed.withLock {
          if $0 == nil {
            $0 =
              translated as? LiaisonError
              ?? LiaisonError(.system, "Could not \(what): \(translated).", cause: translated)
          }
        }
        throw translated
      }
    }

    /// Rolls back and keeps the connection for reuse; closes it when that fails (which rolls
    /// back on the server).
    func rollBack() async {
      let connector = defaults.container.connector
      do {
        _ = try await Connector.run(
          "ROLLBACK", on: connection, within: connector.timing.replyTimeout, logger: connector.quietLogger)
        connector.giveBack(connection)
      } catch {
        connector.close(connection)
      }
    }
  }

  /// The values of one key over time: see ``PostgresDefaults/changes(of:)``.
  public struct PostgresDefaultsValueChanges<Value: Codable & Sendable & Equatable>: AsyncSequence, Sendable {
    /// The value, or `nil` when the key has none.
    public typealias Element = Value?

    let defaults: PostgresDefaults
    let key: DefaultsKey<Value>
    let notifications: PostgresSignalNotifications

    /// An iterator over the values.
    public func makeAsyncIterator() -> AsyncIterator {
      AsyncIterator(defaults: defaults, key: key, notifications: notifications.makeAsyncIterator())
    }

    /// The iterator of a ``PostgresDefaultsValueChanges``.
    public struct AsyncIterator: AsyncIteratorProtocol {
      let defaults: PostgresDefaults
      let key: DefaultsKey<Value>
      var notifications: AsyncStream<SignalNotification>.Iterator
      var last: Value??

      /// The next different value; `nil` (the end) when the iteration is cancelled.
      ///
      /// - Throws: the ``/Liaison/LiaisonError`` of a value that cannot be read (a value of
      ///   another type, a server that cannot be reached).
      public mutating func next() async throws -> Value?? {
        while true {
          if last != nil {
            guard await notifications.next() != nil else { return nil }
          }
          let value = try await defaults.get(key)
          if last == nil || last! != value {
            last = .some(value)
            return .some(value)
          }
        }
      }
    }
  }

  /// The in-process cache of a ``PostgresDefaults``: stored values by key, current for one
  /// generation of the domain, filled while one stretch of listening lasts (an epoch of the
  /// container's listener).
  final class DefaultsCache: Sendable {
    private struct State {
      /// The listener's epoch the entries were filled in.
      var epoch: UInt64?
      /// The generation the entries are current for; `nil` when not known.
      var generation: UInt64?
      var entries: [String: Entry] = [:]

      mutating func advance(to generation: UInt64) {
        if let current = self.generation, generation <= current { return }
        self.generation = generation
        entries.removeAll(keepingCapacity: true)
      }
    }

    /// A cached value: its stored form (`nil` when the key has none), and the value decoded as
    /// the type a `get` last read it as, so that the next `get` as that type does not decode.
    struct Entry {
      let stored: StoredValue?
      var decoded: AnyObject?
      var decodedType: ObjectIdentifier?
    }

    /// What a lookup found: the entry, and the generation it is current for.
    struct Hit {
      let entry: Entry
      let generation: UInt64
    }

    private let state = Locked(State())

    /// The entry of `key`, if cached. A new epoch empties the cache: notifications may have been
    /// missed since the last.
    func lookup(_ key: String, epoch: UInt64) -> Hit? {
      state.withLock { state in
        if state.epoch != epoch {
          state = State(epoch: epoch)
          return nil
        }
        guard let generation = state.generation, let entry = state.entries[key] else { return nil }
        return Hit(entry: entry, generation: generation)
      }
    }

    /// A notification (or a read) of `generation`: a later generation empties the cache.
    func notified(_ generation: UInt64) {
      state.withLock { $0.advance(to: generation) }
    }

    /// Keeps `entry`, read at `generation` in `epoch`, unless the cache has moved on.
    func remember(_ entry: Entry, for key: String, generation: UInt64, epoch: UInt64) {
      state.withLock { state in
        guard state.epoch == epoch else { return }
        state.advance(to: generation)
        if state.generation == generation { state.entries[key] = entry }
      }
    }

    /// This process's own write, which made `generation`; for a `set`, the value it stored.
    /// `epoch` is the listener's when the write began: if it changed, another process's write
    /// may have been missed, and nothing is kept.
    func wrote(generation: UInt64, epoch: UInt64?, name: String? = nil, stored: StoredValue? = nil) {
      state.withLock { state in
        guard let epoch, state.epoch == epoch else { return }
        state.advance(to: generation)
        if state.generation == generation, let name { state.entries[name] = Entry(stored: stored) }
      }
    }
  }

  extension PostgresContainer {
    /// The shared defaults domain called `domain` (see ``/Liaison/LiaisonName`` for the rule
    /// names follow).
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidName`` when `domain` breaks the naming rule.
    public func defaults(_ domain: String) throws(LiaisonError) -> PostgresDefaults {
      PostgresDefaults(container: self, domain: try LiaisonName(domain))
    }

    /// Every defaults domain of the namespace that has values, with how many keys each has, by
    /// name. Rows whose domain breaks the naming rule (another program's) are left out.
    public func defaultsDomains() async throws -> [(domain: LiaisonName, keyCount: Int)] {
      let rows = try await query(
        """
        SELECT domain, count(*) FROM liaison.defaults_entry WHERE namespace = \(namespace.rawValue)
        GROUP BY domain ORDER BY domain
        """, doing: "list the defaults domains")
      return rows.compactMap { row in
        guard let (text, count) = try? row.decode((String, Int64).self, context: .default),
          let name = try? LiaisonName(text)
        else {
          return nil
        }
        return (name, Int(count))
      }
    }
  }
#endif
