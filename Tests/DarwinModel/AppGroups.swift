// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  import Foundation

  extension FileManager {
    /// The container of the App Group `identifier`, or `nil` when this process is not entitled to
    /// it, as on iOS. The model's entitlement is the environment variable
    /// `LIAISON_DARWIN_MODEL_APP_GROUPS` (identifiers separated by commas), and a group's container
    /// is a folder of the model's, made at the first call as the system makes it. The corresponding Darwin
    /// method is `containerURL(forSecurityApplicationGroupIdentifier:)`.
    public func containerURL(forSecurityApplicationGroupIdentifier identifier: String) -> URL? {
      let entitled = (ProcessInfo.processInfo.environment["LIAISON_DARWIN_MODEL_APP_GROUPS"] ?? "")
        .split(separator: ",").map(String.init)
      guard entitled.contains(identifier) else { return nil }
      // The system makes a group's container before any of its processes asks for it.
      let path = DarwinModelFiles.folder + "/app-groups/" + identifier
      try? createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
      return URL(fileURLWithPath: path)
    }
  }
#endif
