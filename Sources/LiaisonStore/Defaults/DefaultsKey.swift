import Liaison

/// The name and type of a value in ``SharedDefaults``.
///
/// ```swift
/// extension DefaultsKey where Value == OAuthToken {
///   static let token = DefaultsKey("oauth-token")
/// }
/// let token = try defaults.get(.token)
/// ```
public struct DefaultsKey<Value: Codable & Sendable>: Sendable, Hashable {
  /// The key's name, following ``/Liaison/LiaisonName/rule``.
  public let name: LiaisonName

  /// A key whose name is written in the source. A name that breaks ``/Liaison/LiaisonName/rule`` is a
  /// programming error and stops the program with the rule in the message.
  public init(_ name: StaticString) {
    do {
      self.name = try LiaisonName(name.description)
    } catch {
      preconditionFailure(error.message)
    }
  }

  /// A key whose name comes from outside (user input, a file): validated, throwing
  /// ``/Liaison/LiaisonError/Code/invalidName`` when it breaks the rule.
  public init(validating name: String) throws(LiaisonError) {
    self.name = try LiaisonName(name)
  }
}
