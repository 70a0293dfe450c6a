// Data protection on Apple platforms: the class Liaison gives its folders, and the error for an
// open that the class refuses while the device is locked. Nothing here on Linux.

import SystemPackage

#if canImport(Darwin) || DarwinModel
  #if canImport(Darwin)
    import Darwin
  #else
    import Glibc
  #endif
  #if DarwinModel
    import DarwinModel

    // In the Darwin model, the model's (Tests/DarwinModel/DataProtection.swift): classes kept in
    // extended attributes, and a device that can be locked.
    private func fcntl(_ descriptor: CInt, _ command: CInt, _ value: CInt) -> CInt {
      DarwinModel.fcntlProtectionClass(descriptor, command, value)
    }
    private func getattrlistat(
      _ folder: CInt, _ name: UnsafePointer<CChar>, _ attributes: UnsafeMutableRawPointer,
      _ buffer: UnsafeMutableRawPointer, _ size: Int, _ options: UInt
    ) -> CInt {
      DarwinModel.getattrlistat(folder, name, attributes, buffer, size, options)
    }
  #endif

  /// Data protection classes, by number. The SDK declares `F_GETPROTECTIONCLASS` and
  /// `F_SETPROTECTIONCLASS` (sys/fcntl.h) but not the classes' names, which are in a private
  /// header of XNU (sys/content_protection.h, `PROTECTION_CLASS_A` … `F`, and 7 for
  /// `completeWhenUserInactive` since iOS 17); Apple's own `setclass` and WebKit spell them as
  /// these numbers too. Foundation's names: A is `FileProtectionType.complete`, B
  /// `completeUnlessOpen`, C `completeUntilFirstUserAuthentication`, D `none`.
  package enum ProtectionClass {
    /// `complete`: unreadable while the device is locked.
    package static let a: CInt = 1
    /// `completeUnlessOpen`: a file open before the lock stays readable; a new open is refused.
    package static let b: CInt = 2
    /// `completeUntilFirstUserAuthentication`: readable from the first unlock after a boot on,
    /// locked or not. Liaison's.
    package static let c: CInt = 3

    /// Whether a file of class `value` may be unreadable while the device is locked after its first
    /// unlock: every class but C, D (none), E and F (the system's), and 0 (a folder's "none").
    package static func refusesWhileLocked(_ value: CInt) -> Bool {
      value > 0 && !(3...6).contains(value)
    }

    /// A class as people know it, for messages.
    package static func describe(_ value: CInt) -> String {
      switch value {
      case a: "class A, complete"
      case b: "class B, completeUnlessOpen"
      case 7: "completeWhenUserInactive"
      default: "class \(value)"
      }
    }

    /// Gives the folder open on `descriptor` class C, so that every file made in it (Liaison's,
    /// and SQLite's) takes that class: an extension can open it while the device is locked after
    /// its first unlock. Best effort: a volume without data protection (most of a Mac's) refuses
    /// the call, and the folder keeps the class it inherited.
    package static func setUntilFirstUnlock(_ descriptor: CInt) {
      _ = fcntl(descriptor, F_SETPROTECTIONCLASS, c)
    }

    /// The class of the file open on `descriptor`, or `nil` when the system cannot tell.
    package static func of(descriptor: CInt) -> CInt? {
      let value = fcntl(descriptor, F_GETPROTECTIONCLASS, 0)
      return value >= 0 ? value : nil
    }

    /// The class of the entry `name` of the folder `folder` (`AT_FDCWD` for a path), read without
    /// opening it and without following a symbolic link; `nil` when the system cannot tell.
    package static func of(_ name: String, in folder: CInt) -> CInt? {
      var request = attrlist()
      request.bitmapcount = u_short(ATTR_BIT_MAP_COUNT)
      request.commonattr = attrgroup_t(ATTR_CMN_DATA_PROTECT_FLAGS)
      // The length of what was returned, then the class (a u_int32_t).
      var answer: (UInt32, UInt32) = (0, 0)
      let result = withUnsafeMutableBytes(of: &answer) { buffer in
        getattrlistat(folder, name, &request, buffer.baseAddress!, buffer.count, UInt(FSOPT_NOFOLLOW))
      }
      guard result == 0, answer.0 >= 8 else { return nil }
      return CInt(bitPattern: answer.1)
    }
  }
#endif

extension LiaisonError {
  /// The error for an open of the file `name` in the folder `folder` (`path` for messages) that
  /// the system refused with `errno`, when data protection refused it: on Apple platforms, `EPERM`
  /// for a file whose class is unreadable while the device is locked, or for a file to be created
  /// in a folder of such a class. `nil` otherwise, and always on Linux.
  package static func protectedDataRefusal(
    _ errno: Errno, opening name: String, in folder: CInt, path: String
  ) -> LiaisonError? {
    #if canImport(Darwin) || DarwinModel
      guard errno == .notPermitted else { return nil }
      if let value = ProtectionClass.of(name, in: folder) {
        return ProtectionClass.refusesWhileLocked(value) ? protectedDataUnavailable(path, class: value) : nil
      }
      // Not there: a file to be made takes the folder's class.
      guard let value = ProtectionClass.of(descriptor: folder), ProtectionClass.refusesWhileLocked(value) else {
        return nil
      }
      let folderPath = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? path
      return protectedDataUnavailable(path, class: value, folder: folderPath)
    #else
      return nil
    #endif
  }

  /// The error for a store or database file that SQLite could not open with `errno`, when data
  /// protection refused it: `EPERM`, and the file at `path` (or its `-wal` or `-shm`) of a class
  /// unreadable while the device is locked. `nil` otherwise, and always on Linux. (By path: SQLite
  /// opened it by that path, and the class only chooses the message.)
  package static func protectedDataRefusal(_ errno: Errno, sqliteFile path: String, cause: (any Error)?)
    -> LiaisonError?
  {
    #if canImport(Darwin) || DarwinModel
      guard errno == .notPermitted else { return nil }
      for file in [path, path + "-wal", path + "-shm"] {
        if let value = ProtectionClass.of(file, in: AT_FDCWD), ProtectionClass.refusesWhileLocked(value) {
          return protectedDataUnavailable(file, class: value, cause: cause)
        }
      }
      return nil
    #else
      return nil
    #endif
  }

  #if canImport(Darwin) || DarwinModel
    /// The error of `protectedDataUnavailable` for the file at `path`, of class `value`, or to be
    /// made in the folder `folder`, of that class.
    private static func protectedDataUnavailable(
      _ path: String, class value: CInt, folder: String? = nil, cause: (any Error)? = nil
    ) -> LiaisonError {
      let what =
        if let folder {
          "the folder '\(folder)' has the data protection \(ProtectionClass.describe(value)), which a new file in it "
            + "takes, and no file of that class can be made while the device is locked"
        } else {
          "it has the data protection \(ProtectionClass.describe(value)), and cannot be opened while the device is "
            + "locked"
        }
      return LiaisonError(
        .protectedDataUnavailable,
        "Could not open '\(path)': \(what). Liaison makes its folders completeUntilFirstUserAuthentication, which "
          + "an extension can open while the device is locked after its first unlock; this one was made with a "
          + "stricter class (by an earlier version of Liaison, or by another program, in an app whose entitlement "
          + "makes complete protection the default). Try again once the device is unlocked; to reach it while "
          + "locked, give it the class completeUntilFirstUserAuthentication while the device is unlocked (or remove "
          + "it while no process uses the container: Liaison makes it again).",
        errno: .notPermitted, path: path, cause: cause)
    }
  #endif
}
