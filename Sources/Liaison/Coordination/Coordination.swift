/// What locks, presences and signals have in common on every backend: a folder shared by the
/// processes of one machine (``SharedContainer``), or a PostgreSQL database shared by processes
/// on many (`PostgresContainer`, in `LiaisonPostgres`).
///
/// Code written against these protocols, with the `async` forms, runs unchanged on either:
///
/// ```swift
/// func refreshOnce(in place: some CoordinationPlace) async throws {
///   try await place.lock("token-refresh").withLock {
///     // … one process at a time, on one machine or across a fleet
///   }
/// }
/// ```
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
  func tryLock(_ mode: LockMode) async throws -> Guard?
  /// Takes the lock, waiting at most `timeout` (`nil`: as long as it takes).
  ///
  /// - Throws: ``LiaisonError/Code/timedOut`` when the timeout passes first, and
  ///   `CancellationError` when the task is cancelled while waiting.
  func lock(_ mode: LockMode, timeout: Duration?) async throws -> Guard
}

/// A held lock: ``LockGuard``, or `PostgresLockGuard`.
public protocol HeldLock: Sendable {
  /// The mode the lock is held in.
  var mode: LockMode { get }
  /// Whether the lock is still held: `false` once unlocked or lost.
  var isHeld: Bool { get }
  /// Why the lock was lost, once it was (code ``LiaisonError/Code/lost``); `nil` while held and
  /// after its holder unlocked it.
  var loss: LiaisonError? { get }
  /// Waits until the lock is lost and returns why; returns `nil` once it is unlocked instead, or
  /// when the task is cancelled.
  func waitForLoss() async -> LiaisonError?
  /// This grant's fencing token: larger than every token of an earlier exclusive grant of the
  /// same lock. Exclusive grants only.
  func fencingToken() async throws -> UInt64
  /// Releases the lock. Calling it again does nothing.
  func unlock() async
}

extension CoordinationLock {
  /// Runs `body` holding the lock, and releases it when `body` ends.
  ///
  /// If the lock is lost while `body` runs, `body`'s task is cancelled, and once `body` has
  /// ended this throws the loss (``LiaisonError/Code/lost``), whatever `body` returned: work done
  /// after the loss was not done under the lock.
  public func withLock<Result: Sendable>(
    _ mode: LockMode = .exclusive, timeout: Duration? = nil, _ body: @escaping @Sendable () async throws -> Result
  ) async throws -> Result {
    let held = try await lock(mode, timeout: timeout)
    let outcome = await withTaskGroup(of: GuardedOutcome<Result>.self) { group in
      group.addTask {
        do {
          return .finished(.success(try await body()))
        } catch {
          return .finished(.failure(error))
        }
      }
      group.addTask { .lost(await held.waitForLoss()) }
      var finished: Swift.Result<Result, any Error>?
      var loss: LiaisonError?
      while let next = await group.next() {
        switch next {
        case .finished(let result):
          finished = result
          group.cancelAll()  // ends the wait for a loss
        case .lost(let lost):
          guard let lost else { continue }  // cancelled once `body` finished
          loss = lost
          group.cancelAll()  // cancels `body`
        }
      }
      if let loss { return Swift.Result<Result, any Error>.failure(loss) }
      return finished!
    }
    await held.unlock()
    return try outcome.get()
  }
}

private enum GuardedOutcome<Result: Sendable>: Sendable {
  case finished(Swift.Result<Result, any Error>)
  case lost(LiaisonError?)
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
  func claim(info: String?) async throws -> Claim
  /// The holder, if the presence is active; reading it never disturbs the holder.
  var holder: PresenceHolder? { get async throws }
  /// The presence's changes: claimed and released, as they happen, starting with the state now.
  func changes() async throws -> Changes
}

/// A held claim on a presence: ``PresenceClaim``, or `PostgresPresenceClaim`.
public protocol HeldClaim: Sendable {
  /// Whether the claim is held: `false` once released or lost.
  var isHeld: Bool { get }
  /// Why the claim was lost, once it was; `nil` while held and after its holder released it.
  var loss: LiaisonError? { get }
  /// Waits until the claim is lost and returns why; `nil` once it is released instead, or when
  /// the task is cancelled.
  func waitForLoss() async -> LiaisonError?
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
  func post(state: UInt64) async throws
  /// The state, as last set.
  var state: UInt64 { get async throws }
  /// How many posts the signal has had in all (0 before any): the ``SignalNotification/sequence``
  /// of the latest post, a starting point no later post can slip past.
  var sequence: UInt64 { get async throws }
  /// The notifications: after every post, at least one notification that carries a state no
  /// older than that post's; posts close together may be delivered as one.
  func notifications(ignoringOwnPosts: Bool) async throws -> Notifications
}
