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
          let read: Result<Value?, LiaisonError>
          do throws(LiaisonError) {
            read = .success(try await defaults.get(key))
          } catch {
            read = .failure(error)
          }
          // Through the weak reference: the rest below must not keep a released model alive.
          if await self?.show(read) == nil { return }
          await ModelFollowing.rest(updateInterval, on: clock)
        }
      } catch {
        await self?.show(.failure(.from(error, doing: "follow the domain '\(defaults.domain)'")))
      }
    }
  }

  /// Writes `newValue` for every process (`nil` removes the value), after the writes this model
  /// started before it; ``value`` shows it once it is stored.
  ///
  /// A view calls it without `await` and reads a failure in ``error``; code that must know awaits
  /// the returned task: `try await theme.set("dark").value` throws the ``LiaisonError``.
  @discardableResult
  public func set(_ newValue: Value?) -> Task<Void, any Error> {
    let (defaults, key, previous) = (defaults, key, lastWrite)
    let write = Task { @MainActor [weak self] in
      _ = await previous?.result
      do throws(LiaisonError) {
        if let newValue {
          try await defaults.set(newValue, for: key, timeout: nil)
        } else {
          try await defaults.remove(key, timeout: nil)
        }
        self?.show(.success(newValue))
      } catch {
        self?.error = error
        throw error
      }
    }
    lastWrite = write
    return write
  }

  /// Replaces the value with `transform(old)` atomically across processes (see
  /// ``CoordinationDefaults/update(_:timeout:isolation:_:)``), on the main actor; returns the
  /// new value, which ``value`` shows.
  ///
  /// - Throws: what `transform` throws (nothing is written then), or a ``LiaisonError``.
  @discardableResult
  public func update(_ transform: (Value?) throws -> Value?) async throws -> Value? {
    _ = await lastWrite?.result
    do {
      let updated = try await defaults.update(key, timeout: nil, isolation: MainActor.shared, transform)
      show(.success(updated))
      return updated
    } catch let error as LiaisonError {
      self.error = error
      throw error
    }
  }

  private func show(_ read: Result<Value?, LiaisonError>) {
    switch read {
    case .success(let newValue):
      value = newValue
      updateCount += 1
      error = nil
    case .failure(let failure):
      error = failure
    }
  }
}
