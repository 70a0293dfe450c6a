import SystemPackage

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The directory where cooperating processes meet.
///
/// Every part of Liaison lives in a container: locks, presences, and later signals and stores.
/// Liaison keeps its files in one hidden folder, `.liaison`, created 0700 with files 0600, and
/// opens each one relative to that folder with `O_NOFOLLOW`, so a planted symbolic link is
/// refused rather than followed.
///
/// ```swift
/// let container = try SharedContainer(directory: "/var/run/myapp")
/// let recording = try container.presence("recording")
/// if try recording.isActive { print("the app is recording") }
/// ```
///
/// Any number of `SharedContainer` values, in any number of processes, may refer to the same
/// directory. In one process they share one ``suspend()`` / ``resume()`` state.
public final class SharedContainer: Sendable {
  /// The environment variable that names the default container directory.
  public static let environmentVariable = "LIAISON_CONTAINER"

  /// The directory this container was opened on, as given.
  public let directory: String

  let root: PrivateFolder
  let lockFolder: PrivateFolder
  let presenceFolder: PrivateFolder
  let signalFolder: PrivateFolder
  let lifecycle: ContainerLifecycle
  /// Makes the `JSONEncoder` that values and payloads of this container are written with.
  package let makeEncoder: @Sendable () -> JSONEncoder
  /// Makes the `JSONDecoder` that they are read with.
  package let makeDecoder: @Sendable () -> JSONDecoder
  /// The clock of this container's timed decisions (its leases' expiries and renewals, its
  /// models' rests): the system's, unless a test gives a manual one.
  package let clock: LiaisonClock

  /// Opens the container at `directory`; creates the directory (0700, with any missing parents)
  /// only when `createIfMissing` says so.
  ///
  /// Opening never creates what it was only asked to read: a mistyped path throws, rather than
  /// making an empty container in which every presence looks stopped. Liaison's own folder inside
  /// it, `.liaison`, is made on first use.
  ///
  /// The path itself may contain symbolic links (it is the caller's choice); everything inside
  /// Liaison's private folder is opened without following any.
  ///
  /// - Parameters:
  ///   - directory: the folder the processes share.
  ///   - createIfMissing: whether to create the folder when it does not exist.
  ///   - encoder: makes the `JSONEncoder` that shared defaults' values and mailboxes' payloads are
  ///     written with (a date or key strategy of your choosing); `Int`, `Double`, `Bool`,
  ///     `String` and `Data` values are written without it. Every process sharing the folder
  ///     should use the same strategies.
  ///   - decoder: makes the `JSONDecoder` they are read with.
  /// - Throws: ``LiaisonError/Code/invalidArgument`` when `directory` does not exist (and
  ///   `createIfMissing` is `false`), is a file, or is on a network or user-space file system
  ///   (NFS, SMB, FUSE…), where file locks do not hold; ``LiaisonError`` when the directory cannot be
  ///   created or opened, or when `.liaison` inside it is not a folder of this user's.
  public convenience init(
    directory: String, createIfMissing: Bool = false,
    encoder: @escaping @Sendable () -> JSONEncoder = { JSONEncoder() },
    decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
  ) throws(LiaisonError) {
    try self.init(
      directory: directory, createIfMissing: createIfMissing, encoder: encoder, decoder: decoder, clock: .system)
  }

  /// Opens the container at `directory`, with `clock` for its timed decisions (a manual clock in
  /// the tests).
  package init(
    directory: String, createIfMissing: Bool = false,
    encoder: @escaping @Sendable () -> JSONEncoder = { JSONEncoder() },
    decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }, clock: LiaisonClock
  ) throws(LiaisonError) {
    guard !directory.isEmpty else {
      throw LiaisonError(.invalidArgument, "The container directory is empty; give the path of a folder.")
    }
    guard !directory.utf8.contains(0) else {
      throw LiaisonError(.invalidArgument, "The container directory contains a NUL byte; give the path of a folder.")
    }
    self.directory = directory
    self.clock = clock
    makeEncoder = encoder
    makeDecoder = decoder
    if createIfMissing { try Self.makeDirectories(directory) }
    let parent = retryOnInterrupt { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    guard parent >= 0 else {
      let error = currentErrno()
      if error == .noSuchFileOrDirectory {
        throw LiaisonError(
          .invalidArgument,
          "The container folder '\(directory)' does not exist. Check the path; to create it, open it with "
            + "`SharedContainer(directory:createIfMissing: true)`.", errno: error, path: directory)
      }
      if error == .notDirectory {
        throw LiaisonError(
          .invalidArgument, "The container '\(directory)' is a file, not a folder; give the path of a folder.",
          errno: error, path: directory)
      }
      throw LiaisonError.system(error, "open the container folder", path: directory)
    }
    defer { Syscall.close(parent) }
    if let fileSystem = FileSystems.unsupported(parent) { throw FileSystems.refusal(fileSystem, path: directory) }
    root = try PrivateFolder.open(ContainerLayout.root, in: parent, parentPath: directory)
    lockFolder = try root.subfolder(ContainerLayout.Folder.locks.rawValue)
    presenceFolder = try root.subfolder(ContainerLayout.Folder.presence.rawValue)
    signalFolder = try root.subfolder(ContainerLayout.Folder.signals.rawValue)
    lifecycle = try ContainerLifecycle.shared(for: root)
  }

  /// How many watches of this container are in place in this process now: one per sequence,
  /// observation, receiver and model that follows a signal, a domain, a mailbox or a presence of
  /// it, until it ends. Shared by every `SharedContainer` value on the same folder.
  package var liveWatchCount: Int { lifecycle.watches.withLock { $0 } }

  /// Opens the default container: the directory named by `LIAISON_CONTAINER` if it is set,
  /// else ``defaultDirectory``.
  public static func standard() throws(LiaisonError) -> SharedContainer {
    try SharedContainer(directory: standardDirectory, createIfMissing: true)
  }

  /// A new, empty container in a folder of its own under the system's temporary folder, for a
  /// SwiftUI preview or a test: `ContentView().liaisonContainer(try .temporary())`. Nothing
  /// removes the folder: the system cleans its temporary folder as it does for other files.
  ///
  /// - Throws: ``LiaisonError`` when the folder cannot be created.
  public static func temporary() throws(LiaisonError) -> SharedContainer {
    let parent = FileManager.default.temporaryDirectory.path
    var template = Array((parent + "/liaison-XXXXXX").utf8CString)
    // mkdtemp makes the folder with mode 0700, under a name nobody else has.
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
      throw LiaisonError.system(currentErrno(), "create a temporary container folder", path: parent)
    }
    return try SharedContainer(
      directory: String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self))
  }

  /// The directory ``standard()`` opens: `$LIAISON_CONTAINER` if set and not empty, else
  /// ``defaultDirectory``.
  public static var standardDirectory: String {
    if let value = getenv(environmentVariable), value.pointee != 0 {
      return String(cString: value)
    }
    return defaultDirectory
  }

  /// The per-user default: `$XDG_DATA_HOME/liaison` (or `~/.local/share/liaison`) on Linux,
  /// `~/Library/Application Support/Liaison` on Apple platforms.
  public static var defaultDirectory: String {
    func environment(_ name: String) -> String? {
      guard let value = getenv(name), value.pointee != 0 else { return nil }
      return String(cString: value)
    }
    let home = environment("HOME") ?? "/tmp"
    #if canImport(Darwin)
      return home + "/Library/Application Support/Liaison"
    #else
      return (environment("XDG_DATA_HOME") ?? home + "/.local/share") + "/liaison"
    #endif
  }

  /// Opens (creating it 0700) a folder of Liaison's inside the private folder, for modules of
  /// this package (the store keeps its databases there).
  package func privateFolder(_ folder: ContainerLayout.Folder) throws(LiaisonError) -> PrivateFolder {
    try root.subfolder(folder.rawValue)
  }

  /// Opens a folder of Liaison's inside the private folder if it exists, creating nothing (for
  /// listings that must leave the container as they found it).
  package func existingPrivateFolder(_ folder: ContainerLayout.Folder) throws(LiaisonError) -> PrivateFolder? {
    try PrivateFolder.openIfExists(folder.rawValue, in: root.descriptor, parentPath: root.path)
  }

  /// The exclusive-or-shared lock called `name`.
  ///
  /// - Throws: ``LiaisonError/Code/invalidName`` when `name` breaks the naming rule.
  public func lock(_ name: String) throws(LiaisonError) -> ProcessLock {
    ProcessLock(name: try LiaisonName(name), container: self)
  }

  /// The presence called `name`: whether a feature is running, and who runs it.
  ///
  /// - Throws: ``LiaisonError/Code/invalidName`` when `name` breaks the naming rule.
  public func presence(_ name: String) throws(LiaisonError) -> Presence {
    Presence(name: try LiaisonName(name), container: self)
  }

  /// Creates `path` and any missing parents, each 0700: only the missing tail. The folders that
  /// exist are not touched, not even by a `mkdir` that would fail: inside the iOS sandbox one on a
  /// folder above the container is refused (`EPERM`, not `EEXIST`) or reported as a violation.
  private static func makeDirectories(_ path: String) throws(LiaisonError) {
    let components = path.split(separator: "/")
    let root = path.hasPrefix("/") ? "/" : ""
    func prefix(_ count: Int) -> String { root + components.prefix(count).joined(separator: "/") }
    // The longest prefix known to exist; an error other than "missing" stops the search, and the
    // mkdir below then reports it.
    var existing = components.count
    var info = stat()
    while existing > 0 && stat(prefix(existing), &info) != 0 && errno == ENOENT { existing -= 1 }
    guard existing < components.count else { return }
    for count in (existing + 1)...components.count where mkdir(prefix(count), 0o700) != 0 && errno != EEXIST {
      throw LiaisonError.system(currentErrno(), "create the container folder", path: prefix(count))
    }
  }
}
