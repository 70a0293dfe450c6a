#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A named doorbell with a 64-bit state: "something changed, tell the others."
///
/// ```swift
/// // In the extension, after saving:
/// try container.signal("notes-changed").post(state: revision)
///
/// // In the app:
/// for await note in try container.signal("notes-changed").notifications() {
///   reload(from: note.state)
/// }
/// ```
///
/// The semantics are those of `notify(3)`: notifications for one name may **coalesce**, so an
/// observer learns that at least one post happened, not how many; an observer subscribed before a
/// post receives at least one notification after it, and the state it reads then is at least as
/// new as that post's. Use the state for a small value (a revision, a timestamp); use a store for
/// anything larger.
///
/// On Linux a signal is a 32-byte file in the container (sequence, state, last poster), and the
/// write of a post is itself the wake-up: every process watching the file with `inotify` is woken
/// by the kernel. There is no daemon and no registration a crashed process could leave behind, and
/// a post costs the same however many processes observe. Each process watches all its signals and
/// presences from one thread of its own. On Apple platforms a post also rings a `notify(3)` name
/// scoped by the container.
public final class Signal: Sendable {
  /// The signal's name.
  public let name: LiaisonName
  let file: SignalFile
  /// The clock of the signal's container: a timed wait for a post passes on it.
  package let clock: LiaisonClock

  convenience init(name: LiaisonName, container: SharedContainer) throws(LiaisonError) {
    try self.init(name: name, folder: container.signalFolder, container: container)
  }

  /// A signal whose file lives in `folder`, one of `container`'s private folders: the store rings
  /// its own signals, in its own folder, so that they never collide with the user's.
  package init(name: LiaisonName, folder: PrivateFolder, container: SharedContainer) throws(LiaisonError) {
    self.name = name
    self.file = try SignalFile(name: name, folder: folder, lifecycle: container.lifecycle)
    self.clock = container.clock
  }

  /// Notifies every observer, keeping the state as it is.
  ///
  /// - Throws: ``LiaisonError/Code/suspended`` while the container is suspended (a post takes the
  ///   signal file's lock for a moment, which a suspended process must not hold);
  ///   ``LiaisonError/Code/readOnly`` when the container is read-only for this process;
  ///   ``LiaisonError`` when the file cannot be written.
  public func post() throws(LiaisonError) {
    try file.update { $0 }
  }

  /// Sets the state and notifies every observer.
  ///
  /// - Throws: ``LiaisonError/Code/suspended`` while the container is suspended;
  ///   ``LiaisonError`` when the file cannot be written.
  public func post(state: UInt64) throws(LiaisonError) {
    try file.update { _ in state }
  }

  /// Posts `state()`, or, while the container is suspended, once it is resumed: the ring of a
  /// write that must reach the other processes even if ``SharedContainer/suspend()`` came
  /// between the write and its ring. Other failures only delay observers, and are ignored.
  ///
  /// - Parameter waiting: whether to wait for another poster; without it, a post that would wait
  ///   is not made, and this returns `false` (a writer that rings under a lock of its own rings
  ///   again once it has released it, so that a stuck poster never holds that lock too).
  /// - Returns: `false` only when `waiting` is not set and another poster had the signal.
  @discardableResult
  package func ring(waiting: Bool = true, state: @escaping @Sendable () -> UInt64?) -> Bool {
    let ringOnce: @Sendable (Bool) throws(LiaisonError) -> Bool = { [file] (waiting) throws(LiaisonError) in
      try file.update(waiting: waiting) { old in state() ?? old }
    }
    do throws(LiaisonError) {
      return try ringOnce(waiting)
    } catch let error where error.code == .suspended {
      file.lifecycle.afterResume { _ = try? ringOnce(true) }
    } catch {}
    return true
  }

  /// The state, as last set by a post or ``setState(_:)``; 0 for a signal never posted.
  public var state: UInt64 {
    get throws(LiaisonError) { try file.read().state }
  }

  /// How many posts the signal has had in all: the ``SignalNotification/sequence`` of the
  /// latest post, 0 for a signal never posted.
  ///
  /// A starting point that no post can slip past, as `notify(3)`'s `notify_check` gives: read it,
  /// subscribe to ``notifications(ignoringOwnPosts:)``, then read it again; if it grew, a post
  /// came in between; else the subscription delivers every later one, each with a larger
  /// sequence. (The `liaison wait --after` command is this.)
  public var sequence: UInt64 {
    get throws(LiaisonError) { try file.read().sequence }
  }

  /// Sets the state without notifying anybody (`notify_set_state` without `notify_post`).
  public func setState(_ state: UInt64) throws(LiaisonError) {
    try file.update(notify: false) { _ in state }
  }

  /// The notifications of this signal, from now on, as an `AsyncSequence`.
  ///
  /// The subscription starts when this method returns, so a post made after that is seen by the
  /// sequence even if iteration starts later. Notifications coalesce: the sequence holds at most
  /// one undelivered notification, always the newest, so a slow consumer never makes it grow.
  /// Ending the iteration (cancel the task, `break`) or releasing the sequence ends the watch.
  ///
  /// - Parameter ignoringOwnPosts: skip notifications whose every post came from this process.
  public func notifications(ignoringOwnPosts: Bool = false) throws(LiaisonError) -> SignalNotifications {
    try SignalNotifications(signal: self, ignoringOwnPosts: ignoringOwnPosts)
  }
}

/// One delivery of a ``Signal``: at least one post happened since the previous one.
public struct SignalNotification: Sendable, Hashable {
  /// The signal's name.
  public let name: LiaisonName
  /// The signal's state, read when the notification was delivered.
  public let state: UInt64
  /// How many posts the signal has had in all, read with `state`; grows by one per post.
  public let sequence: UInt64

  package init(name: LiaisonName, state: UInt64, sequence: UInt64) {
    self.name = name
    self.state = state
    self.sequence = sequence
  }
}

extension SharedContainer {
  /// The signal called `name`, creating its file if needed.
  ///
  /// In a container that this process may read and not write (a keyboard extension without Full
  /// Access), the signal's state is read and its notifications awaited as anywhere; its posts throw
  /// ``LiaisonError/Code/readOnly``.
  ///
  /// - Throws: ``LiaisonError/Code/invalidName`` when `name` breaks the naming rule;
  ///   ``LiaisonError/Code/unsafeFile`` when something other than Liaison's file stands there;
  ///   ``LiaisonError/Code/readOnly`` when the container is read-only for this process and no
  ///   process that may write it has opened the signal yet (its file does not exist).
  public func signal(_ name: String) throws(LiaisonError) -> Signal {
    try Signal(name: try LiaisonName(name), container: self)
  }

  /// The names of every signal in the container, without opening any: a listing that one
  /// damaged signal file does not stop (`liaison status`), or that creates nothing (`liaison
  /// state`).
  package func signalNames() throws(LiaisonError) -> [LiaisonName] {
    try signalFolder.names()
  }

  /// Every signal in the container, by name.
  public func signals() throws(LiaisonError) -> [Signal] {
    try signalFolder.names().map { name throws(LiaisonError) in try Signal(name: name, container: self) }
  }
}

/// A signal's file: 32 bytes, written under a brief exclusive `flock`, read without any lock.
///
/// ```
/// offset 0   "LSG1"            magic
///        4   Int32             pid of the last poster
///        8   UInt64 (LE)       sequence: posts so far
///       16   UInt64 (LE)       state
///       24   UInt64 (LE)       FNV-1a hash of bytes 0..<24
/// ```
///
/// An empty file is a signal never posted (sequence 0, state 0). Readers take no lock, so a
/// process holding a lock on the file cannot stall them; the hash tells a read that overlapped a
/// write, which is read again. Plain `pread`/`pwrite`, not `mmap`: a file truncated by another
/// process then reads as an error instead of raising `SIGBUS` in every observer.
///
/// `encode` and `decode` are `package` so that the fuzzer (`LiaisonFuzz`) reaches them.
package final class SignalFile: Sendable {
  package static let size = 32
  static let magic: [UInt8] = Array("LSG1".utf8)

  package struct Record: Equatable {
    package var sequence: UInt64 = 0
    package var state: UInt64 = 0
    package var poster: Int32 = 0

    package init(sequence: UInt64 = 0, state: UInt64 = 0, poster: Int32 = 0) {
      self.sequence = sequence
      self.state = state
      self.poster = poster
    }
  }

  let name: LiaisonName
  let folder: PrivateFolder
  let path: String
  let doorbell: String
  let key: FileKey
  /// The container's lifecycle: a post takes no lock while it is suspended.
  let lifecycle: ContainerLifecycle
  /// The descriptor that posts and reads of `state` use, opened by the first and kept. Observing
  /// keeps none (see ``readKeepingNoDescriptor()``), so that a process observing ten thousand
  /// signals holds no descriptor per signal.
  private let kept = Locked<CInt?>(nil)
  /// Why this process may not post: the refusal of its open for writing, in a container
  /// read-only for it (the file is then only read, and waited for); `nil` where it may.
  private let readOnly: LiaisonError?

  init(name: LiaisonName, folder: PrivateFolder, lifecycle: ContainerLifecycle) throws(LiaisonError) {
    self.name = name
    self.folder = folder
    self.lifecycle = lifecycle
    let path = folder.path(of: name.rawValue)
    self.path = path
    doorbell = folder.doorbell(for: "signals." + name.rawValue)
    let fd: CInt
    do {
      // `create: true` never returns nil.
      fd = try folder.openFile(name.rawValue, create: true)!
      readOnly = nil
    } catch let error where error.code == .readOnly {
      // A read-only container: the signal is read and waited for, never posted.
      guard let existing = try folder.openFile(name.rawValue, create: false, writing: false) else {
        throw LiaisonError(
          .readOnly,
          "The signal '\(name)' does not exist yet (no process that may write the container has opened it), and the "
            + "container is read-only for this process, so its file '\(path)' cannot be made: here it can be neither "
            + "posted nor waited for. Open it again once a writer has posted it.",
          errno: error.errno, path: path)
      }
      fd = existing
      readOnly = error
    }
    defer { Syscall.close(fd) }
    switch Syscall.status(fd) {
    case .success(let info): key = FileKey(device: deviceNumber(info.st_dev), inode: UInt64(info.st_ino))
    case .failure(let error): throw LiaisonError.system(error, "inspect", path: path)
    }
  }

  deinit {
    if let fd = kept.withLock({ $0 }) { Syscall.close(fd) }
  }

  /// The kept descriptor, opened if none is.
  private func descriptor() throws(LiaisonError) -> CInt {
    try kept.withLock { kept throws(LiaisonError) -> CInt in
      if let fd = kept { return fd }
      // Read-only where this process may not write (``readOnly``): posts are refused before.
      let writable = readOnly == nil
      guard let fd = try folder.openFile(name.rawValue, create: writable, writing: writable) else {
        throw LiaisonError(
          .system, "The signal file '\(path)' was removed while this process used it.", errno: .noSuchFileOrDirectory,
          path: path)
      }
      kept = fd
      return fd
    }
  }

  /// Runs `body` with the kept descriptor, or, when none is kept, with one opened for reading
  /// alone and closed after it: how observers read and watch the file. Read-only, so that its
  /// close is no event of the file's watch (which would wake the observer that read it, again
  /// and again).
  func withDescriptorKeepingNone<T>(_ body: (CInt) throws(LiaisonError) -> T) throws(LiaisonError) -> T {
    if let fd = kept.withLock({ $0 }) { return try body(fd) }
    guard let fd = try folder.openFile(name.rawValue, create: readOnly == nil, writing: false) else {
      throw LiaisonError(
        .system, "The signal file '\(path)' was removed while this process used it.", errno: .noSuchFileOrDirectory,
        path: path)
    }
    defer { Syscall.close(fd) }
    return try body(fd)
  }

  /// Reads the record, without a lock.
  func read() throws(LiaisonError) -> Record {
    try decode(descriptor())
  }

  /// Reads the record, without a lock, and without keeping a descriptor open after it.
  func readKeepingNoDescriptor() throws(LiaisonError) -> Record {
    try withDescriptorKeepingNone { fd throws(LiaisonError) in try decode(fd) }
  }

  /// Increments the sequence and replaces the state with `newState(old)`, under an exclusive
  /// lock; then rings the doorbell where writes do not ring by themselves. With `notify: false`
  /// only the state changes. The lock's wait ends at `suspend()`, and none starts while the
  /// container is suspended (``LiaisonError/Code/suspended``).
  ///
  /// - Returns: `false`, having changed nothing, when `waiting` is not set and another process
  ///   holds the lock.
  @discardableResult
  func update(notify: Bool = true, waiting: Bool = true, _ newState: (UInt64) -> UInt64) throws(LiaisonError) -> Bool {
    if let readOnly { throw LiaisonError.readOnly(readOnly.errno, "post to the signal", path: path) }
    let descriptor = try descriptor()
    let updated: Void? = try lifecycle.withBriefExclusiveLock(descriptor, path: path, waiting: waiting) {
      () throws(LiaisonError) in
      var record = try decode(descriptor)
      record.state = newState(record.state)
      if notify {
        record.sequence &+= 1
        record.poster = Syscall.processID
        // Noted before the write can wake anybody, so that observers in this process that ignore
        // their own posts recognise it.
        SignalHub.shared.noteOwnPost(key, sequence: record.sequence)
      }
      // In place: a record is always 32 bytes, and a truncation would cost more than the post.
      if case .failure(let error) = Syscall.write(descriptor, Self.encode(record), at: 0) {
        throw LiaisonError.system(error, "write", path: path)
      }
    }
    guard updated != nil else { return false }
    if notify { EventLoop.ring(doorbell) }
    return true
  }

  package static func encode(_ record: Record) -> [UInt8] {
    // Written in place into one allocation of the record's size (appending grew it twice).
    [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
      let raw = UnsafeMutableRawBufferPointer(buffer)
      raw.copyBytes(from: magic)
      raw.storeBytes(of: record.poster.littleEndian, toByteOffset: 4, as: Int32.self)
      raw.storeBytes(of: record.sequence.littleEndian, toByteOffset: 8, as: UInt64.self)
      raw.storeBytes(of: record.state.littleEndian, toByteOffset: 16, as: UInt64.self)
      raw.storeBytes(
        of: checksum(UnsafeRawBufferPointer(rebasing: raw[0..<24])).littleEndian, toByteOffset: 24, as: UInt64.self)
      count = size
    }
  }

  /// The record's checksum: FNV-1a of its first 24 bytes.
  static func checksum(_ bytes: some Collection<UInt8>) -> UInt64 { fnv1a(bytes) }

  /// Decodes a signal file's bytes; `nil` when they are not a whole signal record (a read that
  /// overlapped a write, or a corrupt file).
  package static func decode(_ bytes: [UInt8]) -> Record? {
    if bytes.isEmpty { return Record() }
    guard bytes.count == size, bytes.starts(with: magic) else { return nil }
    let stored = bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 24, as: UInt64.self)) }
    guard stored == checksum(bytes[0..<24]) else { return nil }
    return bytes.withUnsafeBytes { raw in
      Record(
        sequence: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
        state: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
        poster: Int32(littleEndian: raw.loadUnaligned(fromByteOffset: 4, as: Int32.self)))
    }
  }

  private func decode(_ descriptor: CInt) throws(LiaisonError) -> Record {
    var bytes: [UInt8] = []
    // A read that overlaps a write sees a mix of both: read again. A file that never decodes is
    // corrupt.
    for _ in 0..<100 {
      var result = Syscall.readSmallFile(descriptor, count: Self.size + 1)
      // Short of a record: the end of a damaged file, or a short read that a network file system
      // may give; the reading loop tells them apart.
      if case .success(let partial) = result, (1..<Self.size).contains(partial.count) {
        result = Syscall.read(descriptor, count: Self.size + 1)
      }
      switch result {
      case .success(let read): bytes = read
      case .failure(let error): throw LiaisonError.system(error, "read", path: path)
      }
      if let record = Self.decode(bytes) { return record }
      if bytes.count != Self.size { break }
      sched_yield()
    }
    throw LiaisonError(
      .corruptFile,
      "The signal file '\(path)' is not a signal record (\(bytes.count) bytes). It holds only the signal's "
        + "last state: stop the processes that use '\(name)', remove the file, and the signal starts again from 0.",
      path: path)
  }
}

/// A file's identity: the same in every process, whatever path or descriptor reached it.
struct FileKey: Hashable, Sendable {
  let device: UInt64
  let inode: UInt64
}

extension Signal: ClockedPart {}
