import Liaison

extension SharedDefaults {
  /// The value of `key` now, then each new value (`nil` when removed), as an `AsyncSequence`.
  ///
  /// Changes in quick succession may coalesce into the latest; consecutive elements differ.
  /// Ending the iteration ends the watch.
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

    /// The next different value; `nil` (the end) when the iteration is cancelled or the value
    /// cannot be read (a damaged store, or a value of another type).
    public mutating func next() async -> Value?? {
      while true {
        if last != nil {
          guard await notifications.next() != nil else { return nil }
        }
        let value: Value?
        do {
          value = try defaults.get(key)
        } catch {
          return nil  // `try?` would not do: it would take a missing value (nil) for an error
        }
        if last == nil || last! != value {
          last = .some(value)
          return .some(value)
        }
      }
    }
  }
}
