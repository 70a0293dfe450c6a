import Observation  // @available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *): the model below

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
/// a thousand writes by another process is a few updates, the last of which shows the last write;
/// a write to another key of the domain is none. The model follows its key until it is released:
/// then its task ends, and so does its watch.
///
/// From iOS 16, a view shows a shared value with the view property `SharedValue`
/// (LiaisonSwiftUI), which needs no model.
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor
public final class ObservedValue<Defaults: CoordinationDefaults, Value: Codable & Sendable>: Observable {
  /// The key's value as the store has it, `nil` when it has none; updated after every write by
  /// any process.
  public var value: Value? {
    registrar.access(self, keyPath: \.value)
    return follower.value
  }
  /// Why the model could not read the value or could not write it, the last time it failed;
  /// `nil` after the next success.
  public var error: LiaisonError? {
    registrar.access(self, keyPath: \.error)
    return follower.error
  }
  /// The key this model follows.
  public var key: DefaultsKey<Value> { follower.key }
  /// The domain the key is in.
  public let defaults: Defaults

  /// How many times the model has changed ``value``: what the tests read to know that a burst of
  /// writes coalesced.
  package var updateCount: Int { follower.updateCount }
  private let follower: DefaultsValueFollower<Value>
  private let registrar = ObservationRegistrar()

  /// Follows `key` in `defaults`: reads its value now, and again after every write.
  ///
  /// - Parameters:
  ///   - key: the key to follow.
  ///   - defaults: the domain the key is in.
  ///   - updateInterval: the least time between two updates (by default about a frame at 60 Hz):
  ///     what changes within it comes as one update, after it; the first change after a quiet
  ///     moment shows at once.
  /// - Throws: ``LiaisonError`` when the key cannot be read. (A domain that cannot be watched
  ///   shows in ``error``.)
  public init(
    _ key: DefaultsKey<Value>, in defaults: Defaults,
    updateInterval: Duration = .milliseconds(16)
  ) async throws(LiaisonError) {
    self.defaults = defaults
    follower = DefaultsValueFollower(
      key, in: defaults, value: try await defaults.get(key), updateInterval: updateInterval)
    follower.didChange = { [weak self] in
      guard let self else { return }
      registrar.withMutation(of: self, keyPath: \.value) {}
      registrar.withMutation(of: self, keyPath: \.error) {}
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
  public func set(_ newValue: Value?) -> Task<Void, any Error> { follower.set(newValue) }

  /// Replaces the value with `transform(old)` atomically across processes (see
  /// ``CoordinationDefaults/update(_:timeout:isolation:_:)``), after the writes this model started
  /// before it; returns the new value. `transform` runs off the main actor, while the store holds
  /// the domain's write lock: a busy main thread never holds up other processes' writes.
  ///
  /// - Throws: what `transform` throws (nothing is written then), or a ``LiaisonError``.
  @discardableResult
  public func update(_ transform: @escaping @Sendable (Value?) throws -> Value?) async throws -> Value? {
    try await follower.update(transform)
  }
}
