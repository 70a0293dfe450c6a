import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the models below

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// One key of a defaults domain as an `@Observable` model for a view: ``value`` follows every
/// process's writes, on the main actor, and ``set(_:)`` writes to the store.
///
/// ```swift
/// let theme = try await ObservedValue(DefaultsKey<String>("theme"), in: try await place.defaults("settings"))
/// Text(theme.value ?? "system")            // updates when any process writes the key
/// Button("Dark") { theme.set("dark") }     // no `await` in a view's action
/// ```
///
/// Updates coalesce: the model reads the key again once per change notification, and
/// notifications that arrive while it reads or while the main actor is busy become one. A burst of
/// a thousand writes by another process is a few updates, the last of which shows the last write.
/// The model follows its key until it is released: then its task ends, and so does its watch.
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor @Observable
public final class ObservedValue<Defaults: CoordinationDefaults, Value: Codable & Sendable> {
  /// The key's value as the store has it, `nil` when it has none; updated after every write by
  /// any process.
  public private(set) var value: Value?
  /// Why the model could not read the value or could not write it, the last time it failed;
  /// `nil` after the next success.
  public private(set) var error: LiaisonError?
  /// The key this model follows.
  public let key: DefaultsKey<Value>
  /// The domain the key is in.
  public let defaults: Defaults

  /// How many times the model has set ``value``: what the tests read to know that a burst of
  /// writes coalesced.
  @ObservationIgnored package private(set) var updateCount = 0
  @ObservationIgnored private let following = ModelFollowing()
  /// The last write, which the next one waits for, so that writes reach the store in order.
  @ObservationIgnored private var lastWrite: Task<Void, any Error>?
  /// How many of this model's writes have not returned yet: meanwhile ``value`` shows the last
  /// one, and what the model reads for another process's write waits for their end.
  @ObservationIgnored private var writesInFlight = 0

  /// Follows `key` in `defaults`: reads its value now, and again after every write.
  ///
  /// - Parameters:
  ///   - key: the key to follow.
  ///   - defaults: the domain the key is in.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz):
  ///     what changes within it comes as one update, after it; the first change after a quiet
  ///     moment shows at once.
  /// - Throws: ``LiaisonError`` when the domain cannot be watched or read.
  public init(
    _ key: DefaultsKey<Value>, in defaults: Defaults,
    updateInterval: Duration = .milliseconds(16)
  ) async throws(LiaisonError) {
    self.key = key
    self.defaults = defaults
    // Watching first, then reading: a write after the read is never missed.
    let changes = try await defaults.changes()
    value = try await defaults.get(key)
    let clock = ModelFollowing.clock(of: defaults)
    following.start { [weak self] in
      do {
        for try await _ in changes {
          // Through the weak reference: the rest below must not keep a released model alive.
          if await self?.showStored() == nil { return }
          await ModelFollowing.rest(updateInterval, on: clock)
        }
      } catch {
        await self?.show(.failure(.from(error, doing: "follow the domain '\(defaults.domain)'")))
      }
    }
  }

  /// Writes `newValue` for every process (`nil` removes the value), after the writes this model
  /// started before it. ``value`` shows it at once; once the store has answered, ``value`` shows
  /// the store's value: this write's, or a later one of another process. A refused write (a
  /// value over the size limit, a timeout) shows in ``error``, and ``value`` goes back to the
  /// store's.
  ///
  /// A view calls it without `await`; code that must know awaits the returned task:
  /// `try await theme.set("dark").value` throws the ``LiaisonError``.
  @discardableResult
  public func set(_ newValue: Value?) -> Task<Void, any Error> {
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

  /// Replaces the value with `transform(old)` atomically across processes (see
  /// ``CoordinationDefaults/update(_:timeout:isolation:_:)``), after the writes this model started
  /// before it; returns the new value. `transform` runs off the main actor, while the store holds
  /// the domain's write lock: a busy main thread never holds up other processes' writes.
  ///
  /// - Throws: what `transform` throws (nothing is written then), or a ``LiaisonError``.
  @discardableResult
  public func update(_ transform: @escaping @Sendable (Value?) throws -> Value?) async throws -> Value? {
    let (defaults, key) = (defaults, key)
    let updated = Locked<Value?>(nil)
    try await write {
      let new = try await defaults.update(key, timeout: nil, isolation: nil, transform)
      updated.withLock { $0 = new }
    }.value
    return updated.withLock { $0 }
  }

  /// Runs `body` (a write to the store) after this model's earlier writes, off the main actor,
  /// then shows the store's value once no write of this model is in flight.
  private func write(_ body: @escaping @Sendable () async throws -> Void) -> Task<Void, any Error> {
    let previous = lastWrite
    writesInFlight += 1
    // The write's own task: the caller's to await (or not, from a view's action), and the next
    // write's, which waits for it. Nothing cancels it: a write runs to the store's answer, and a
    // released model's write ends there too (`self` is then gone, and nothing shows).
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

  /// One write of this model returned: after the last in flight, the value shows what the store
  /// has now (an older completion never hides a later write of another process).
  private func finishWrite(failure: LiaisonError?) async {
    writesInFlight -= 1
    if let failure { error = failure }
    guard writesInFlight == 0 else { return }
    await showStored(keepingError: failure != nil)
  }

  /// Reads the key from the store and shows it, unless a write of this model is in flight (its
  /// end reads again). Returns nothing: a `Void?` that the following task reads as "the model is
  /// still there".
  private func showStored(keepingError: Bool = false) async {
    guard writesInFlight == 0 else { return }
    let read: Result<Value?, LiaisonError>
    do throws(LiaisonError) {
      read = .success(try await defaults.get(key))
    } catch {
      read = .failure(error)
    }
    // A write may have begun while the store was read: it shows its own value, then reads again.
    guard writesInFlight == 0 else { return }
    show(read, keepingError: keepingError)
  }

  /// Shows `read`: a value only when it differs from the one shown (an `Equatable` value; any
  /// other is shown each time), so that a write to another key of the domain redraws nothing.
  private func show(_ read: Result<Value?, LiaisonError>, keepingError: Bool = false) {
    switch read {
    case .success(let newValue):
      if !Self.same(value, newValue) {
        value = newValue
        updateCount += 1
      }
      if !keepingError, error != nil { error = nil }
    case .failure(let failure):
      error = failure
    }
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
