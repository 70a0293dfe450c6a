#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  /// Typed settings and state shared by processes on any number of hosts: the
  /// `SharedDefaults` of `LiaisonStore` on PostgreSQL, with the same keys, values, errors and
  /// meaning, in `async` form.
  ///
  /// ```swift
  /// let defaults = try await place.defaults("settings")
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
  /// connection listens. The cache is the container's, one per domain: every
  /// ``PostgresContainer/defaults(_:)`` of the same domain returns the same handle while one is
  /// in use, with one cache and one subscription. Precisely, a ``get(_:)`` returns:
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
  /// type last read); a miss is one round trip. ``set(_:for:timeout:)`` is one round trip and
  /// one commit (four with a timeout: a transaction); ``update(_:timeout:isolation:_:)`` is five
  /// round trips (a transaction), ``remove(_:timeout:)`` and ``removeAll(timeout:)`` four; a
  /// `timeout` adds one to a transaction. Writes of one domain are serialised by its
  /// generation's row lock; `timeout` bounds the wait for it (`nil`: as long as other
  /// processes' writes take), and when it passes the write throws
  /// ``/Liaison/LiaisonError/Code/timedOut`` having written nothing.
  public final class PostgresDefaults: Sendable, CoordinationDefaults {
    /// The largest value, in bytes of its stored form (1 MiB, as for `SharedDefaults`).
    public static let maximumValueSize = StoredValue.maximumDefaultsValueSize

    /// The domain's name.
    public let domain: LiaisonName
    let container: PostgresContainer
    let cache = DefaultsCache()
    let subscription = Locked<Subscription>(.none)

    enum Subscription: Sendable {
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
    public func get<Value>(_ key: DefaultsKey<Value>) async throws(LiaisonError) -> Value? {
      let type = ObjectIdentifier(Value.self)
      let epoch = await trustedEpoch()
      let (generation, stored): (UInt64, StoredValue?)
      if let epoch, let hit = cache.lookup(key.name.rawValue, epoch: epoch) {
        if hit.entry.decodedType == type, let decoded = hit.entry.decoded as? Decoded<Value> {
          return decoded.value
        }
        (generation, stored) = (hit.generation, hit.entry.stored)
      } else {
        (generation, stored) = try await read(key.name)
      }
      let value = try stored?.decode(key, domain: domain, decoder: container.makeDecoder())
      if let epoch {
        cache.remember(
          DefaultsCache.Entry(stored: stored, decoded: Decoded(value), decodedType: type), for: key.name.rawValue,
          generation: generation, epoch: epoch)
      }
      return value
    }

    /// A decoded value, boxed so that the cache can hold values of any type.
    final class Decoded<Value: Sendable>: Sendable {
      let value: Value?
      init(_ value: Value?) { self.value = value }
    }

    /// The stored form of the key called `name`, for tools that do not know its type; `nil`
    /// when it has no value.
    public func rawValue(for name: LiaisonName) async throws(LiaisonError) -> DefaultsRawValue? {
      let epoch = await trustedEpoch()
      if let epoch, let hit = cache.lookup(name.rawValue, epoch: epoch) { return hit.entry.stored?.raw }
      let (generation, stored) = try await read(name)
      if let epoch {
        cache.remember(DefaultsCache.Entry(stored: stored), for: name.rawValue, generation: generation, epoch: epoch)
      }
      return stored?.raw
    }

    /// The names of every key that has a value, sorted.
    public func keys() async throws(LiaisonError) -> [String] {
      try await snapshot().keys.sorted()
    }

    /// Every value of the domain in its stored form, by key name, read from the server.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/corruptFile`` when a row was not written by
    ///   Liaison (another program wrote the table).
    public func snapshot() async throws(LiaisonError) -> [String: DefaultsRawValue] {
      var snapshot: [String: DefaultsRawValue] = [:]
      for (key, value) in try await rowsReadOneByOne() { snapshot[key] = try value.get() }
      return snapshot
    }

    /// Every value of the domain by key, each row read on its own, so that a row another program
    /// wrote is reported by its key instead of hiding the others (`liaison defaults read`).
    package func rowsReadOneByOne() async throws(LiaisonError)
      -> [(key: String, value: Result<DefaultsRawValue, LiaisonError>)]
    {
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

    /// The domain's generation and the stored value of `name`, from one snapshot.
    func read(_ name: LiaisonName) async throws(LiaisonError) -> (generation: UInt64, stored: StoredValue?) {
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

    func generation(_ cell: PostgresCell) throws(LiaisonError) -> UInt64 {
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
    /// - Parameters:
    ///   - value: the value, encoded with the container's encoder.
    ///   - key: the key.
    ///   - timeout: how long to wait for the domain's other writes (a transaction in another
    ///     process) at most; `nil` waits as long as they take. A server that stops answering is
    ///     given up within the detection bound either way.
    /// - Throws: ``/Liaison/LiaisonError/Code/tooLarge`` when the stored form exceeds
    ///   ``maximumValueSize``; ``/Liaison/LiaisonError/Code/timedOut`` when `timeout` passes
    ///   (nothing is written); ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot
    ///   be reached (then the value may or may not have been stored if the connection ended
    ///   while the statement ran).
    public func set<Value>(_ value: Value, for key: DefaultsKey<Value>, timeout: Duration? = nil)
      async throws(LiaisonError)
    {
      try await write(
        key.name, try StoredValue(value, key: key, domain: domain, encoder: container.makeEncoder()), timeout: timeout)
    }

    /// Stores JSON text for the key called `name`, for tools that do not know its type (the
    /// `liaison defaults write` command). Any JSON value is accepted, including a bare string or
    /// number.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidArgument`` when `json` is not valid JSON;
    ///   ``/Liaison/LiaisonError/Code/tooLarge`` over ``maximumValueSize``; as
    ///   ``set(_:for:timeout:)``.
    public func setJSON(_ json: Data, for name: LiaisonName, timeout: Duration? = nil) async throws(LiaisonError) {
      try await write(name, try StoredValue(checkedJSON: json, key: name, domain: domain), timeout: timeout)
    }

    /// Stores JSON text for the key called `name` only if its value is `expected` now, atomically
    /// across processes and hosts: the compare-and-set of tools that do not know the key's type
    /// (the `liaison defaults write --if-value` command), for which
    /// ``update(_:timeout:isolation:_:)`` is the typed form. A transaction of its own (see
    /// ``transaction(timeout:isolation:_:)``).
    ///
    /// - Parameters:
    ///   - json: the value to store, as JSON text.
    ///   - name: the key's name.
    ///   - expected: the stored form the value must have, byte for byte; `nil` stores only if the
    ///     key has no value.
    ///   - timeout: as for ``set(_:for:timeout:)``.
    /// - Returns: `true` when it stored `json`; `false`, having written nothing, when the value
    ///   was not `expected`.
    /// - Throws: as ``setJSON(_:for:timeout:)``.
    public func setJSON(
      _ json: Data, for name: LiaisonName, replacing expected: DefaultsRawValue?, timeout: Duration? = nil
    ) async throws(LiaisonError) -> Bool {
      let stored = try StoredValue(checkedJSON: json, key: name, domain: domain)
      do {
        try await transaction(timeout: timeout) { transaction in
          guard try await transaction.storedValue(of: name)?.raw == expected else { throw ValueDiffers() }
          try await transaction.save(stored, for: name)
        }
        return true
      } catch is ValueDiffers {
        return false
      } catch {
        throw PostgresErrors.translate(error, doing: "write '\(name)' in the defaults domain '\(domain)'")
      }
    }

    /// Thrown inside a compare-and-set whose value was not the one expected: it rolls the
    /// transaction back, and the caller returns `false`.
    private struct ValueDiffers: Error {}

    /// Removes the value of `key`, if any: a transaction of its own (see
    /// ``transaction(timeout:isolation:_:)``).
    ///
    /// - Throws: as ``set(_:for:timeout:)``.
    public func remove<Value>(_ key: DefaultsKey<Value>, timeout: Duration? = nil) async throws(LiaisonError) {
      try await remove(named: key.name, timeout: timeout)
    }

    /// Removes the value of the key called `name`, whatever its type.
    ///
    /// - Throws: as ``set(_:for:timeout:)``.
    public func remove(named name: LiaisonName, timeout: Duration? = nil) async throws(LiaisonError) {
      try await PostgresErrors.typed(doing: "remove '\(name)' in the defaults domain '\(domain)'") {
        try await transaction(timeout: timeout) { transaction in try await transaction.remove(named: name) }
      }
    }

    /// Removes every value of the domain: a transaction of its own (see
    /// ``transaction(timeout:isolation:_:)``).
    ///
    /// - Throws: as ``set(_:for:timeout:)``.
    public func removeAll(timeout: Duration? = nil) async throws(LiaisonError) {
      try await PostgresErrors.typed(doing: "remove every value of the defaults domain '\(domain)'") {
        try await transaction(timeout: timeout) { transaction in try await transaction.removeAll() }
      }
    }

    /// Replaces the value of `key` with `transform(old)`, atomically across processes and hosts:
    /// no other write of the domain comes between the read and the write. Returning `nil`
    /// removes the value. `transform` runs in the caller's isolation (on the main actor, for a
    /// view's code).
    ///
    /// ```swift
    /// try await defaults.update(launches) { ($0 ?? 0) + 1 }
    /// ```
    ///
    /// - Returns: the new value.
    /// - Throws: what `transform` throws (nothing is written then), or a
    ///   ``/Liaison/LiaisonError`` (see ``transaction(timeout:isolation:_:)``).
    @discardableResult
    public func update<Value>(
      _ key: DefaultsKey<Value>, timeout: Duration? = nil, isolation: isolated (any Actor)? = #isolation,
      _ transform: (Value?) throws -> Value?
    ) async throws -> Value? {
      try await transaction(timeout: timeout) { transaction in
        let new = try transform(try await transaction.get(key))
        if let new { try await transaction.set(new, for: key) } else { try await transaction.remove(key) }
        return new
      }
    }

    /// Stores `stored` for `name` in one statement, then keeps it in the cache.
    private func write(_ name: LiaisonName, _ stored: StoredValue, timeout: Duration?) async throws(LiaisonError) {
      try checkOutsideTransaction()
      let epoch = await trustedEpoch()
      let rows = try await container.connector.write(
        try statement(setting: (name, stored)), doing: "write '\(name)' in the defaults domain '\(domain)'",
        timeout: timeout)
      cache.wrote(generation: try generation(rows), epoch: epoch, name: name.rawValue, stored: stored)
    }

    func generation(_ rows: [PostgresRow]) throws(LiaisonError) -> UInt64 {
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
    func statement(setting: (name: LiaisonName, stored: StoredValue)?) throws(LiaisonError) -> PostgresQuery {
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
        binds.append(ByteBuffer(bytes: stored.bytes))
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

  }

  extension PostgresContainer {
    /// The shared defaults domain called `domain` (see ``/Liaison/LiaisonName`` for the rule
    /// names follow): the container's one handle of the domain while one is in use, so that
    /// every caller shares its in-process cache and its subscription.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/invalidName`` when `domain` breaks the naming rule;
    ///   ``/Liaison/LiaisonError/Code/closed`` once the container is closed.
    public func defaults(_ domain: String) async throws(LiaisonError) -> PostgresDefaults {
      let name = try LiaisonName(domain)
      try connector.checkOpen()
      return defaultsHandles.withLock { domains in
        if let defaults = domains[name]?.defaults { return defaults }
        let defaults = PostgresDefaults(container: self, domain: name)
        domains[name] = WeakDefaults(defaults: defaults)
        return defaults
      }
    }

    /// Every defaults domain of the namespace that has values, with how many keys each has, by
    /// name. Rows whose domain breaks the naming rule (another program's) are left out.
    public func defaultsDomains() async throws(LiaisonError) -> [(domain: LiaisonName, keyCount: Int)] {
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
