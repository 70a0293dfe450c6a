#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  extension PostgresDefaults {
    /// The listener's epoch when the cache may be used: this domain's subscription is in effect
    /// and the connection listens. Subscribes on first use; `nil` (read from the server) while
    /// that fails or another caller subscribes.
    func trustedEpoch() async -> UInt64? {
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
    public func changes() async throws(LiaisonError) -> PostgresSignalNotifications {
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
      let id = try await container.listener.subscribe(
        kind: "d", namespace: namespace, name: domain, stopped: { continuation.finish() },
        deliver: { event in
          guard let event else {
            // Reconnected: read the generation again, deliver if it moved (in the container's
            // background work). Should this read fail, the listener's connection has most likely
            // ended again, and the next reconnect reads.
            connector.background.start {
              if let generation = try? await Self.generation(of: domain, in: namespace, through: connector) {
                deliver(generation)
              }
            }
            return
          }
          deliver(event.posts)
        })
      // Writes committed before the subscription took effect are not this sequence's.
      let listener = container.listener
      let baseline: UInt64
      do {
        baseline = try await Self.generation(of: domain, in: namespace, through: connector)
      } catch {
        listener.unsubscribe(id)
        throw error
      }
      delivered.withLock { $0 = max($0, baseline) }
      continuation.onTermination = { _ in listener.unsubscribe(id) }
      return PostgresSignalNotifications(stream: stream)
    }

    /// The generation of `domain`, read from the server (0 before its first write).
    static func generation(of domain: LiaisonName, in namespace: LiaisonName, through connector: Connector)
      async throws(LiaisonError) -> UInt64
    {
      let rows = try await connector.query(
        """
        SELECT generation FROM liaison.defaults_domain
        WHERE namespace = \(namespace.rawValue) AND domain = \(domain.rawValue)
        """, doing: "read the generation of the defaults domain '\(domain)'")
      guard let row = rows.first else { return 0 }
      return UInt64(clamping: max(0, try decodeRow(domain) { try row.decode(Int64.self) }))
    }
  }

  /// The values of one key over time: see ``/Liaison/CoordinationDefaults/changes(of:)``.
  public typealias PostgresDefaultsValueChanges<Value: Codable & Sendable & Equatable> =
    DefaultsValueChanges<PostgresDefaults, Value>

  /// The in-process cache of a ``PostgresDefaults``: stored values by key, current for one
  /// generation of the domain, filled while one stretch of listening lasts (an epoch of the
  /// container's listener).
  final class DefaultsCache: Sendable {
    private struct State: Sendable {
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
    struct Entry: Sendable {
      let stored: StoredValue?
      var decoded: (any Sendable)?
      var decodedType: ObjectIdentifier?
    }

    /// What a lookup found: the entry, and the generation it is current for.
    struct Hit: Sendable {
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
#endif
