// Data protection: the class Liaison gives its folders on Apple platforms, and the error for an
// open refused while the device is locked. In the Darwin model (the trait DarwinModel), whose
// classes and locked device stand for XNU's; on Linux, that nothing changes.
import Foundation
import LiaisonTestSupport
import Testing

@testable import Liaison

#if DarwinModel
  import DarwinModel
#endif
#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

@Suite("Data protection", .serialized)
struct DataProtectionTests {
  #if DarwinModel
    /// Every folder Liaison makes gets class C (`completeUntilFirstUserAuthentication`), and the
    /// files made in them take it.
    @Test func everyFolderLiaisonMakesIsClassCAndItsFilesTakeIt() throws {
      let directory = TemporaryDirectory()
      let container = try SharedContainer(directory: directory.path)
      try container.presence("recording").claim().release()
      try container.signal("ready").post(state: 1)
      _ = try container.lock("refresh").tryLock()
      let root = directory.path + "/.liaison"
      var folders = [root]
      var files: [String] = []
      let entries = try #require(FileManager.default.enumerator(atPath: root))
      for case let entry as String in entries {
        var isFolder: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: root + "/" + entry, isDirectory: &isFolder)
        if isFolder.boolValue { folders.append(root + "/" + entry) } else { files.append(root + "/" + entry) }
      }
      #expect(folders.count >= 4, "\(folders)")
      #expect(files.count >= 3, "\(files)")
      for path in folders + files {
        #expect(DarwinModelFiles.protectionClass(ofFileAt: path) == ProtectionClass.c, "\(path)")
      }
    }

    /// A file of class A (made by another program, or by an app whose entitlement makes complete
    /// protection the default), opened while the device is locked: `protectedDataUnavailable`,
    /// naming the file, not `readOnly` nor a bare `system` error. The same file of class C opens.
    @Test func aClassAFileOpenedWhileLockedIsProtectedDataUnavailableAndClassCOpens() throws {
      let directory = TemporaryDirectory()
      let container = try SharedContainer(directory: directory.path)
      let folder = try container.privateFolder(.presence)
      let planted = folder.path(of: "planted")
      let fd = open(planted, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
      try #require(fd >= 0)
      Syscall.close(fd)
      try #require(DarwinModelFiles.setProtectionClass(ProtectionClass.a, ofFileAt: planted))

      DarwinModelFiles.deviceLocked = true
      defer { DarwinModelFiles.deviceLocked = false }
      for writing in [false, true] {
        let error = try #require(throws: LiaisonError.self) {
          _ = try folder.openFile("planted", create: false, writing: writing)
        }
        #expect(error.code == .protectedDataUnavailable, "\(error)")
        #expect(error.errno == .notPermitted)
        #expect(error.path == planted)
        #expect(error.message.contains("'\(planted)'"), "\(error)")
        #expect(error.message.contains("while the device is locked"), "\(error)")
        #expect(error.message.contains("completeUntilFirstUserAuthentication"), "\(error)")
      }
      // Through the public API: a look at the presence opens its file.
      let look = try #require(throws: LiaisonError.self) { _ = try container.presence("planted").isActive }
      #expect(look.code == .protectedDataUnavailable, "\(look)")

      // Class C: readable while locked after the first unlock.
      try #require(DarwinModelFiles.setProtectionClass(ProtectionClass.c, ofFileAt: planted))
      let opened = try #require(try folder.openFile("planted", create: false, writing: true))
      Syscall.close(opened)
      #expect(try container.presence("planted").isActive == false)

      // Unlocked, class A opens too.
      try #require(DarwinModelFiles.setProtectionClass(ProtectionClass.a, ofFileAt: planted))
      DarwinModelFiles.deviceLocked = false
      let unlocked = try #require(try folder.openFile("planted", create: false, writing: true))
      Syscall.close(unlocked)
    }

    /// A folder of class A (made before Liaison set a class, in an app whose default is complete
    /// protection): a file to be made in it while the device is locked is refused, with the error
    /// naming the folder.
    @Test func aFileMadeInAClassAFolderWhileLockedIsProtectedDataUnavailable() throws {
      let directory = TemporaryDirectory()
      let container = try SharedContainer(directory: directory.path)
      let folder = try container.privateFolder(.presence)
      try #require(DarwinModelFiles.setProtectionClass(ProtectionClass.a, ofFileAt: folder.path))
      DarwinModelFiles.deviceLocked = true
      defer { DarwinModelFiles.deviceLocked = false }
      let error = try #require(throws: LiaisonError.self) { _ = try container.presence("new").claim() }
      #expect(error.code == .protectedDataUnavailable, "\(error)")
      #expect(error.path == folder.path(of: "new"))
      #expect(error.message.contains("the folder '\(folder.path)'"), "\(error)")
      #expect(error.message.contains("while the device is locked"), "\(error)")
    }

    /// A store's file that SQLite could not open with `EPERM`: the error that `LiaisonStore`
    /// gives (`StoreDatabase.translate`) when the file, its `-wal` or its `-shm` is of class A.
    @Test func aStoreFileOfClassARefusedWithEPERMIsProtectedDataUnavailable() throws {
      let directory = TemporaryDirectory()
      let database = directory.path + "/defaults.sqlite"
      for file in [database, database + "-wal"] {
        let fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        Syscall.close(fd)
        try #require(DarwinModelFiles.setProtectionClass(ProtectionClass.c, ofFileAt: file))
      }
      #expect(LiaisonError.protectedDataRefusal(.notPermitted, sqliteFile: database, cause: nil) == nil)
      try #require(DarwinModelFiles.setProtectionClass(ProtectionClass.a, ofFileAt: database + "-wal"))
      let error = try #require(LiaisonError.protectedDataRefusal(.notPermitted, sqliteFile: database, cause: nil))
      #expect(error.code == .protectedDataUnavailable)
      #expect(error.path == database + "-wal")
      #expect(LiaisonError.protectedDataRefusal(.permissionDenied, sqliteFile: database, cause: nil) == nil)
    }
  #endif

  /// On Linux an `EPERM` is never data protection's: the container is read-only for this process,
  /// as before.
  @Test(.enabled(if: runsLinuxCode, "Linux's code only"))
  func onLinuxAnEPERMIsNeverDataProtection() throws {
    let directory = TemporaryDirectory()
    let container = try SharedContainer(directory: directory.path)
    let folder = try container.privateFolder(.presence)
    #expect(LiaisonError.protectedDataRefusal(.notPermitted, opening: "x", in: folder.descriptor, path: "x") == nil)
    #expect(LiaisonError.protectedDataRefusal(.notPermitted, sqliteFile: directory.path + "/x", cause: nil) == nil)
  }
}
