import Foundation
import Liaison
import LiaisonTestSupport
import Testing

@Suite("Names, modes and planted files")
struct ContainerSafetyTests {
  let directory = TemporaryDirectory()

  @Test(arguments: [
    "", "../x", "a/b", ".hidden", String(repeating: "n", count: 129), "nul\u{0}byte", "with space", "/etc/passwd",
    "caf\u{E9}", String(repeating: "x", count: 10_000),
  ])
  func badNamesAreRefusedWithTheRule(_ name: String) throws {
    let container = try SharedContainer(directory: directory.path)
    for attempt in [
      { _ = try LiaisonName(name) },
      { _ = try container.lock(name) },
      { _ = try container.presence(name) },
    ] as [() throws -> Void] {
      #expect {
        try attempt()
      } throws: { error in
        let error = error as? LiaisonError
        return error?.code == .invalidName && error?.message.contains(LiaisonName.rule) == true
      }
    }
  }

  @Test func goodNamesAreAccepted() throws {
    for name in ["a", "token-refresh", "com.example.app_2", String(repeating: "n", count: 128), "x.."] {
      #expect(try LiaisonName(name).rawValue == name)
    }
  }

  @Test func thePrivateFolderIs0700AndItsFiles0600() throws {
    let container = try SharedContainer(directory: directory.path)
    _ = try container.lock("l").tryLock()
    _ = try container.presence("p").claim()
    let root = directory.path + "/.liaison"
    for folder in [root, root + "/locks", root + "/presence"] {
      #expect(try permissions(folder) == 0o700, "\(folder)")
    }
    for file in [root + "/locks/l", root + "/presence/p"] {
      #expect(try permissions(file) == 0o600, "\(file)")
    }
  }

  @Test func looseModesOnOurOwnFilesAreTightened() throws {
    let container = try SharedContainer(directory: directory.path)
    _ = try container.lock("l").tryLock()
    let file = directory.path + "/.liaison/locks/l"
    chmod(file, 0o666)
    chmod(directory.path + "/.liaison", 0o755)
    let reopened = try SharedContainer(directory: directory.path)
    _ = try reopened.lock("l").tryLock()
    #expect(try permissions(file) == 0o600)
    #expect(try permissions(directory.path + "/.liaison") == 0o700)
  }

  @Test(arguments: ["locks", "presence"])
  func aPlantedSymlinkIsRefusedAndItsTargetUntouched(_ folder: String) throws {
    let container = try SharedContainer(directory: directory.path)
    let target = directory.path + "/precious"
    try "precious".write(toFile: target, atomically: false, encoding: .utf8)
    try FileManager.default.createSymbolicLink(
      atPath: "\(directory.path)/.liaison/\(folder)/planted", withDestinationPath: target)

    let attempts: [() throws -> Void] =
      folder == "locks"
      ? [{ _ = try container.lock("planted").tryLock() }, { _ = try container.lock("planted").probe() }]
      : [
        { _ = try container.presence("planted").claim() }, { _ = try container.presence("planted").isActive },
        { _ = try container.presence("planted").lease(for: .seconds(1)) },
      ]
    for attempt in attempts {
      #expect {
        try attempt()
      } throws: { error in
        let error = error as? LiaisonError
        return error?.code == .unsafeFile && error?.message.contains("symbolic link") == true
      }
    }
    #expect(try String(contentsOfFile: target, encoding: .utf8) == "precious")
  }

  @Test func aPlantedSymlinkInPlaceOfThePrivateFolderIsRefused() throws {
    let elsewhere = TemporaryDirectory()
    try FileManager.default.createSymbolicLink(
      atPath: directory.path + "/.liaison", withDestinationPath: elsewhere.path)
    #expect {
      _ = try SharedContainer(directory: directory.path)
    } throws: { ($0 as? LiaisonError)?.code == .unsafeFile }
    #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
  }

  @Test func aHardLinkOrAFolderInPlaceOfALockFileIsRefused() throws {
    let container = try SharedContainer(directory: directory.path)
    let outside = directory.path + "/outside"
    try "data".write(toFile: outside, atomically: false, encoding: .utf8)
    try FileManager.default.linkItem(atPath: outside, toPath: directory.path + "/.liaison/locks/linked")
    try FileManager.default.createDirectory(
      atPath: directory.path + "/.liaison/locks/folder", withIntermediateDirectories: false)
    for name in ["linked", "folder"] {
      #expect {
        _ = try container.lock(name).tryLock()
      } throws: { ($0 as? LiaisonError)?.code == .unsafeFile }
    }
    #expect(try String(contentsOfFile: outside, encoding: .utf8) == "data")
  }

  private func permissions(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as! NSNumber).intValue & 0o777
  }

  /// Only the missing folders of the container's path are made (inside the iOS sandbox, even a
  /// `mkdir` on an existing folder above the container may be refused); the others keep their modes.
  @Test func onlyTheMissingFoldersOfTheContainerPathAreMade() throws {
    try setPermissions(directory.path, 0o755)
    let path = directory.path + "/made/for/liaison"
    _ = try SharedContainer(directory: path, createIfMissing: true)
    #expect(try permissionBits(directory.path) == 0o755)
    for made in ["/made", "/made/for", "/made/for/liaison"] {
      #expect(try permissionBits(directory.path + made) == 0o700, "\(made)")
    }
    _ = try SharedContainer(directory: path, createIfMissing: true)  // all there: nothing to make
  }

  /// Opening never creates what it was only asked to read: a missing folder is an error that
  /// says how to create it, and nothing is made.
  @Test func aMissingFolderIsNotMadeUnlessAsked() throws {
    let path = directory.path + "/mistyped"
    let error = #expect(throws: LiaisonError.self) { try SharedContainer(directory: path) }
    #expect(error?.code == .invalidArgument && error?.message.contains("createIfMissing") == true)
    #expect(!FileManager.default.fileExists(atPath: path))
  }
}
