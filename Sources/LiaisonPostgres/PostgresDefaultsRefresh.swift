#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  extension PostgresDefaults {
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
    ///   - timeout: how long to wait for another process's refresh at most, and then for other
    ///     writes of the key to let its row go (as a folder's refresh bounds its final write);
    ///     `nil` waits as long as it takes.
    ///   - isFresh: whether a stored value can be used as it is.
    ///   - fetch: makes a new value; runs at most once per refresh, in one process.
    /// - Throws: ``/Liaison/LiaisonError/Code/timedOut`` when the timeout passes while another
    ///   process refreshes; ``/Liaison/LiaisonError/Code/lost`` when the refresh lock was lost
    ///   before the value was stored (nothing is stored then); ``/Liaison/LiaisonError/Code/cancelled`` when the task
    ///   is cancelled while waiting; what `fetch` throws (nothing is stored then, and the next
    ///   caller tries again).
    public func refresh<Value>(
      _ key: DefaultsKey<Value>, timeout: Duration? = nil, isFresh: (Value) -> Bool,
      using fetch: () async throws -> Value
    ) async throws -> Value {
      if let current = try await get(key), isFresh(current) { return current }
      try checkOutsideTransaction()
      let lock = PostgresLock(container: container, name: .refreshLock(domain: domain, key: key.name))
      let held = try await lock.lock(.exclusive, timeout: timeout)
      do {
        // Another process may have refreshed while this one waited: its store committed before
        // it let the lock go, but its notification may not have reached this process yet, so
        // read from the server.
        let decoder = container.makeDecoder()
        if let current = try await read(key.name).stored?.decode(key, domain: domain, decoder: decoder),
          isFresh(current)
        {
          await held.unlock()
          return current
        }
        let value = try await fetch()
        let stored = try StoredValue(value, key: key, domain: domain, encoder: container.makeEncoder())
        let epoch = await trustedEpoch()
        let rows = try await held.run(
          try statement(setting: (key.name, stored)),
          doing: "store the refreshed value of '\(key.name)' in '\(domain)'",
          committing: true, timeout: timeout)
        cache.wrote(generation: try generation(rows), epoch: epoch, name: key.name.rawValue, stored: stored)
        await held.unlock()
        return value
      } catch {
        await held.unlock()
        throw error
      }
    }
  }
#endif
