#if Postgres
  import Liaison
  import PostgresNIO

  /// The one listening connection of a ``PostgresContainer``: `LISTEN liaison`, for every signal
  /// and presence its process observes. Reconnects when the connection ends; every subscriber is
  /// then told to read again what it watches, so that nothing posted while it was away is lost.
  final class Listener: Sendable {
    /// What a notification says; `nil` for "read again" (after a reconnect).
    struct Event: Sendable {
      /// `s` for a signal's post, `p` for a presence's claim, `d` for a write of shared defaults.
      let kind: String
      let namespace: String
      let name: String
      /// For a post: the signal's post count and state after it, and the poster (for a defaults
      /// write: the domain's generation in `posts`).
      let posts: UInt64
      let state: UInt64
      let sender: UInt64
      /// What follows the name, as it is: a send's messages, for ``CarriedMessages``.
      let detail: Substring
    }

    private struct Subscriber: Sendable {
      let kind: String
      let namespace: String
      let name: String
      let deliver: @Sendable (Event?) -> Void
      /// Told once when the listener stops for good (the container closed).
      let stopped: (@Sendable () -> Void)?
    }

    private struct State: Sendable {
      var subscribers: [Int: Subscriber] = [:]
      var nextID = 0
      var task: Task<Void, Never>?
      var listening = false
      /// Counts the times listening began: a change means notifications may have been missed.
      var epoch: UInt64 = 0
      /// Subscribers waiting for the first `LISTEN` to be in effect.
      var waiting: [CheckedContinuation<Void, any Error>] = []
      var stopped = false
    }

    private let connector: Connector
    private let state = Locked(State())

    init(connector: Connector) {
      self.connector = connector
    }

    /// Stops listening for good: subscribers still waiting for the first `LISTEN` are told that
    /// the container was closed. The task ends in the container's background work.
    func stop() {
      let (task, waiting, subscribers) = state.withLock { state in
        state.stopped = true
        defer {
          state.waiting = []
          state.subscribers = [:]
        }
        return (state.task.take(), state.waiting, Array(state.subscribers.values))
      }
      task?.cancel()
      for continuation in waiting { continuation.resume(throwing: Connector.closedError) }
      for subscriber in subscribers { subscriber.stopped?() }
    }

    /// Adds a subscriber for notifications of `kind` on `name`, once the connection listens:
    /// a notification committed after this returns reaches `deliver`. `stopped` is told when the
    /// listener stops for good (its sequence ends then).
    func subscribe(
      kind: String, namespace: LiaisonName, name: LiaisonName, stopped: (@Sendable () -> Void)? = nil,
      deliver: @escaping @Sendable (Event?) -> Void
    ) async throws(LiaisonError) -> Int {
      try connector.checkOpen()
      let id = state.withLock { state -> Int in
        state.nextID += 1
        state.subscribers[state.nextID] = Subscriber(
          kind: kind, namespace: namespace.rawValue, name: name.rawValue, deliver: deliver, stopped: stopped)
        if state.task == nil && !state.stopped {
          // A background task of the container: its close() ends it.
          if connector.holdsAreLeases {
            state.listening = true
            state.task = connector.background.start { [weak self] in await self?.poll() }
          } else {
            state.task = connector.background.start { [weak self] in await self?.run() }
          }
        }
        return state.nextID
      }
      do {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
          let ready = state.withLock { state -> Bool? in
            if state.stopped { return false }
            if state.listening { return true }
            state.waiting.append(continuation)
            return nil
          }
          switch ready {
          case .some(true): continuation.resume()
          case .some(false): continuation.resume(throwing: Connector.closedError)
          case .none: break
          }
        }
      } catch {
        unsubscribe(id)
        throw PostgresErrors.translate(error, doing: "listen for notifications")
      }
      return id
    }

    /// Which stretch of listening this is, while the connection listens; `nil` while it does not
    /// (not yet, or reconnecting). Every notification committed while the same value is returned
    /// reaches the subscribers; a different value means some may have been missed in between.
    ///
    /// Always `nil` when notifications are polled (``ConnectionTargets/holdsAreLeases``): no
    /// notification arrives as a write commits, so what was read before cannot be trusted.
    var listeningEpoch: UInt64? {
      if connector.holdsAreLeases { return nil }
      return state.withLock { $0.listening ? $0.epoch : nil }
    }

    /// How many subscriptions are in place: every watch of the container (a signal's, a domain's,
    /// a presence's) has one while it lasts.
    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    func unsubscribe(_ id: Int) {
      state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
    }

    /// How often every subscriber reads again what it watches when notifications are polled
    /// (``ConnectionTargets/holdsAreLeases``): through a pooler in transaction mode no connection
    /// can stay listening, since its session goes to another client after every transaction.
    static let pollInterval: Duration = .milliseconds(250)

    /// Tells every subscriber to read again, every ``pollInterval``, until stopped: the
    /// notifications of a connection that cannot `LISTEN`. A change is seen within that interval
    /// (and the time a subscriber's read takes).
    private func poll() async {
      while !Task.isCancelled {
        do {
          try await connector.clock.sleep(for: Self.pollInterval)
        } catch {
          return
        }
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.deliver(nil) }
      }
    }

    /// Listens until stopped, reconnecting after a pause when the connection ends.
    private func run() async {
      let pause = Locked<Duration>(.milliseconds(50))
      let everListened = Locked(false)
      while !Task.isCancelled {
        do {
          let connection = try await connector.connect()
          defer { connector.close(connection) }
          // A LISTEN that gets no answer within the reply bound (a server that stopped answering
          // in between) closes its connection: subscribers waiting for it learn of it, and the
          // loop connects again, instead of waiting on a silent connection. The listening ends
          // when the connection closes, even if postgres-nio never answers (`Statements`).
          let started = Locked(false)
          let watchdog = Task { [connector] in
            try? await connector.clock.sleep(for: connector.timing.replyTimeout)
            if !started.withLock({ $0 }) { connector.close(connection) }
          }
          defer { watchdog.cancel() }
          try await withTaskCancellationHandler {
            try await Statements.run(on: connection) {
              try await self.listen(on: connection, started: started, everListened: everListened, pause: pause)
            }
          } onCancel: {
            connector.close(connection)
          }
        } catch {
          let waiting = state.withLock { state in
            state.listening = false
            defer { state.waiting = [] }
            return state.waiting
          }
          // A subscriber waiting for the first LISTEN learns that the server cannot be reached.
          for continuation in waiting {
            continuation.resume(throwing: PostgresErrors.translate(error, doing: "listen for notifications"))
          }
        }
        state.withLock { $0.listening = false }
        do {
          try await connector.clock.sleep(for: pause.withLock { $0 })
        } catch {
          return
        }
        pause.withLock { $0 = min($0 * 2, .seconds(1)) }
      }
    }

    /// `LISTEN`s on `connection` and dispatches its notifications until it ends; tells the
    /// waiting subscribers once it listens, and every subscriber to read again after a reconnect.
    private func listen(
      on connection: PostgresConnection, started: Locked<Bool>, everListened: Locked<Bool>, pause: Locked<Duration>
    ) async throws {
      try await connection.listen(on: Schema.channel) { notifications in
        started.withLock { $0 = true }
        let (waiting, subscribers) = state.withLock { state in
          state.listening = true
          state.epoch += 1
          defer { state.waiting = [] }
          return (state.waiting, Array(state.subscribers.values))
        }
        for continuation in waiting { continuation.resume() }
        let reconnected = everListened.withLock { ever in
          defer { ever = true }
          return ever
        }
        if reconnected {
          for subscriber in subscribers { subscriber.deliver(nil) }  // read again: posts may be missed
        }
        pause.withLock { $0 = .milliseconds(50) }
        for try await notification in notifications { dispatch(notification.payload) }
      }
    }

    private func dispatch(_ payload: String) {
      let parts = payload.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
      guard parts.count >= 3 else { return }
      let detail = parts.count > 3 ? parts[3] : ""
      // A post's three numbers; a send's messages (JSON, up to 8 KB) are not split.
      let words = detail.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
      let event = Event(
        kind: String(parts[0]), namespace: String(parts[1]), name: String(parts[2]),
        posts: words.count > 0 ? UInt64(words[0]) ?? 0 : 0,
        state: words.count > 1 ? UInt64(bitPattern: Int64(words[1]) ?? 0) : 0,
        sender: words.count > 2 ? UInt64(words[2], radix: 16) ?? 0 : 0, detail: detail)
      let subscribers = state.withLock { state in
        state.subscribers.values.filter {
          $0.kind == event.kind && $0.namespace == event.namespace && $0.name == event.name
        }
      }
      for subscriber in subscribers { subscriber.deliver(event) }
    }
  }
#endif
