#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  extension PostgresDefaults {
    /// Runs `body` as one transaction over the domain, atomically across processes and hosts: its
    /// reads see no other process's writes, and its writes are seen all together or not at all.
    ///
    /// The transaction holds the domain's write lock (the row lock of its generation) from its
    /// start until it ends: every other write of the domain, in any process, waits for it. Keep
    /// `body` short. Inside `body`, read and write through the transaction it is given; a write
    /// of this domain through ``PostgresDefaults`` there (`set`, `update`, `transaction`,
    /// `refresh`) would wait for itself, and throws ``/Liaison/LiaisonError/Code/invalidArgument``
    /// instead. `body` runs in the caller's isolation.
    ///
    /// - Parameters:
    ///   - timeout: how long to wait for the domain's other writes (a transaction in another
    ///     process) before this one starts, at most; `nil` waits as long as they take.
    ///   - isolation: where `body` runs: the caller's isolation, by default.
    ///   - body: the reads and writes, through the transaction it is given.
    /// - Throws: what `body` throws (nothing is written then);
    ///   ``/Liaison/LiaisonError/Code/timedOut`` when `timeout` passes first (nothing is
    ///   written); ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached
    ///   (if the connection ended during the commit, the message says that the outcome is
    ///   unknown).
    public func transaction<Result>(
      timeout: Duration? = nil, isolation: isolated (any Actor)? = #isolation,
      _ body: (PostgresDefaultsTransaction) async throws -> Result
    ) async throws -> Result {
      try checkOutsideTransaction()
      let epoch = await trustedEpoch()
      let connector = container.connector
      let connection = try await connector.take()
      let what = "write the defaults domain '\(domain)'"
      let generation: UInt64
      do {
        try await Connector.begin(
          on: connection, lockTimeout: timeout, within: connector.timing.replyTimeout, logger: connector.quietLogger)
        // Waits for the domain's other writers (as long as they take, or `timeout`): no reply
        // bound, since a long transaction elsewhere is not an outage. A dead server or a cut
        // network is noticed by the connection's keepalives, within the detection bound.
        generation = try await self.generation(
          Connector.run(
            try statement(setting: nil), on: connection, within: nil, logger: connector.quietLogger))
      } catch {
        connector.close(connection)
        throw PostgresErrors.translate(error, doing: what, timeout: timeout)
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

    /// The domains with a transaction open in this task: a write of one of them would wait for
    /// itself.
    @TaskLocal static var openTransaction: Set<String> = []

    var transactionKey: Set<String> {
      Self.openTransaction.union(["\(container.namespace)/\(domain)"])
    }

    func checkOutsideTransaction() throws(LiaisonError) {
      guard Self.openTransaction.contains("\(container.namespace)/\(domain)") else { return }
      throw LiaisonError(
        .invalidArgument,
        "A write of the defaults domain '\(domain)' was started inside a transaction on the same domain, where it "
          + "would wait for that transaction forever. Write through the transaction's own `set` and `remove`.")
    }
  }

  /// The reads and writes of one ``PostgresDefaults/transaction(timeout:isolation:_:)``, on its
  /// connection.
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
    public func get<Value>(_ key: DefaultsKey<Value>) async throws(LiaisonError) -> Value? {
      try await storedValue(of: key.name)?.decode(
        key, domain: defaults.domain, decoder: defaults.container.makeDecoder())
    }

    /// The stored form of the key called `name` as this transaction sees it; `nil` when it has
    /// no value.
    func storedValue(of name: LiaisonName) async throws(LiaisonError) -> StoredValue? {
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
    public func set<Value>(_ value: Value, for key: DefaultsKey<Value>) async throws(LiaisonError) {
      let stored = try StoredValue(
        value, key: key, domain: defaults.domain, encoder: defaults.container.makeEncoder())
      try await save(stored, for: key.name)
    }

    /// Stores `stored` for the key called `name` when the transaction commits.
    func save(_ stored: StoredValue, for name: LiaisonName) async throws(LiaisonError) {
      let namespace = defaults.container.namespace.rawValue
      _ = try await run(
        """
        INSERT INTO liaison.defaults_entry (namespace, domain, key, kind, value)
        VALUES (\(namespace), \(defaults.domain.rawValue), \(name.rawValue), \(Int16(stored.kind.rawValue)), \
        \(ByteBuffer(bytes: stored.bytes)))
        ON CONFLICT (namespace, domain, key) DO UPDATE SET kind = excluded.kind, value = excluded.value
        """, doing: "write '\(name)' in the defaults domain '\(defaults.domain)'")
    }

    /// Removes the value of `key` when the transaction commits.
    public func remove<Value>(_ key: DefaultsKey<Value>) async throws(LiaisonError) {
      try await remove(named: key.name)
    }

    func remove(named name: LiaisonName) async throws(LiaisonError) {
      let namespace = defaults.container.namespace.rawValue
      _ = try await run(
        """
        DELETE FROM liaison.defaults_entry
        WHERE namespace = \(namespace) AND domain = \(defaults.domain.rawValue) AND key = \(name.rawValue)
        """, doing: "remove '\(name)' in the defaults domain '\(defaults.domain)'")
    }

    func removeAll() async throws(LiaisonError) {
      let namespace = defaults.container.namespace.rawValue
      _ = try await run(
        """
        DELETE FROM liaison.defaults_entry WHERE namespace = \(namespace) AND domain = \(defaults.domain.rawValue)
        """, doing: "remove every value of the defaults domain '\(defaults.domain)'")
    }

    private func run(_ query: PostgresQuery, doing what: String) async throws(LiaisonError) -> [PostgresRow] {
      if let failure { throw failure }
      let connector = defaults.container.connector
      do {
        return try await Connector.run(
          query, on: connection, within: connector.timing.replyTimeout, logger: connector.quietLogger)
      } catch {
        let translated = PostgresErrors.translate(error, doing: what)
        failed.withLock { if $0 == nil { $0 = translated } }
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
#endif
