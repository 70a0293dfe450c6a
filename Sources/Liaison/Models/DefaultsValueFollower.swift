#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// What a view shows of one key of a defaults domain, and how it writes it, in plain Swift: the
/// logic of ``ObservedValue`` and of LiaisonSwiftUI's `SharedValue`, which only tell SwiftUI when
/// ``value`` or ``error`` changed (``didChange``).
///
/// - Its own writes show at once (``set(_:)``), reach the store in the order they were made, and
///   once the last has returned, the store's value shows: an older completion never hides a later
///   write of another process.
/// - Another process's write shows once the follower has read the key again: the reads coalesce
///   (one per change notification, at most one per `updateInterval`), and a write to another key
///   of the domain changes nothing shown.
/// - It follows the key until it is released: then its task ends, and so does its watch.
@MainActor
package final class DefaultsValueFollower<Value: Codable & Sendable> {
  /// The key's value as the store has it (or as this follower's writes in flight make it);
  /// `nil` when it has none.
  package private(set) var value: Value?
  /// Why the follower could not read the value or could not write it, the last time it failed;
  /// `nil` after the next success.
  package private(set) var error: LiaisonError?
  /// Called after ``value`` or ``error`` changed.
  package var didChange: (@MainActor () -> Void)?
  /// How many times ``value`` has changed: what the tests read to know that a burst of writes
  /// coalesced.
  package private(set) var updateCount = 0
  package let key: DefaultsKey<Value>
  private let defaults: any CoordinationDefaults
  private let following = ModelFollowing()
  /// The last write, which the next one waits for, so that writes reach the store in order.
  private var lastWrite: Task<Void, any Error>?
  /// How many of this follower's writes have not returned yet: meanwhile ``value`` shows the last
  /// one, and what the follower reads for another process's write waits for their end.
  private var writesInFlight = 0

  /// Follows `key` in `defaults`, showing `value` (read from the store just before) until the
  /// first read: watches the domain, reads the key again (a write between the two reads is not
  /// missed), then reads it after every write.
  package init(
    _ key: DefaultsKey<Value>, in defaults: any CoordinationDefaults, value: Value?, updateInterval: Duration
  ) {
    self.key = key
    self.defaults = defaults
    self.value = value
    let clock = ModelFollowing.clock(of: defaults)
    following.start { [weak self] in
      await Self.follow(key, in: defaults, updateInterval: updateInterval, clock: clock) { [weak self] read in
        // Through the weak reference: the rest between updates must not keep a released
        // follower alive.
        await self?.showRead(read)
      }
    }
  }

  /// Watches `defaults`, then reads the key and hands the read to `show` once now, then after
  /// every change, until `show` returns `nil` (the follower is gone) or the watch fails. The key
  /// is read here, off the main actor: `show` is the one hop to it.
  private nonisolated static func follow<Defaults: CoordinationDefaults>(
    _ key: DefaultsKey<Value>, in defaults: Defaults, updateInterval: Duration, clock: LiaisonClock,
    show: @Sendable (Result<Value?, LiaisonError>) async -> Void?
  ) async {
    let changes: Defaults.Changes
    do throws(LiaisonError) {
      changes = try await defaults.changes()
    } catch {
      _ = await show(.failure(error))
      return
    }
    if await show(await read(key, in: defaults)) == nil { return }
    do {
      for try await _ in changes {
        if await show(await read(key, in: defaults)) == nil { return }
        await ModelFollowing.rest(updateInterval, on: clock)
      }
    } catch {
      _ = await show(.failure(.from(error, doing: "follow the domain '\(defaults.domain)'")))
    }
  }

  private nonisolated static func read(
    _ key: DefaultsKey<Value>, in defaults: some CoordinationDefaults
  ) async -> Result<Value?, LiaisonError> {
    do throws(LiaisonError) {
      return .success(try await defaults.get(key))
    } catch {
      return .failure(error)
    }
  }

  /// Writes `newValue` for every process (`nil` removes the value), after the writes this
  /// follower started before it; ``value`` shows it at once. See ``ObservedValue/set(_:)``.
  @discardableResult
  package func set(_ newValue: Value?) -> Task<Void, any Error> {
    show(.success(newValue))
    let (defaults, key) = (defaults, key)
    return write {
      if let newValue {
        try await defaults.set(newValue, for: key, timeout: nil)
      } else {
        try await defaults.remove(key, timeout: nil)
      }
    }
  }

  /// Replaces the value with `transform(old)` atomically across processes, after the writes this
  /// follower started before it. See ``ObservedValue/update(_:)``.
  package func update(_ transform: @escaping @Sendable (Value?) throws -> Value?) async throws -> Value? {
    let (defaults, key) = (defaults, key)
    let updated = Locked<Value?>(nil)
    try await write {
      let new = try await defaults.update(key, timeout: nil, isolation: nil, transform)
      updated.withLock { $0 = new }
    }.value
    return updated.withLock { $0 }
  }

  /// Runs `body` (a write to the store) after this follower's earlier writes, off the main actor,
  /// then shows the store's value once no write of this follower is in flight.
  private func write(_ body: @escaping @Sendable () async throws -> Void) -> Task<Void, any Error> {
    let previous = lastWrite
    writesInFlight += 1
    // The write's own task: the caller's to await (or not, from a view's action), and the next
    // write's, which waits for it. Nothing cancels it: a write runs to the store's answer, and a
    // released follower's write ends there too (`self` is then gone, and nothing shows).
    let task = Task.detached { [weak self] in
      _ = await previous?.result
      do {
        try await body()
      } catch {
        // What `update`'s transform throws is the caller's to read; the store's refusals show.
        await self?.finishWrite(failure: error as? LiaisonError)
        throw error
      }
      await self?.finishWrite(failure: nil)
    }
    lastWrite = task
    return task
  }

  /// One write of this follower returned: after the last in flight, the value shows what the
  /// store has now.
  private func finishWrite(failure: LiaisonError?) async {
    writesInFlight -= 1
    if let failure {
      error = failure
      didChange?()
    }
    guard writesInFlight == 0 else { return }
    await showStored(keepingError: failure != nil)
  }

  /// Reads the key from the store and shows it (see ``showRead(_:keepingError:)``).
  private func showStored(keepingError: Bool = false) async {
    guard writesInFlight == 0 else { return }
    showRead(await Self.read(key, in: defaults), keepingError: keepingError)
  }

  /// Shows what was read from the store, unless a write of this follower is in flight (its end
  /// reads again). Returns nothing: a `Void?` that the following task reads as "the follower is
  /// still there".
  private func showRead(_ read: Result<Value?, LiaisonError>, keepingError: Bool = false) {
    guard writesInFlight == 0 else { return }
    show(read, keepingError: keepingError)
  }

  /// Shows `read`: a value only when it differs from the one shown (an `Equatable` value; any
  /// other is shown each time), so that a write to another key of the domain changes nothing.
  private func show(_ read: Result<Value?, LiaisonError>, keepingError: Bool = false) {
    var changed = false
    switch read {
    case .success(let newValue):
      if !Self.same(value, newValue) {
        value = newValue
        updateCount += 1
        changed = true
      }
      if !keepingError, error != nil {
        error = nil
        changed = true
      }
    case .failure(let failure):
      error = failure
      changed = true
    }
    if changed { didChange?() }
  }

  /// Whether `a` and `b` are the same value: both `nil`, or equal values of an `Equatable` type.
  private static func same(_ a: Value?, _ b: Value?) -> Bool {
    switch (a, b) {
    case (nil, nil): return true
    case (let a?, let b?): return (a as? any Equatable)?.isEqual(to: b) ?? false
    default: return false
    }
  }
}

extension Equatable {
  /// Whether `other` is a value of this type equal to this one.
  fileprivate func isEqual(to other: Any) -> Bool { (other as? Self) == self }
}
