#if canImport(Glibc)
  import CLiaison  // statfs (sys/vfs.h), which Glibc's module leaves out
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The file systems a container may be on. Liaison's promises rest on the kernel: `flock` locks
/// that only their holder's end drops, and a change notification for every write. Network and
/// user-space file systems break both: NFS emulates `flock` with POSIX record locks (closing *any*
/// descriptor of the file in the process drops them, and nothing crosses hosts without a lock
/// manager) and reports no other host's write; SMB, AFP and most FUSE file systems are alike
/// (a user measured 2,653 exclusion violations in 2,829 acquisitions on an NFS `nolock` mount).
/// A container there is refused when it is opened, by the kernel's own name for the file system.
///
/// A list of those known not to hold, not of those known to: any local file system keeps the
/// promises (ext4, XFS, Btrfs, ZFS, tmpfs, overlayfs, APFS, HFS+), and one this list does not
/// know is taken as local.
package enum FileSystems {
  /// The unsupported file system of the folder open on `descriptor`, by name; `nil` when it is
  /// supported (or its type cannot be read).
  package static func unsupported(_ descriptor: CInt) -> String? {
    var info = statfs()
    guard fstatfs(descriptor, &info) == 0 else { return nil }
    #if canImport(Darwin)
      let name = withUnsafeBytes(of: info.f_fstypename) { bytes in
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
      }
      return unsupported(named: name)
    #else
      return unsupported(type: Int64(info.f_type))
    #endif
  }

  /// Linux's file system types (`statfs`'s `f_type`, `linux/magic.h`) where the promises do not
  /// hold, by the name the kernel gives each.
  private static let linuxTypes: [Int64: String] = [
    0x6969: "NFS", 0x517B: "SMB", 0xFF53_4D42: "CIFS", 0xFE53_4D42: "SMB2", 0x6573_5546: "FUSE",
    0x00C3_6400: "Ceph", 0x5346_414F: "AFS", 0x6B41_4653: "AFS", 0x7375_7245: "Coda", 0x0102_1997: "9P",
    0x0BD0_0BD0: "Lustre", 0x4750_4653: "GPFS", 0x786F_4256: "VirtualBox shared folder", 0x564C: "NCP",
  ]

  /// The name of the file system of Linux type `type` if it is one where the promises do not
  /// hold.
  package static func unsupported(type: Int64) -> String? { linuxTypes[type & 0xFFFF_FFFF] }

  /// Apple's file system names (`statfs`'s `f_fstypename`) where the promises do not hold.
  private static let appleNames: Set<String> = [
    "nfs", "smbfs", "afpfs", "webdav", "cifs", "ftp", "macfuse", "osxfuse", "fusefs", "fuse",
  ]

  /// `name` when it names (as Apple's `statfs` does) a file system where the promises do not hold.
  package static func unsupported(named name: String) -> String? {
    appleNames.contains(name) || name.hasPrefix("fuse") || name.hasSuffix("fuse") ? name : nil
  }

  /// The error for a container at `path` on the file system `name`.
  package static func refusal(_ name: String, path: String) -> LiaisonError {
    LiaisonError(
      .invalidArgument,
      "The container '\(path)' is on a \(name) file system, where file locks do not hold as Liaison needs (a "
        + "network or user-space file system emulates them, and nothing tells one host of another's writes): "
        + "locks would not exclude, and presences and signals would go unseen. Use a folder on a local disk of "
        + "each host, or PostgreSQL (PostgresContainer, liaison --postgres) to coordinate across hosts.",
      path: path)
  }
}
