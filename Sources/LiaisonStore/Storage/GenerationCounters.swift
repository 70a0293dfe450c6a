import CLiaison
import Liaison

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// 512 counters of 64 bits in a 4 KiB file that every process maps: a writer increments a
/// slot after it commits, and a reader compares the slot with the value its cache was filled at.
/// An atomic load is the whole cost of knowing that a cached value is still current. Two words
/// after them keep the store's last acknowledged commit (``CommitRecord``).
///
/// Many names share a slot (by hash); a shared slot only costs an extra reload, never a stale
/// read. The file only ever grows to its size and is never truncated by Liaison; one found short
/// at open is grown back, and garbage in it only costs cache reloads. Like SQLite's own `-shm`
/// file, which SQLite also maps, a process that truncates it under a running reader crashes that
/// reader (SIGBUS); only a process of the same user can, which the threat model leaves out (the
/// "Security and the Threat Model" article; pinned by `HostileStoreFileTests.aMappedFileTruncatedUnderARunningProcessKillsIt`).
final class GenerationCounters: @unchecked Sendable {
  static let slotCount = 512
  /// The slots, then the commit record's two words (a file of an earlier version, 4 KiB, is
  /// grown to hold them, zero).
  private static let size = (slotCount + 2) * MemoryLayout<UInt64>.size

  private let words: UnsafeMutablePointer<UInt64>
  let path: String
  /// Whether the file is mapped for writing: `false` in a container read-only for this process,
  /// whose store is only read (its writes are refused at their lock, before any counter moves).
  let isWritable: Bool

  /// Opens (making it if needed) the counters file `name` of `folder`, one of `container`'s; in a
  /// container that this process may not write, maps it for reading.
  ///
  /// - Throws: ``/Liaison/LiaisonError/Code/suspended`` while the container is suspended (growing
  ///   the file takes its lock, which a suspended process must not hold or wait for);
  ///   ``/Liaison/LiaisonError/Code/readOnly`` when the container is read-only for this process and
  ///   the file is missing or short.
  init(folder: PrivateFolder, name: String, container: SharedContainer) throws(LiaisonError) {
    let path = folder.path(of: name)
    self.path = path
    let fd: CInt
    do {
      fd = try folder.openFile(name, create: true)!
      isWritable = true
    } catch let error where error.code == .readOnly {
      var info = stat()
      guard let opened = try folder.openFile(name, create: false, writing: false) else { throw error }
      guard fstat(opened, &info) == 0, info.st_size >= Self.size else {
        Syscall.close(opened)
        throw LiaisonError(
          .readOnly,
          "The counters file '\(path)' is short, and the container is read-only for this process, so it cannot be "
            + "grown. Open the store once from a process that may write the container.",
          errno: error.errno, path: path)
      }
      fd = opened
      isWritable = false
    }
    defer { Syscall.close(fd) }
    guard isWritable else {
      guard let mapping = mmap(nil, Self.size, PROT_READ, MAP_SHARED, fd, 0), mapping != MAP_FAILED else {
        throw LiaisonError(.system, "Could not map the counters file '\(path)'.", path: path).withErrno(errno)
      }
      words = mapping.assumingMemoryBound(to: UInt64.self)
      return
    }
    // Under the file's lock, so that two processes never grow it at once.
    try container.withBriefExclusiveLock(fd, path: path) { () throws(LiaisonError) in
      var info = stat()
      guard fstat(fd, &info) == 0 else {
        throw LiaisonError(.system, "Could not inspect the counters file '\(path)'.", path: path).withErrno(errno)
      }
      // Allocated, not just sized: a sparse page on a full disk would fault (SIGBUS) on first write.
      if info.st_size < Self.size, let error = Self.allocate(fd, from: Int(info.st_size)) {
        throw LiaisonError(.system, "Could not allocate the counters file '\(path)'; check the disk.", path: path)
          .withErrno(error)
      }
    }
    guard let mapping = mmap(nil, Self.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), mapping != MAP_FAILED
    else {
      throw LiaisonError(.system, "Could not map the counters file '\(path)'.", path: path).withErrno(errno)
    }
    words = mapping.assumingMemoryBound(to: UInt64.self)
  }

  deinit { munmap(words, Self.size) }

  /// Writes zeros from `start` to the end of the counters, so that every block is allocated
  /// (`posix_fallocate` does the same on Linux, but Apple platforms have no such call). The
  /// counters already there are left as they are. Returns the error, or `nil`.
  private static func allocate(_ fd: CInt, from start: Int) -> CInt? {
    let zeros = [UInt8](repeating: 0, count: size)
    var offset = max(start, 0)
    while offset < size {
      let written = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress!, size - offset, off_t(offset)) }
      if written < 0 {
        if errno == EINTR { continue }
        return errno
      }
      offset += written
    }
    return nil
  }

  /// The slot that `name` uses.
  static func slot(for name: String) -> Int {
    Int(fnv1a(name.utf8) % UInt64(slotCount))
  }

  func load(_ slot: Int) -> UInt64 { cliaison_atomic_load(words + slot) }

  @discardableResult
  func increment(_ slot: Int) -> UInt64 { cliaison_atomic_increment(words + slot) }

  /// The commit record (``CommitRecord``): what it was made for (the database and the boot), and
  /// the count of commits acknowledged since. Written only under the store's write lock.
  var commitRecord: (stamp: UInt64, commits: UInt64) {
    get { (cliaison_atomic_load(words + Self.slotCount), cliaison_atomic_load(words + Self.slotCount + 1)) }
    set {
      cliaison_atomic_store(words + Self.slotCount, newValue.stamp)
      cliaison_atomic_store(words + Self.slotCount + 1, newValue.commits)
    }
  }
}

extension LiaisonError {
  /// The same error with the system error `code` attached.
  func withErrno(_ code: CInt) -> LiaisonError {
    LiaisonError(self.code, message, errno: .init(rawValue: code), path: path)
  }
}
