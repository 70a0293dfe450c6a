// Apple platforms only: the container of an App Group. Not compiled on Linux, so CI does not
// build it; it is written against `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)`
// as documented.
#if canImport(Darwin)
  import Foundation

  extension SharedContainer {
    /// Opens the container of the App Group `identifier`, which an app and its extensions share.
    ///
    /// ```swift
    /// let container = try SharedContainer(appGroup: "group.com.example.notes")
    /// ```
    ///
    /// - Throws: ``LiaisonError/Code/invalidArgument`` when the system knows no container for
    ///   that group, which usually means the target's App Groups entitlement does not list it.
    public convenience init(appGroup identifier: String) throws(LiaisonError) {
      guard let url = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: identifier) else {
        throw LiaisonError(
          .invalidArgument,
          "There is no App Group container for '\(identifier)'. Add the group to the App Groups "
            + "entitlement of every target that uses it, and check its spelling.")
      }
      try self.init(directory: url.path)
    }
  }
#endif
