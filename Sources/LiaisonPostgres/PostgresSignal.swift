#if Postgres
  import Liaison
  import PostgresNIO

  /// A signal shared by processes on any number of hosts: its state in a row of
  /// `liaison.signal`, its notification a PostgreSQL `NOTIFY` committed with the post. Same
  /// meaning as ``/Liaison/Signal``: after every post, each observer receives at least one notification
  /// whose state is no older than that post's; posts close together may be delivered as one.
  ///
  /// A process listens on one connection for all the signals it observes. If that connection
  /// ends, it reconnects and reads every observed signal again, delivering those that moved:
  /// nothing posted meanwhile is lost.
  public final class PostgresSignal: Sendable, CoordinationSignal {
    /// The signal's name.
    public let name: LiaisonName
    let container: PostgresContainer

    init(container: PostgresContainer, name: LiaisonName) {
      self.container = container
      self.name = name
    }

    /// Sets the state and notifies every observer: one round trip and one commit.
    public func post(state: UInt64) async throws(LiaisonError) {
      try await post(setting: state)
    }

    /// Notifies every observer, leaving the state as it is.
    public func post() async throws(LiaisonError) {
      try await post(setting: nil)
    }

    private func post(setting newState: UInt64?) async throws(LiaisonError) {
      let namespace = container.namespace.rawValue
      let sender = String(container.senderID, radix: 16)
      let state = newState.map { Int64(bitPattern: $0) }
      _ = try await container.query(
        """
        WITH posted AS (
          INSERT INTO liaison.signal AS s (namespace, name, state, posts)
          VALUES (\(namespace), \(name.rawValue), coalesce(\(state), 0), 1)
          ON CONFLICT (namespace, name) DO UPDATE SET state = coalesce(\(state), s.state), posts = s.posts + 1
          RETURNING posts, state)
        SELECT pg_notify('liaison', concat_ws(' ', 's', \(namespace), \(name.rawValue), posts, state, \(sender)))
        FROM posted
        """, doing: "post the signal '\(name)'", committing: true)
    }

    /// The state, as last posted (0 before any post).
    public var state: UInt64 {
      get async throws(LiaisonError) { try await read().state }
    }

    /// How many posts the signal has had in all: the `sequence` of the latest post's
    /// notifications, 0 for a signal never posted. A starting point no post can slip past, as
    /// for ``/Liaison/Signal/sequence``.
    public var sequence: UInt64 {
      get async throws(LiaisonError) { try await read().posts }
    }

    /// Sets the state without notifying anybody (the `liaison state --set` command): observers
    /// read it with their next notification or ``state``.
    package func setState(_ newState: UInt64) async throws(LiaisonError) {
      let state = Int64(bitPattern: newState)
      _ = try await container.query(
        """
        INSERT INTO liaison.signal (namespace, name, state) VALUES (\(container.namespace.rawValue), \(name.rawValue), \(state))
        ON CONFLICT (namespace, name) DO UPDATE SET state = excluded.state
        """, doing: "set the state of the signal '\(name)'", committing: true)
    }

    /// The state, or `nil` when the signal has never been posted or set (the `liaison state`
    /// command tells the two apart).
    package func recordedState() async throws(LiaisonError) -> UInt64? {
      let rows = try await container.query(
        """
        SELECT state FROM liaison.signal WHERE namespace = \(container.namespace.rawValue) AND name = \(name.rawValue)
        """, doing: "read the signal '\(name)'")
      guard let row = rows.first else { return nil }
      return UInt64(bitPattern: try decodeRow(name) { try row.decode(Int64.self, context: .default) })
    }

    /// The state and post count, read from the server.
    func read() async throws(LiaisonError) -> (state: UInt64, posts: UInt64) {
      try await Self.read(name, in: container.namespace, through: container.connector)
    }

    /// The state and post count of `name`, through `connector` (which, unlike the container, a
    /// listener's subscriber may keep without a cycle).
    static func read(_ name: LiaisonName, in namespace: LiaisonName, through connector: Connector)
      async throws(LiaisonError) -> (state: UInt64, posts: UInt64)
    {
      let rows = try await connector.query(
        """
        SELECT state, posts FROM liaison.signal WHERE namespace = \(namespace.rawValue) AND name = \(name.rawValue)
        """, doing: "read the signal '\(name)'")
      guard let row = rows.first else { return (0, 0) }
      let (state, posts) = try decodeRow(name) { try row.decode((Int64, Int64).self, context: .default) }
      return (UInt64(bitPattern: state), UInt64(bitPattern: posts))
    }

    /// The notifications of the posts that come after this returns, coalesced: an
    /// `AsyncSequence` for one iteration. Cancelling the iterating task ends it, and so does closing the container.
    ///
    /// - Parameter ignoringOwnPosts: skip the posts of this process's container.
    /// - Throws: ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached.
    public func notifications(ignoringOwnPosts: Bool = false) async throws(LiaisonError)
      -> PostgresSignalNotifications
    {
      let (stream, continuation) = AsyncStream.makeStream(
        of: SignalNotification.self, bufferingPolicy: .bufferingNewest(1))
      let delivered = Locked<UInt64>(0)
      let ownSender = container.senderID
      let name = name
      let deliver: @Sendable (UInt64, UInt64) -> Void = { posts, state in
        let moved = delivered.withLock { last -> Bool in
          guard posts > last else { return false }
          last = posts
          return true
        }
        if moved { continuation.yield(SignalNotification(name: name, state: state, sequence: posts)) }
      }
      // The subscriber keeps the connector for its reads, not the container: the container owns
      // the listener, which owns the subscriber.
      let (namespace, connector) = (container.namespace, container.connector)
      let id = try await container.listener.subscribe(
        kind: "s", namespace: namespace, name: name, stopped: { continuation.finish() },
        deliver: { event in
          guard let event else {
            // Reconnected: read again, deliver if it moved (in the container's background work).
            connector.background.start {
              if let (state, posts) = try? await Self.read(name, in: namespace, through: connector) {
                deliver(posts, state)
              }
            }
            return
          }
          if ignoringOwnPosts && event.sender == ownSender {
            delivered.withLock { $0 = max($0, event.posts) }
            return
          }
          deliver(event.posts, event.state)
        })
      // Posts committed before the subscription took effect are not this sequence's.
      let baseline: UInt64
      do {
        baseline = try await read().posts
      } catch {
        container.listener.unsubscribe(id)
        throw error
      }
      delivered.withLock { $0 = max($0, baseline) }
      let listener = container.listener
      continuation.onTermination = { _ in listener.unsubscribe(id) }
      return PostgresSignalNotifications(stream: stream)
    }
  }

  /// A row's columns as `Columns`, or ``/Liaison/LiaisonError/Code/corruptFile`` for a row that
  /// Liaison did not write (another program's).
  func decodeRow<Columns>(_ name: LiaisonName, _ decode: () throws -> Columns) throws(LiaisonError) -> Columns {
    do {
      return try decode()
    } catch {
      throw LiaisonError(
        .corruptFile,
        "A row of '\(name)' in the schema liaison was not written by Liaison (\(error)). Delete it, or write it "
          + "again with Liaison.", cause: error)
    }
  }

  /// The notifications of a ``PostgresSignal``, from ``PostgresSignal/notifications(ignoringOwnPosts:)``, or
  /// of the writes of a ``PostgresDefaults`` domain, from ``PostgresDefaults/changes()``.
  public struct PostgresSignalNotifications: AsyncSequence, Sendable {
    public typealias Element = SignalNotification
    let stream: AsyncStream<SignalNotification>

    public func makeAsyncIterator() -> AsyncStream<SignalNotification>.Iterator {
      stream.makeAsyncIterator()
    }
  }

  extension PostgresSignal: ClockedPart {
    /// The clock of the signal's container: a timed wait for a post passes on it.
    package var clock: LiaisonClock { container.connector.clock }
  }
#endif
