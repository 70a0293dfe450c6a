import Liaison

extension SharedDefaults {
  /// The value of `key` now, then each new value (`nil` when removed), as an `AsyncSequence`.
  ///
  /// Changes in quick succession may coalesce into the latest; consecutive elements differ.
  /// Ending the iteration ends the watch. Iteration throws when the value cannot be read (a
  /// damaged store, or a value of another type), as GRDB's `values(in:)` does:
  ///
  /// ```swift
  /// for try await theme in try defaults.changes(of: DefaultsKey<String>("theme")) { apply(theme) }
  /// ```
  public func changes<Value: Equatable>(of key: DefaultsKey<Value>) throws(LiaisonError) -> DefaultsValueChanges<Value>
  {
    DefaultsValueChanges(defaults: self, key: key, notifications: try changes())
  }
}

/// The values of one key over time: see ``SharedDefaults/changes(of:)``.
public struct DefaultsValueChanges<Value: Codable & Sendable & Equatable>: AsyncSequence, Sendable {
  public typealias Element = Value?

  let defaults: SharedDefaults
  let key: DefaultsKey<Value>
  let notifications: SignalNotifications

  public func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(defaults: defaults, key: key, notifications: notifications.makeAsyncIterator())
  }

  public struct AsyncIterator: AsyncIteratorProtocol {
    let defaults: SharedDefaults
    let key: DefaultsKey<Value>
    var notifications: SignalNotifications.AsyncIterator
    var last: Value??

    /// The next different value; `nil` (the end) when the iteration is cancelled.
    ///
    /// - Throws: the ``/Liaison/LiaisonError`` of a value that cannot be read (a damaged store, or a
    ///   value of another type).
    public mutating func next() async throws -> Value?? {
      while true {
        if last != nil {
          guard await notifications.next() != nil else { return nil }
        }
        let value = try defaults.get(key)
        if last == nil || last! != value {
          last = .some(value)
          return .some(value)
        }
      }
    }
  }
}
