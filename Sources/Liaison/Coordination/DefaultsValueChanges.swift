extension CoordinationDefaults {
  /// The value of `key` now, then each new value (`nil` when removed), as an `AsyncSequence`, on
  /// every backend.
  ///
  /// Changes in quick succession may coalesce into the latest; consecutive elements differ.
  /// Ending the iteration ends the watch. Iteration throws when the value cannot be read (a
  /// damaged store, or a value of another type), as GRDB's `values(in:)` does:
  ///
  /// ```swift
  /// for try await theme in try await defaults.changes(of: DefaultsKey<String>("theme")) { apply(theme) }
  /// ```
  public func changes<Value: Equatable>(of key: DefaultsKey<Value>) async throws(LiaisonError)
    -> DefaultsValueChanges<Self, Value>
  {
    DefaultsValueChanges(defaults: self, key: key, notifications: try await changes())
  }
}

/// The values of one key over time: see ``CoordinationDefaults/changes(of:)``.
public struct DefaultsValueChanges<Defaults: CoordinationDefaults, Value: Codable & Sendable & Equatable>:
  AsyncSequence, Sendable
{
  public typealias Element = Value?

  let defaults: Defaults
  let key: DefaultsKey<Value>
  let notifications: Defaults.Changes

  public func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(defaults: defaults, key: key, notifications: notifications.makeAsyncIterator())
  }

  /// The iterator of a ``DefaultsValueChanges``.
  public struct AsyncIterator: AsyncIteratorProtocol {
    let defaults: Defaults
    let key: DefaultsKey<Value>
    var notifications: Defaults.Changes.AsyncIterator
    var last: Value??

    /// The next different value; `nil` (the end) when the iteration is cancelled.
    ///
    /// - Throws: the ``LiaisonError`` of a value that cannot be read (a damaged store, or a value
    ///   of another type), or of notifications that failed.
    public mutating func next() async throws(LiaisonError) -> Value?? {
      while true {
        if last != nil {
          do {
            guard try await notifications.next() != nil else { return nil }
          } catch let error as LiaisonError {
            throw error
          } catch {
            return nil  // cancelled
          }
        }
        let value = try await defaults.get(key)
        if last == nil || last! != value {
          last = .some(value)
          return .some(value)
        }
      }
    }
  }
}
