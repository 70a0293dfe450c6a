import Foundation
import Liaison
import LiaisonTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A kind of file that the `Liaison` module keeps in a container.
enum ContainerFile: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case lock
  case presence
  case signal

  /// The folder of `.liaison` that holds this kind of file.
  var folder: String {
    switch self {
    case .lock: "locks"
    case .presence: "presence"
    case .signal: "signals"
    }
  }

  /// The path of the file called `name` in the container `directory`.
  func path(_ name: String = "subject", in directory: String) -> String {
    "\(directory)/.liaison/\(folder)/\(name)"
  }

  /// Makes the file called `name` the way Liaison does, and lets go of it.
  func make(_ name: String = "subject", in container: SharedContainer) throws {
    switch self {
    case .lock: _ = try container.lock(name).tryLock()
    case .presence: try container.presence(name).claim().release()
    case .signal: try container.signal(name).post(state: 42)
    }
  }

  /// Uses the file called `name` as a process would: takes the lock, claims the presence, posts
  /// the signal.
  func use(_ name: String = "subject", in container: SharedContainer) throws {
    switch self {
    case .lock: _ = try container.lock(name).tryLock()
    case .presence: _ = try container.presence(name).claim()
    case .signal: try container.signal(name).post()
    }
  }

  /// Has `peer` use the file called `name`; returns the peer's whole answer.
  func use(by peer: UnprivilegedPeer, name: String = "subject") throws -> String {
    switch self {
    case .lock: try peer.ask(.trylock, name)
    case .presence: try peer.ask(.claim, name)
    case .signal: try peer.ask(.post, name)
    }
  }

  var testDescription: String { "\(rawValue) file" }
}

/// A folder of a container: the container itself, Liaison's `.liaison`, or one of its folders.
enum ContainerFolder: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case container
  case liaison = ".liaison"
  case locks
  case presence
  case signals

  func path(in directory: String) -> String {
    switch self {
    case .container: directory
    case .liaison: directory + "/.liaison"
    default: directory + "/.liaison/" + rawValue
    }
  }

  /// Liaison's own folders: everything but the container.
  static let liaisonFolders: [ContainerFolder] = [.liaison, .locks, .presence, .signals]

  var testDescription: String { rawValue == "container" ? "the container folder" : "'\(rawValue)'" }
}

/// Whether `error` is a `LiaisonError` with `code` whose path is `path`, and whose message names
/// `path` and says `phrase`.
func isError(_ error: any Error, _ code: LiaisonError.Code, naming path: String, saying phrase: String = "") -> Bool {
  guard let error = error as? LiaisonError else { return false }
  return error.code == code && error.path == path && error.message.contains(path)
    && (phrase.isEmpty || error.message.contains(phrase))
}

/// Every hostile case the threat model lists, for every file and folder of the `Liaison` module:
/// each ends in a `LiaisonError` that names the file and the fix, or in a documented recovery.
/// The store's files have their own suite, `HostileStoreFileTests`.
@Suite("Hostile files: locks, presences, signals and their folders")
struct HostileFileTests {
  let directory = TemporaryDirectory()

  // MARK: Damaged content

  @Test func garbageInALockFileIsIgnoredAndLeftAsItIs() throws {
    let container = try SharedContainer(directory: directory.path)
    try ContainerFile.lock.make(in: container)
    let file = ContainerFile.lock.path(in: directory.path)
    try overwrite(file, with: garbage(count: 100))
    let held = try #require(try container.lock("subject").tryLock())
    #expect(try container.lock("subject").tryLock() == nil)
    held.unlock()
    #expect(try fileBytes(file) == garbage(count: 100))
  }

  @Test(arguments: ContainerFile.allCases)
  func aZeroLengthFileIsTheFreshState(_ kind: ContainerFile) throws {
    let container = try SharedContainer(directory: directory.path)
    try kind.make(in: container)
    try truncateFile(kind.path(in: directory.path), to: 0)
    switch kind {
    case .lock:
      #expect(try container.lock("subject").tryLock() != nil)
    case .presence:
      let presence = try container.presence("subject")
      #expect(try !presence.isActive)
      #expect(try presence.holder == nil)
      let claim = try presence.claim()
      #expect(try presence.holder?.processID == getpid())
      claim.release()
    case .signal:
      let signal = try container.signal("subject")
      #expect(try signal.state == 0)  // a signal never posted
      try signal.post(state: 7)
      #expect(try signal.state == 7)
    }
  }

  /// A presence record that is cut short, garbage, or too long is no holder: the presence reads
  /// inactive (its lock is free), and the next claim replaces the record.
  @Test(arguments: ["truncated", "garbage", "oversized"])
  func aDamagedPresenceRecordReadsInactiveAndTheNextClaimReplacesIt(_ damage: String) throws {
    let container = try SharedContainer(directory: directory.path)
    let presence = try container.presence("subject")
    let file = ContainerFile.presence.path(in: directory.path)
    let claim = try presence.claim(info: "a record to damage")
    let record = try fileBytes(file)
    claim.release()
    switch damage {
    case "truncated": try overwrite(file, with: Array(record.prefix(record.count / 2)))
    case "garbage": try overwrite(file, with: garbage(count: 200))
    default: try overwrite(file, with: Array(repeating: UInt8(ascii: "x"), count: 5000) + [UInt8(ascii: "\n")])
    }
    #expect(try !presence.isActive)
    #expect(try presence.holder == nil)
    let next = try presence.claim(info: "next")
    #expect(try presence.holder?.info == "next")
    next.release()
  }

  /// A damaged record whose file is `flock`-ed by a program that is not Liaison: looks read no
  /// holder (a claim of Liaison's marks its file), and a claim is refused without touching it.
  @Test func aDamagedPresenceRecordUnderAnotherProgramsLockReadsAsNobody() throws {
    let container = try SharedContainer(directory: directory.path)
    try ContainerFile.presence.make(in: container)
    let file = ContainerFile.presence.path(in: directory.path)
    try overwrite(file, with: garbage(count: 200))
    let other = open(file, O_RDWR | O_CLOEXEC)
    #expect(other >= 0)
    defer { close(other) }
    #expect(flock(other, LOCK_EX) == 0)

    let presence = try container.presence("subject")
    // Not marked as a claim's (see Presence.look), with no record to name one: nobody is there,
    // and a look takes no lock.
    #expect(try !presence.isActive)
    #expect(try presence.holder == nil)
    // A claim needs the lock, which the other program has: refused, the file left as it is.
    #expect { _ = try presence.claim() } throws: { isError($0, .alreadyClaimed, naming: file) }
    #expect(try fileBytes(file) == garbage(count: 200))
  }

  /// A signal file holds only the signal's sequence and state; a damaged one is refused (never
  /// silently reset to 0), by readers and posters alike, until it is removed.
  @Test(arguments: ["truncated", "garbage", "oversized"])
  func aDamagedSignalFileIsACorruptFileError(_ damage: String) throws {
    let container = try SharedContainer(directory: directory.path)
    try ContainerFile.signal.make(in: container)
    let file = ContainerFile.signal.path(in: directory.path)
    let record = try fileBytes(file)
    switch damage {
    case "truncated": try overwrite(file, with: Array(record.prefix(10)))
    case "garbage": try overwrite(file, with: garbage(count: record.count))
    default: try overwrite(file, with: record + record)
    }
    let damaged = try fileBytes(file)
    let signal = try container.signal("subject")
    let attempts: [() throws -> Void] = [
      { _ = try signal.state }, { try signal.post() }, { try signal.post(state: 1) }, { try signal.setState(1) },
      { _ = try signal.notifications() },
    ]
    for attempt in attempts {
      #expect { try attempt() } throws: { isError($0, .corruptFile, naming: file) }
    }
    #expect(try fileBytes(file) == damaged)
  }

  // MARK: Files in place of folders

  @Test(arguments: ContainerFolder.allCases)
  func aFileInPlaceOfAFolderIsRefused(_ folder: ContainerFolder) throws {
    let path = folder == .container ? directory.path + "/file" : folder.path(in: directory.path)
    if folder != .container {
      _ = try SharedContainer(directory: directory.path)
      try FileManager.default.removeItem(atPath: path)
    }
    try writeText("not a folder", to: path)
    #expect { _ = try SharedContainer(directory: folder == .container ? path : directory.path) } throws: {
      isError($0, folder == .container ? .invalidArgument : .unsafeFile, naming: path, saying: "not a folder")
    }
    #expect(try String(contentsOfFile: path, encoding: .utf8) == "not a folder")
  }

  /// The container's path is the caller's choice, and may go through symbolic links; only inside
  /// `.liaison` are links refused.
  @Test func theContainerPathMayGoThroughASymbolicLink() throws {
    let elsewhere = TemporaryDirectory()
    try plantSymbolicLink(at: directory.path + "/link", to: elsewhere.path)
    let container = try SharedContainer(directory: directory.path + "/link")
    #expect(try container.lock("subject").tryLock() != nil)
    #expect(FileManager.default.fileExists(atPath: elsewhere.path + "/.liaison/locks/subject"))
  }

  // MARK: Owners and modes

  @Test(.enabled(if: isRoot, "giving a file to another user needs root"), arguments: ContainerFile.allCases)
  func aFileOfAnotherUserIsRefused(_ kind: ContainerFile) throws {
    let container = try SharedContainer(directory: directory.path)
    try kind.make(in: container)
    let file = kind.path(in: directory.path)
    let before = try fileBytes(file)
    try changeOwner(file, to: anotherUserID)
    #expect { try kind.use(in: container) } throws: {
      isError($0, .unsafeFile, naming: file, saying: "belongs to user \(anotherUserID)")
    }
    #expect(try fileBytes(file) == before)
  }

  @Test(.enabled(if: isRoot, "giving a folder to another user needs root"), arguments: ContainerFolder.liaisonFolders)
  func aFolderOfAnotherUserIsRefused(_ folder: ContainerFolder) throws {
    _ = try SharedContainer(directory: directory.path)
    try changeOwner(folder.path(in: directory.path), to: anotherUserID)
    #expect { _ = try SharedContainer(directory: directory.path) } throws: {
      isError($0, .unsafeFile, naming: folder.path(in: directory.path))
    }
  }

  /// The container folder is the caller's choice, like its path: it may belong to another user
  /// (a shared `/srv/app` folder, say). Liaison's own folder inside it must be this user's, 0700.
  @Test(.enabled(if: isRoot, "giving a folder to another user needs root"))
  func theContainerFolderMayBelongToAnotherUser() throws {
    try changeOwner(directory.path, to: anotherUserID)
    let container = try SharedContainer(directory: directory.path)
    #expect(try container.lock("subject").tryLock() != nil)
    #expect(try owner(directory.path + "/.liaison") == geteuid())
    #expect(try permissionBits(directory.path + "/.liaison") == 0o700)
  }

  @Test(arguments: ContainerFile.allCases)
  func looseModesOnAFileAreTightened(_ kind: ContainerFile) throws {
    let container = try SharedContainer(directory: directory.path)
    try kind.make(in: container)
    let file = kind.path(in: directory.path)
    try setPermissions(file, 0o666)
    try kind.use(in: try SharedContainer(directory: directory.path))
    #expect(try permissionBits(file) == 0o600)
  }

  @Test(arguments: ContainerFolder.liaisonFolders)
  func looseModesOnAFolderAreTightened(_ folder: ContainerFolder) throws {
    _ = try SharedContainer(directory: directory.path)
    try setPermissions(folder.path(in: directory.path), 0o777)
    _ = try SharedContainer(directory: directory.path)
    #expect(try permissionBits(folder.path(in: directory.path)) == 0o700)
  }

  // MARK: Planted links

  @Test(arguments: ContainerFile.allCases)
  func aSymbolicLinkInPlaceOfAFileIsRefusedAndItsTargetUntouched(_ kind: ContainerFile) throws {
    let container = try SharedContainer(directory: directory.path)
    let target = directory.path + "/precious"
    try writeText("precious", to: target)
    try plantSymbolicLink(at: kind.path(in: directory.path), to: target)
    #expect { try kind.use(in: container) } throws: { isError($0, .unsafeFile, naming: kind.path(in: directory.path)) }
    #expect(try String(contentsOfFile: target, encoding: .utf8) == "precious")
  }

  @Test(arguments: ContainerFolder.liaisonFolders)
  func aSymbolicLinkInPlaceOfAFolderIsRefusedAndItsTargetUntouched(_ folder: ContainerFolder) throws {
    _ = try SharedContainer(directory: directory.path)
    let elsewhere = TemporaryDirectory()
    try plantSymbolicLink(at: folder.path(in: directory.path), to: elsewhere.path)
    #expect { _ = try SharedContainer(directory: directory.path) } throws: {
      isError($0, .unsafeFile, naming: folder.path(in: directory.path))
    }
    #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
  }

  @Test(arguments: ContainerFile.allCases)
  func aHardLinkInPlaceOfAFileIsRefusedAndItsTargetUntouched(_ kind: ContainerFile) throws {
    let container = try SharedContainer(directory: directory.path)
    let target = directory.path + "/precious"
    try writeText("precious", to: target)
    try plantHardLink(at: kind.path(in: directory.path), to: target)
    #expect { try kind.use(in: container) } throws: {
      isError($0, .unsafeFile, naming: kind.path(in: directory.path), saying: "hard links")
    }
    #expect(try String(contentsOfFile: target, encoding: .utf8) == "precious")
  }

  // MARK: Read-only folders

  /// Root ignores permission bits, so the process that meets the read-only folder is the test
  /// peer running as `nobody` (see `UnprivilegedPeer`), on a container that `nobody` owns. What
  /// must be created in a read-only folder fails with a ``LiaisonError/Code/readOnly`` error
  /// naming it; files that already exist there keep working.
  @Test(.enabled(if: UnprivilegedPeer.isAvailable, "needs root and setpriv"), arguments: ContainerFolder.allCases)
  func aReadOnlyFolderIsAClearErrorWhenSomethingMustBeCreatedInIt(_ folder: ContainerFolder) throws {
    let readOnly = folder.path(in: directory.path)
    var kind: ContainerFile?
    if folder != .container {
      let container = try SharedContainer(directory: directory.path)
      kind = ContainerFile.allCases.first { $0.folder == folder.rawValue }
      try kind?.make("existing", in: container)
    }
    // What the peer must create: `.liaison`, one of its folders, or a file in a folder.
    let missing: String
    switch folder {
    case .container: missing = directory.path + "/.liaison"
    case .liaison:
      missing = ContainerFolder.signals.path(in: directory.path)
      try FileManager.default.removeItem(atPath: missing)
    default: missing = kind!.path(in: directory.path)
    }
    try changeOwnerRecursively(directory.path, to: anotherUserID)
    try setPermissions(readOnly, 0o500)

    let peer = try UnprivilegedPeer(container: directory.path)
    // Reading needs nothing made (a folder that cannot be made is read as empty): the container
    // opens, and what must be made in it fails, saying that the container is read-only.
    #expect(peer.greeting.hasPrefix("ready"), "\(peer.greeting)")
    let answer = kind == nil ? try peer.ask(.post, "subject") : try kind!.use(by: peer)
    #expect(answer.hasPrefix("error read-only: "), "\(answer)")
    #expect(answer.contains(missing), "\(answer)")
    #expect(answer.contains("read-only for this process"), "\(answer)")
    if let kind {
      #expect(try kind.use(by: peer, name: "existing").hasPrefix("ok "))
    }
  }

  /// The processes sharing a container run as one user: a process of another user cannot enter
  /// `.liaison` (0700), and says whose it is, not to check permissions it has.
  @Test(.enabled(if: UnprivilegedPeer.isAvailable, "needs root and setpriv"))
  func aProcessOfAnotherUserIsRefused() throws {
    _ = try SharedContainer(directory: directory.path)
    try setPermissions(directory.path, 0o755)
    let peer = try UnprivilegedPeer(container: directory.path)
    #expect(peer.greeting.hasPrefix("error unsafe file: "), "\(peer.greeting)")
    #expect(peer.greeting.contains("'\(directory.path)/.liaison' belongs to user 0 (root)"), "\(peer.greeting)")
    #expect(peer.greeting.contains("give each user a container of its own"), "\(peer.greeting)")
    #expect(!peer.greeting.contains("Check that this process may"), "\(peer.greeting)")
  }

  /// A file of Liaison's that its owner cannot write (mode 0400): the peer, as `nobody`, cannot
  /// write it, and says which file, and that it is read-only. (Root, which ignores modes, just
  /// uses it.)
  @Test(.enabled(if: UnprivilegedPeer.isAvailable, "needs root and setpriv"), arguments: ContainerFile.allCases)
  func aReadOnlyFileIsAClearError(_ kind: ContainerFile) throws {
    try kind.make(in: try SharedContainer(directory: directory.path))
    try changeOwnerRecursively(directory.path, to: anotherUserID)
    try setPermissions(kind.path(in: directory.path), 0o400)
    let peer = try UnprivilegedPeer(container: directory.path)
    let answer = try kind.use(by: peer)
    #expect(answer.hasPrefix("error read-only: "), "\(answer)")
    #expect(answer.contains("'\(kind.path(in: directory.path))'"), "\(answer)")
    #expect(answer.contains("read-only for this process"), "\(answer)")
  }

  // MARK: Missing folders and files

  /// A folder missing when a container is opened is made again (0700): nothing else can be in
  /// a folder that is not there. A lock or presence starts free, a signal from state 0.
  @Test(arguments: ContainerFolder.allCases)
  func aFolderMissingAtOpenIsMadeAgain(_ folder: ContainerFolder) throws {
    let nested = folder == .container ? directory.path + "/not/yet" : directory.path
    if folder != .container {
      let container = try SharedContainer(directory: directory.path)
      for kind in ContainerFile.allCases { try kind.make(in: container) }
      try FileManager.default.removeItem(atPath: folder.path(in: directory.path))
    }
    let container = try SharedContainer(directory: nested, createIfMissing: true)
    for kind in ContainerFile.allCases { try kind.use(in: container) }
    #expect(try container.signal("subject").state == (folder == .presence || folder == .locks ? 42 : 0))
    #expect(try permissionBits(folder == .container ? nested : folder.path(in: directory.path)) == 0o700)
  }

  @Test(arguments: ContainerFile.allCases)
  func aFileMissingAtOpenIsMadeAgainFresh(_ kind: ContainerFile) throws {
    let container = try SharedContainer(directory: directory.path)
    try kind.make(in: container)
    try FileManager.default.removeItem(atPath: kind.path(in: directory.path))
    try kind.use(in: try SharedContainer(directory: directory.path))
    #expect(try permissionBits(kind.path(in: directory.path)) == 0o600)
    if kind == .signal { #expect(try container.signal("subject").state == 0) }
  }

  /// A folder deleted while a process uses the container is not made again under it: files it
  /// would create there would split locks and signals in two (the processes that opened the
  /// container before see the old files, those after see new ones). What it must create fails
  /// with an error that names the folder and says to restart; what it holds open keeps working.
  @Test(arguments: ContainerFile.allCases, ["the container", ".liaison", "its own folder"])
  func aFolderDeletedWhileInUseIsAClearError(_ kind: ContainerFile, _ deleted: String) throws {
    let container = try SharedContainer(directory: directory.path)
    let held = try #require(try container.lock("held").tryLock())
    let folder = directory.path + "/.liaison/" + kind.folder
    switch deleted {
    case "the container": try FileManager.default.removeItem(atPath: directory.path)
    case ".liaison": try FileManager.default.removeItem(atPath: directory.path + "/.liaison")
    default: try FileManager.default.removeItem(atPath: folder)
    }
    #expect { try kind.use(in: container) } throws: { error in
      isError(error, .system, naming: folder, saying: "was deleted while this process was using it")
        && (error as? LiaisonError)?.errno?.rawValue == ENOENT
    }
    #expect(held.isHeld)
    held.unlock()
  }
}

/// Creates the file at `path` with `text`.
private func writeText(_ text: String, to path: String) throws {
  try text.write(toFile: path, atomically: false, encoding: .utf8)
}
