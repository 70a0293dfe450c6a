// Apple platforms only: the container of an App Group. Written against
// `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)` and, on macOS, Security's
// `SecTask` entitlement calls as documented, checked here by .ci/apple-check and built by the
// macOS workflow; in Liaison's CI, run against the Darwin model's `containerURL` (the trait
// `DarwinModel`, Tests/DarwinModel).
#if canImport(Darwin) || DarwinModel
  import Foundation
  #if DarwinModel
    import DarwinModel
  #endif
  #if os(macOS) || targetEnvironment(macCatalyst)
    import Security
  #endif

  extension SharedContainer {
    /// Opens the container of the App Group `identifier`, which an app and its extensions share.
    ///
    /// ```swift
    /// let container = try SharedContainer(appGroup: "group.com.example.notes")
    /// ```
    ///
    /// - Throws: ``LiaisonError/Code/invalidArgument`` when this process is not entitled to the
    ///   group: the target's App Groups entitlement does not list it, or it is misspelt. On iOS
    ///   the system then knows no container for it; on macOS the system returns a path whatever
    ///   the identifier (as Apple documents), so Liaison reads the process's entitlement itself
    ///   rather than create a folder that the sandbox refuses later, or that no other process uses.
    public convenience init(appGroup identifier: String) throws(LiaisonError) {
      let url = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: identifier)
      guard let url, Self.isEntitled(toAppGroup: identifier) else {
        throw LiaisonError(
          .invalidArgument,
          "This process is not entitled to the App Group '\(identifier)'. Add the group to the App Groups "
            + "entitlement (com.apple.security.application-groups) of every target that uses it, and check its spelling."
        )
      }
      try self.init(directory: url.path)
    }

    /// Whether the App Groups entitlement of this process lists `identifier`. Only macOS needs the
    /// check (elsewhere the system returns no container for a group the process is not entitled to).
    private static func isEntitled(toAppGroup identifier: String) -> Bool {
      #if os(macOS) || targetEnvironment(macCatalyst)
        guard let task = SecTaskCreateFromSelf(nil) else { return false }
        let value = SecTaskCopyValueForEntitlement(task, "com.apple.security.application-groups" as CFString, nil)
        return (value as? [String])?.contains(identifier) ?? false
      #else
        return true
      #endif
    }
  }
#endif
