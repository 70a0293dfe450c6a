import Liaison

extension SharedDefaults {
  /// Returns the value of `key` if it is fresh; otherwise refreshes it **once across all
  /// processes** and returns the new value: the OAuth token that the app, the widget and the
  /// keyboard all find expired at the same moment.
  ///
  /// ```swift
  /// let token = try await defaults.refresh(
  ///   .token, isFresh: { !$0.isExpired }, using: { try await api.refreshToken() })
  /// ```
  ///
  /// The callers that find the value stale take the key's refresh lock in turn. The first runs
  /// `fetch` and stores its result; each one after it re-reads under the lock, finds the fresh
  /// value, and returns it without calling `fetch`. If the refreshing process dies, the kernel
  /// releases its lock and the next waiter refreshes at once: nobody waits for a staleness
  /// timeout. Waiting for another process's refresh never blocks a thread of Swift's cooperative
  /// pool, nor does storing the new value.
  ///
  /// - Parameters:
  ///   - key: the key whose value is refreshed.
  ///   - timeout: how long to wait for another process's refresh at most; `nil` waits as long
  ///     as it takes.
  ///   - isFresh: whether a stored value can be used as it is.
  ///   - fetch: makes a new value; runs at most once per refresh, in one process.
  /// - Throws: ``/Liaison/LiaisonError/Code/timedOut`` when the timeout passes while another process
  ///   refreshes; ``/Liaison/LiaisonError/Code/cancelled`` when the task is cancelled while waiting; what `fetch`
  ///   throws (nothing is stored then, and the next caller tries again).
  public func refresh<Value>(
    _ key: DefaultsKey<Value>, timeout: Duration? = nil, isFresh: (Value) -> Bool,
    using fetch: () async throws -> Value
  ) async throws -> Value {
    if let current = try get(key), isFresh(current) { return current }
    let held = try await refreshLock(for: key).lock(timeout: timeout)
    defer { held.unlock() }
    // Another process may have refreshed while this one waited: its `set` returned before it
    // released the lock, so this `get` sees it.
    if let current = try get(key), isFresh(current) { return current }
    let value = try await fetch()
    try await set(value, for: key, timeout: timeout)
    return value
  }

  /// The lock of refreshes of `key` in this domain (``/Liaison/LiaisonName/refreshLock(domain:key:)``
  /// names it, as on every backend).
  private func refreshLock<Value>(for key: DefaultsKey<Value>) throws(LiaisonError) -> ProcessLock {
    ProcessLock(name: .refreshLock(domain: domain, key: key.name), folder: store.folder, container: container)
  }
}
