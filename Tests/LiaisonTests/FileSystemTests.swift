import Foundation
import LiaisonTestSupport
import Testing

@testable import Liaison

/// A container on a file system where file locks do not hold (network and user-space ones) is
/// refused when it is opened, by the kernel's own name for the file system; local ones are used.
/// A real NFS, SMB or FUSE mount cannot be made here (no such server, no FUSE device in CI), so
/// the classification is tested on the kernel's type numbers and names, and the check on the
/// file systems the tests run on.
@Suite("File systems a container may be on")
struct FileSystemTests {
  /// Linux's `statfs` types (`linux/magic.h`).
  @Test func linuxNetworkAndUserSpaceFileSystemsAreRefused() {
    let refused: [(Int64, String)] = [
      (0x6969, "NFS"), (0x517B, "SMB"), (0xFF53_4D42, "CIFS"), (0xFE53_4D42, "SMB2"), (0x6573_5546, "FUSE"),
      (0x00C3_6400, "Ceph"), (0x0102_1997, "9P"), (0x786F_4256, "VirtualBox shared folder"),
      // `f_type` is signed on some architectures: CIFS's magic as a negative 32-bit number.
      (Int64(Int32(bitPattern: 0xFF53_4D42)), "CIFS"),
    ]
    for (type, name) in refused { #expect(FileSystems.unsupported(type: type) == name) }
    // ext4, XFS, Btrfs, tmpfs, overlayfs, ZFS, F2FS.
    for local: Int64 in [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0x794C_7630, 0x2FC1_2FC1, 0xF2F5_2010] {
      #expect(FileSystems.unsupported(type: local) == nil, "\(String(local, radix: 16))")
    }
  }

  /// Apple's `statfs` names.
  @Test func appleNetworkAndUserSpaceFileSystemsAreRefused() {
    for name in ["nfs", "smbfs", "afpfs", "webdav", "macfuse", "osxfuse", "fuse.sshfs", "cifs"] {
      #expect(FileSystems.unsupported(named: name) == name)
    }
    for name in ["apfs", "hfs", "msdos", "exfat", "devfs"] { #expect(FileSystems.unsupported(named: name) == nil) }
  }

  /// The refusal names the container, the file system, and what to do instead.
  @Test func theRefusalSaysWhatToDo() {
    let error = FileSystems.refusal("NFS", path: "/mnt/shared")
    #expect(error.code == .invalidArgument && error.path == "/mnt/shared")
    #expect(error.message.contains("'/mnt/shared' is on a NFS file system"))
    #expect(error.message.contains("a folder on a local disk of each host, or PostgreSQL"))
  }

  /// The file systems the tests run on (a temporary folder, the working directory) are local.
  @Test func theLocalFileSystemsHereAreUsed() throws {
    let temporary = TemporaryDirectory()
    for path in [temporary.path, FileManager.default.currentDirectoryPath] {
      let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      try #require(fd >= 0)
      defer { close(fd) }
      #expect(FileSystems.unsupported(fd) == nil, "\(path)")
    }
    _ = try SharedContainer(directory: temporary.path + "/container", createIfMissing: true)
  }
}
