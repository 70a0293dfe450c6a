#if Postgres
  import Foundation
  import Liaison
  import PostgresNIO

  /// "Is it running?" across hosts: a claim is an advisory lock held on a connection of its own,
  /// with a holder record (host, process id, info, since) in `liaison.presence`. Same meaning as
  /// ``/Liaison/Presence``'s claims: active while the holder's session lasts, released by the server when
  /// it ends — at once when the holder's process dies, within the detection bound when its host
  /// dies or its network is cut.
  ///
  /// Reading the holder never disturbs it, and ``changes()`` reports a holder's end without
  /// polling: an observer waits, on the server, for a second lock that the holder keeps with its
  /// claim.
  public final class PostgresPresence: Sendable, CoordinationPresence {
    /// The presence's name.
    public let name: LiaisonName
    let container: PostgresContainer
    private let rowID: RowID

    init(container: PostgresContainer, name: LiaisonName) {
      self.container = container
      self.name = name
      rowID = RowID(.presence, name: name, in: container)
    }

    /// Claims the presence for this process, with `info` for observers to read (at most
    /// ``/Liaison/Presence/maximumInfoLength`` bytes). One round trip.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/alreadyClaimed`` when another holder has it (the message
    ///   names it), ``/Liaison/LiaisonError/Code/tooLarge`` for a long `info`,
    ///   ``/Liaison/LiaisonError/Code/unavailable`` when the server cannot be reached.
    public func claim(info: String? = nil) async throws(LiaisonError) -> PostgresPresenceClaim {
      if let info, info.utf8.count > Presence.maximumInfoLength {
        throw LiaisonError(
          .tooLarge,
          "The info of a claim is at most \(Presence.maximumInfoLength) bytes; this one has \(info.utf8.count).")
      }
      let id = try await resolveID()
      let connector = container.connector
      if connector.holdsAreLeases {
        let (namespace, host) = (container.namespace.rawValue, container.host)
        let kind = HeldLease.Kind.claim(id: id, namespace: namespace, name: name.rawValue)
        let taken = try await HeldLease.take(
          kind, connector: connector, doing: "claim the presence '\(name)'", committing: true
        ) { holder in
          HeldLease.take(
            claim: id, holder: holder, length: connector.timing.leaseLength, host: host,
            pid: ProcessInfo.processInfo.processIdentifier, info: info, namespace: namespace, name: name.rawValue)
        }
        guard let (holder, sent, _) = taken else { throw await alreadyClaimed() }
        let lease = HeldLease(
          kind: kind, holder: holder, sent: sent, connector: connector,
          what: "The claim on the presence '\(name)'")
        return PostgresPresenceClaim(presence: self, id: id, lease: lease)
      }
      let connection = try await connector.take()
      let namespace = container.namespace.rawValue
      let claimed: Bool
      do {
        // One statement: take the claim; if taken, take the watch lock too (observers waiting for
        // it, shared, let go at once), write the record and notify, all visible at its commit. A
        // lease (a holder through a pooler in transaction mode) excludes it too: checked on the
        // row's newest version, since a lease's taker holds the claim's advisory lock until its
        // row is written.
        let rows = try await Connector.run(
          """
          WITH claimed AS MATERIALIZED (
            SELECT CASE WHEN \(unescaped: connector.inOwnSession(connection))
              THEN pg_try_advisory_lock(\(Schema.claimClass), \(id)) ELSE false END AS held),
          watched AS MATERIALIZED (
            SELECT count(*) AS locks FROM claimed, LATERAL (SELECT pg_advisory_lock(\(Schema.watchClass), \(id))) AS w
            WHERE claimed.held),
          written AS (
            UPDATE liaison.presence SET host = \(container.host), pid = \(ProcessInfo.processInfo.processIdentifier),
              info = \(info), since = now(), backend_pid = pg_backend_pid()
            FROM claimed, watched WHERE claimed.held AND watched.locks = 1 AND id = \(id)
              AND (lease_end IS NULL OR lease_end <= clock_timestamp())
            RETURNING pg_notify('liaison', concat_ws(' ', 'p', \(namespace), \(name.rawValue))))
          SELECT claimed.held, (SELECT count(*) FROM written), pg_backend_pid() FROM claimed
          """, on: connection, within: connector.timing.replyTimeout, logger: connector.quietLogger,
          committing: true)
        let (held, written, session) = try rows.first!.decode((Bool, Int64, Int32).self)
        try connector.checkSession(of: connection, ranIn: session)
        claimed = held && written == 1
        if held && !claimed {
          _ = try await Connector.run(
            "SELECT pg_advisory_unlock(\(Schema.claimClass), \(id)), pg_advisory_unlock(\(Schema.watchClass), \(id))",
            on: connection, within: connector.timing.replyTimeout, logger: connector.quietLogger)
        }
      } catch {
        connector.close(connection)
        throw PostgresErrors.translate(error, doing: "claim the presence '\(name)'")
      }
      guard claimed else {
        connector.giveBack(connection)
        throw await alreadyClaimed()
      }
      return PostgresPresenceClaim(presence: self, id: id, connection: connection)
    }

    /// The error of a claim that another holder has.
    private func alreadyClaimed() async -> LiaisonError {
      let holder = try? await self.holder
      return LiaisonError(
        .alreadyClaimed,
        "The presence '\(name)' is already claimed\(holder.map { " by \($0)" } ?? " (its holder is starting or ending)")."
      )
    }

    /// The holder, if the presence is active: read from the server, without disturbing the holder.
    public var holder: PresenceHolder? {
      get async throws(LiaisonError) { try await holderRecord()?.holder }
    }

    /// The holder, if the presence is active, and whether it holds a lease (through a pooler
    /// in transaction mode) rather than a session of its own.
    private func holderRecord() async throws(LiaisonError) -> (holder: PresenceHolder, isLease: Bool)? {
      let rows = try await container.query(
        """
        SELECT p.host, p.pid, p.info, extract(epoch FROM p.since)::float8, p.lease_end > clock_timestamp()
        FROM liaison.presence p
        WHERE p.namespace = \(container.namespace.rawValue) AND p.name = \(name.rawValue)
          AND (p.lease_end > clock_timestamp() OR EXISTS (
            SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = \(Schema.claimClass)::oid
              AND l.objid = p.id::oid AND l.objsubid = 2 AND l.granted AND l.pid = p.backend_pid
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())))
        """, doing: "read the holder of the presence '\(name)'")
      guard let row = rows.first else { return nil }
      guard
        let (host, pid, info, since, isLease) = try? row.decode(
          (String?, Int32?, String?, Double?, Bool?).self, context: .default)
      else {
        throw LiaisonError(
          .corruptFile,
          "The holder record of the presence '\(name)' in liaison.presence was not written by Liaison. Delete its "
            + "row; the next claim makes a new one.")
      }
      let holder = PresenceHolder(
        kind: .claim, processID: pid ?? 0, since: Date(timeIntervalSince1970: since ?? 0), info: info, host: host)
      return (holder, isLease ?? false)
    }

    /// Whether the presence is held now.
    public var isActive: Bool {
      get async throws(LiaisonError) { try await holder != nil }
    }

    /// The presence's state now, then every change of it: claimed (by whom) and released.
    /// Changes in quick succession may coalesce into the latest; consecutive elements differ.
    /// A holder's end is seen as soon as the server ends its session, without polling.
    /// One iteration per sequence; cancelling the iterating task ends it, and so does closing
    /// the container (the watch is part of its background work).
    public func changes() async throws(LiaisonError) -> PostgresPresenceChanges {
      let (wakeUps, poke) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
      let listener = container.listener
      let subscription = try await listener.subscribe(kind: "p", namespace: container.namespace, name: name) { _ in
        poke.yield()
      }
      let (changes, output) = AsyncThrowingStream.makeStream(
        of: PresenceChange.self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(1))
      // Whether a wait for the holder's end is under way (at most one at a time).
      let watching = Locked(false)
      let watcher = container.connector.background.start {
        var last: PresenceChange?
        var watch: Task<Void, Never>?
        defer { watch?.cancel() }
        var iterator = wakeUps.makeAsyncIterator()
        while !Task.isCancelled {
          do {
            let record = try await self.holderRecord()
            let change: PresenceChange = record.map { .claimed($0.holder) } ?? .released
            if change != last {
              output.yield(change)
              last = change
            }
            // A session's end is waited for on the server; a lease's end (it may run out
            // without a word) is looked for every poll interval.
            let startsWatch =
              record != nil
              && watching.withLock { watching in
                defer { watching = true }
                return !watching
              }
            if startsWatch, let record {
              // Through a pooler in transaction mode, nothing is waited for in a session: a
              // session holder's end is looked for too.
              watch =
                record.isLease || self.container.connector.holdsAreLeases
                ? Task { await self.lookAgainSoon(then: poke, watching: watching) }
                : Task { await self.waitForHolderEnd(then: poke, watching: watching) }
            }
          } catch {
            // The server is away: the listener's reconnect wakes this loop.
          }
          guard await iterator.next() != nil else { break }
        }
        output.finish()
      }
      guard let watcher else {
        listener.unsubscribe(subscription)
        throw Connector.closedError
      }
      output.onTermination = { _ in
        watcher.cancel()
        listener.unsubscribe(subscription)
        poke.finish()
      }
      return PostgresPresenceChanges(stream: changes)
    }

    /// Wakes the observer after a ``Listener/pollInterval``: the watch of a lease's end.
    private func lookAgainSoon(then poke: AsyncStream<Void>.Continuation, watching: Locked<Bool>) async {
      try? await container.connector.clock.sleep(for: Listener.pollInterval)
      watching.withLock { $0 = false }
      poke.yield()
    }

    /// Waits, on a connection of its own, until the holder's watch lock is free (its session
    /// ended), then wakes the observer.
    private func waitForHolderEnd(then poke: AsyncStream<Void>.Continuation, watching: Locked<Bool>) async {
      defer {
        watching.withLock { $0 = false }
        poke.yield()
      }
      let connector = container.connector
      guard let id = try? await resolveID(), let connection = try? await connector.take() else {
        try? await container.connector.clock.sleep(for: .milliseconds(200))
        return
      }
      do {
        try await withTaskCancellationHandler {
          _ = try await Connector.run(
            "SELECT pg_advisory_lock_shared(\(Schema.watchClass), \(id))", on: connection, within: nil,
            logger: connector.quietLogger)
          _ = try await Connector.run(
            "SELECT pg_advisory_unlock_shared(\(Schema.watchClass), \(id))", on: connection,
            within: connector.timing.replyTimeout, logger: connector.quietLogger)
        } onCancel: {
          connector.close(connection)
        }
        // A cancelled watch closed its connection, which may not read as closed yet.
        if Task.isCancelled { connector.close(connection) } else { connector.giveBack(connection) }
      } catch {
        connector.close(connection)
        try? await container.connector.clock.sleep(for: .milliseconds(200))
      }
    }

    /// The row id, the second key of the advisory locks; registered on first use.
    func resolveID() async throws(LiaisonError) -> Int32 { try await rowID.resolve() }
  }

  /// The changes of a ``PostgresPresence``, from ``PostgresPresence/changes()``.
  public struct PostgresPresenceChanges: AsyncSequence, Sendable {
    public typealias Element = PresenceChange
    let stream: AsyncThrowingStream<PresenceChange, any Error>

    public func makeAsyncIterator() -> AsyncThrowingStream<PresenceChange, any Error>.Iterator {
      stream.makeAsyncIterator()
    }
  }

  /// A held claim on a ``PostgresPresence``: active until ``release()``, or until the holder's
  /// session ends (see ``loss``).
  ///
  /// A claim dropped while held is released too, in the background: its connection is closed,
  /// which ends its session (the container's ``PostgresContainer/close()`` waits for that).
  public final class PostgresPresenceClaim: HeldClaim {
    /// The presence claimed.
    public let presence: PostgresPresence
    /// The presence's row id, which its two advisory locks are keyed by.
    private let id: Int32
    private let hold: Hold

    /// A claim held by `connection`'s session.
    init(presence: PostgresPresence, id: Int32, connection: PostgresConnection) {
      self.presence = presence
      self.id = id
      hold = .session(
        HeldSession(
          connection: connection, connector: presence.container.connector,
          what: "The claim on the presence '\(presence.name)'"))
    }

    /// A claim held as a lease.
    init(presence: PostgresPresence, id: Int32, lease: HeldLease) {
      self.presence = presence
      self.id = id
      hold = .lease(lease)
    }

    /// Whether the claim is held: `false` once released or lost.
    public var isHeld: Bool { hold.isHeld }
    /// Why the claim was lost (code ``/Liaison/LiaisonError/Code/lost``); `nil` while held and after
    /// ``release()``.
    public var loss: LiaisonError? { hold.loss }
    /// Waits until the claim is lost and returns why; `nil` once released.
    ///
    /// - Throws: ``/Liaison/LiaisonError/Code/cancelled`` when the task is cancelled first.
    public func waitForLoss() async throws(LiaisonError) -> LiaisonError? { try await hold.waitForLoss() }

    /// The descriptor, in this process, of the socket whose session holds the claim; `nil` once
    /// released or lost (see ``PostgresLockGuard/sessionSocket``).
    package var sessionSocket: CInt? { hold.socketDescriptor }

    /// Leaves the claim to the processes holding its session's socket (see
    /// ``PostgresLockGuard/leaveToSocketHolders()``).
    package func leaveToSocketHolders() {
      if case .session(let session) = hold { session.leaveOpenUntilExit() }
    }

    /// Gives the presence up: unlocks the claim, then the watch lock that observers wait for, in
    /// one statement, so that the presence reads inactive everywhere when this returns. Calling it
    /// again does nothing. If the statement fails, the connection is closed, which ends the
    /// session and so both locks, once the server has seen it go.
    public func release() async {
      let session: HeldSession
      switch hold {
      case .session(let held): session = held
      case .lease(let lease): return await lease.release()
      }
      guard let connection = session.end(nil) else { return }
      let connector = presence.container.connector
      do {
        let rows = try await Connector.run(
          """
          SELECT pg_advisory_unlock(\(Schema.claimClass), \(id)), pg_advisory_unlock(\(Schema.watchClass), \(id))
          """, on: connection, within: connector.timing.replyTimeout, logger: connector.quietLogger)
        if let row = rows.first, try row.decode((Bool, Bool).self) == (true, true) {
          connector.giveBack(connection)
          return
        }
      } catch {}
      try? await connection.close()
    }
  }
#endif
