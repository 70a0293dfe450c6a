/// What locks, presences and signals have in common on every backend: a folder shared by the
/// processes of one machine (``SharedContainer``), or a PostgreSQL database shared by processes
/// on many (`PostgresContainer`, in `LiaisonPostgres`).
///
/// Code written against these protocols runs unchanged on either; with the stored parts too
/// (defaults and mailboxes), against ``CoordinationStore``:
///
/// ```swift
/// func refreshOnce(in place: some CoordinationPlace) async throws {
///   try await place.lock("token-refresh").withLock {
///     // … one process at a time, on one machine or across a fleet
///   }
/// }
/// ```
///
/// Every requirement is `async` and throws ``LiaisonError`` only. The folder's types also have
/// synchronous forms of the same names, for synchronous code (they are unavailable from
/// asynchronous code, where the `async` forms never block a thread of the cooperative pool).
/// The requirements take every parameter; each type gives them the same default values
/// (`.exclusive`, no timeout, …), so that code written against a type reads the same on both.
///
/// Where the network changes the meaning, the API says so: a lock held through a database
/// connection can be **lost** when that connection ends (see ``HeldLock/loss``), and every
/// exclusive grant carries a **fencing token** (``HeldLock/fencingToken()``) that a resource can
/// check to refuse a holder whose lock ended without its knowing.
public protocol CoordinationPlace: Sendable {
  /// The place's lock type: ``ProcessLock`` for a folder.
  associatedtype LockType: CoordinationLock
  /// The place's presence type: ``Presence`` for a folder.
  associatedtype PresenceType: CoordinationPresence
  /// The place's signal type: ``Signal`` for a folder.
  associatedtype SignalType: CoordinationSignal

  /// The lock called `name` (see ``LiaisonName`` for the rule names follow).
  func lock(_ name: String) throws(LiaisonError) -> LockType
  /// The presence called `name`.
  func presence(_ name: String) throws(LiaisonError) -> PresenceType
  /// The signal called `name`.
  func signal(_ name: String) throws(LiaisonError) -> SignalType
}

/// A lock that one process holds exclusively, or several hold shared, at a time: ``ProcessLock``,
/// or `PostgresLock`.
public protocol CoordinationLock: Sendable {
  /// What a grant returns: ``LockGuard`` for a ``ProcessLock``.
  associatedtype Guard: HeldLock

  /// The lock's name.
  var name: LiaisonName { get }
  /// Takes the lock if it is free, without waiting; `nil` when another holder has it.
  func tryLock(_ mode: LockMode) async throws(LiaisonError) -> Guard?
  /// Takes the lock, waiting at most `timeout` (`nil`: as long as it takes).
  ///
  /// - Throws: ``LiaisonError/Code/timedOut`` when the timeout passes first, and
  ///   ``LiaisonError/Code/cancelled`` when the task is cancelled while waiting.
  func lock(_ mode: LockMode, timeout: Duration?) async throws(LiaisonError) -> Guard
}

/// A held lock: ``LockGuard``, or `PostgresLockGuard`.
///
/// Release it with ``unlock()``, or hold it for a scope with ``CoordinationLock/withLock(_:timeout:isolation:_:)``.
/// A guard that is dropped while held releases the lock too (so `_ = try await lock.tryLock()`
/// takes the lock and releases it at once); on PostgreSQL the release is then made in the
/// background, so await ``unlock()`` where the next step must see the lock free.
public protocol HeldLock: Sendable {
  /// The mode the lock is held in.
  var mode: LockMode { get }
  /// Whether the lock is still held: `false` once unlocked or lost.
  var isHeld: Bool { get }
  /// Why the lock was lost, once it was (code ``LiaisonError/Code/lost``); `nil` while held and
  /// after its holder unlocked it.
  var loss: LiaisonError? { get }
  /// Waits until the lock is lost and returns why; returns `nil` once it is unlocked instead.
  ///
  /// - Throws: ``LiaisonError/Code/cancelled`` when the task is cancelled first: the lock may
  ///   still be held.
  func waitForLoss() async throws(LiaisonError) -> LiaisonError?
  /// This grant's fencing token: larger than every token of an earlier exclusive grant of the
  /// same lock. Exclusive grants only.
  func fencingToken() async throws(LiaisonError) -> UInt64
  /// Releases the lock. Calling it again does nothing.
  func unlock() async
}

extension CoordinationLock {
  /// Runs `body` holding the lock, and releases it when `body` ends: the one meaning of
  /// `withLock` on every backend.
  ///
  /// `body` runs in the caller's isolation: called from the main actor, it may read and write the
  /// main actor's state.
  ///
  /// If the lock is lost while `body` runs, `body`'s task is cancelled, and once `body` has
  /// ended this throws the loss (``LiaisonError/Code/lost``), whatever `body` returned: work done
  /// after the loss was not done under the lock. A local lock is lost only to
  /// ``SharedContainer/suspend()``; one held through a PostgreSQL connection, also when the
  /// connection ends.
  ///
  /// - Throws: the loss; what `body` throws; or as ``CoordinationLock/lock(_:timeout:)``.
  public func withLock<Result: Sendable>(
    _ mode: LockMode = .exclusive, timeout: Duration? = nil, isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Result
  ) async throws -> Result {
    let held = try await lock(mode, timeout: timeout)
    // `body` runs in a task of the caller's isolation, which a loss cancels, as does cancelling
    // the caller; both tasks end before this returns, so `body` does not outlive the call.
    let result = await withoutActuallyEscaping(body) { body in
      let work = Task {
        _ = isolation
        return try await body()
      }
      let watch = Task {
        guard let loss = try? await held.waitForLoss() else { return LiaisonError?.none }
        work.cancel()
        return loss
      }
      let result = await withTaskCancellationHandler {
        await work.result
      } onCancel: {
        work.cancel()
      }
      watch.cancel()
      return (result, await watch.value)
    }
    await held.unlock()
    if let loss = result.1 { throw loss }
    return try result.0.get()
  }
}

/// A presence: "is it running?", answered by a claim its holder keeps while it runs.
/// ``Presence``, or `PostgresPresence`.
public protocol CoordinationPresence: Sendable {
  /// What a claim returns: ``PresenceClaim`` for a ``Presence``.
  associatedtype Claim: HeldClaim
  /// The sequence of changes: ``PresenceChanges`` for a ``Presence``.
  associatedtype Changes: AsyncSequence & Sendable where Changes.Element == PresenceChange

  /// The presence's name.
  var name: LiaisonName { get }
  /// Claims the presence for this process.
  ///
  /// - Throws: ``LiaisonError/Code/alreadyClaimed`` when another holder has it.
  func claim(info: String?) async throws(LiaisonError) -> Claim
  /// Whether the presence is claimed now; reading it never disturbs the holder.
  var isActive: Bool { get async throws(LiaisonError) }
  /// The holder, if the presence is active; reading it never disturbs the holder.
  var holder: PresenceHolder? { get async throws(LiaisonError) }
  /// The presence's changes: claimed and released, as they happen, starting with the state now.
  func changes() async throws(LiaisonError) -> Changes
}

extension CoordinationPresence {
  /// Runs `body` holding a claim on the presence, and releases it when `body` ends (whether it
  /// returns or throws). `body` runs in the caller's isolation: called from the main actor, it
  /// may read and write the main actor's state.
  ///
  /// - Throws: as ``CoordinationPresence/claim(info:)``; what `body` throws.
  public func withClaim<Result>(
    info: String? = nil, isolation: isolated (any Actor)? = #isolation, _ body: (Claim) async throws -> Result
  ) async throws -> Result {
    let claim = try await claim(info: info)
    do {
      let result = try await body(claim)
      await claim.release()
      return result
    } catch {
      await claim.release()
      throw error
    }
  }
}

/// A held claim on a presence: ``PresenceClaim``, or `PostgresPresenceClaim`.
///
/// Release it with ``release()``, or hold it for a scope with
/// ``CoordinationPresence/withClaim(info:isolation:_:)``. A claim that is dropped while held is released
/// too; on PostgreSQL the release is then made in the background.
public protocol HeldClaim: Sendable {
  /// Whether the claim is held: `false` once released or lost.
  var isHeld: Bool { get }
  /// Why the claim was lost, once it was; `nil` while held and after its holder released it.
  var loss: LiaisonError? { get }
  /// Waits until the claim is lost and returns why; `nil` once it is released instead.
  ///
  /// - Throws: ``LiaisonError/Code/cancelled`` when the task is cancelled first.
  func waitForLoss() async throws(LiaisonError) -> LiaisonError?
  /// Gives the presence up. Calling it again does nothing.
  func release() async
}

/// A signal: a 64-bit state and a "something changed" that wakes every observer, with
/// `notify(3)`'s coalescing. ``Signal``, or `PostgresSignal`.
public protocol CoordinationSignal: Sendable {
  /// The sequence of notifications: ``SignalNotifications`` for a ``Signal``.
  associatedtype Notifications: AsyncSequence & Sendable where Notifications.Element == SignalNotification

  /// The signal's name.
  var name: LiaisonName { get }
  /// Sets the state and wakes every observer.
  func post(state: UInt64) async throws(LiaisonError)
  /// The state, as last set.
  var state: UInt64 { get async throws(LiaisonError) }
  /// How many posts the signal has had in all (0 before any): the ``SignalNotification/sequence``
  /// of the latest post, a starting point no later post can slip past.
  var sequence: UInt64 { get async throws(LiaisonError) }
  /// The notifications: after every post, at least one notification that carries a state no
  /// older than that post's; posts close together may be delivered as one.
  func notifications(ignoringOwnPosts: Bool) async throws(LiaisonError) -> Notifications
}

extension CoordinationSignal {
  /// Waits for a post later than the one numbered `sequence` (see ``CoordinationSignal/sequence``), at most
  /// `timeout` (`nil`: as long as it takes), and returns the signal as that post left it; returns
  /// at once when such a post was already made.
  ///
  /// ```swift
  /// let seen = try await signal.sequence
  /// startTheWork()
  /// let done = try await signal.waitForPost(after: seen, timeout: .seconds(5))
  /// ```
  ///
  /// - Throws: ``LiaisonError/Code/timedOut`` when the timeout passes first;
  ///   ``LiaisonError/Code/cancelled`` when the task is cancelled; as ``CoordinationSignal/notifications(ignoringOwnPosts:)``.
  public func waitForPost(after sequence: UInt64, timeout: Duration?) async throws(LiaisonError)
    -> SignalNotification
  {
    let notifications = try await notifications(ignoringOwnPosts: false)
    let name = name
    let what = "waiting for a post of the signal '\(name)'"
    return try await withTimeout(timeout, what, on: ModelFollowing.clock(of: self)) { () async throws(LiaisonError) in
      // Read after subscribing: a post between the two is in both, never in neither.
      let (state, latest) = (try await self.state, try await self.sequence)
      if latest > sequence { return SignalNotification(name: name, state: state, sequence: latest) }
      do {
        for try await notification in notifications where notification.sequence > sequence {
          return notification
        }
      } catch let error as LiaisonError {
        throw error
      } catch {
        throw LiaisonError.cancelled(what)
      }
      throw LiaisonError.cancelled(what)  // the sequence ends only when the task is cancelled
    }
  }
}

/// Runs `body`, and throws ``LiaisonError/Code/timedOut`` (cancelling it) when `timeout` passes
/// first, or ``LiaisonError/Code/cancelled`` when the task is cancelled; `nil`: no timeout.
///
/// - Parameters:
///   - what: what `body` waits for, as "waiting for …", for the messages.
///   - clock: the clock `timeout` passes on (the part's place's).
package func withTimeout<Result: Sendable>(
  _ timeout: Duration?, _ what: String, on clock: LiaisonClock = .system,
  _ body: @escaping @Sendable () async throws(LiaisonError) -> Result
) async throws(LiaisonError) -> Result {
  let outcome = await withTaskGroup(of: Swift.Result<Result, LiaisonError>?.self) { group in
    group.addTask {
      do throws(LiaisonError) { return .success(try await body()) } catch { return .failure(error) }
    }
    if let timeout {
      group.addTask {
        do { try await clock.sleep(for: timeout) } catch { return nil }
        return .failure(LiaisonError(.timedOut, "Gave up after \(timeout) \(what)."))
      }
    }
    let first = await group.next() ?? nil
    group.cancelAll()
    return first ?? .failure(.cancelled(what))
  }
  if Task.isCancelled, case .failure = outcome { throw LiaisonError.cancelled(what) }
  return try outcome.get()
}
