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

/// Whether a feature is running right now, and which process runs it: "is the app recording?"
///
/// ```swift
/// // In the app, for as long as it records:
/// let recording = try container.presence("recording")
/// let claim = try recording.claim(info: "episode 7")
/// defer { claim.release() }
///
/// // In the widget:
/// if try recording.isActive { showRecordingBadge() }
/// ```
///
/// A **claim** holds an exclusive `flock` on the presence's file for as long as it lasts, and
/// writes the holder's record (pid, start time, info) into it. The kernel drops the lock when
/// the holder's process dies, however it dies, so a crashed app never looks like it is still
/// running. Use a claim for work that keeps the process running (audio, navigation, a daemon).
///
/// A **lease** is for processes the system may suspend (iOS): no lock is held; the holder
/// writes a record valid for a stated time and renews it by a heartbeat. While the process is
/// suspended the heartbeat stops and the lease lapses by itself after its time; when it resumes,
/// the heartbeat takes it back unless someone else did meanwhile. See ``lease(for:info:)``.
///
/// A presence is active while it is claimed, or leased and not expired. One holder at a time:
/// a second claim or lease, from any process, throws ``LiaisonError/Code/alreadyClaimed``.
public final class Presence: Sendable {
  /// The longest ``PresenceClaim`` info text, in UTF-8 bytes.
  public static let maximumInfoLength = 1024

  /// The presence's name.
  public let name: LiaisonName
  let container: SharedContainer
  /// The descriptor looks read through: opened at the first look that finds the file, and kept
  /// while this value lives, which saves an `open` and a `close` per look.
  private let lookDescriptor = Locked<CInt?>(nil)

  init(name: LiaisonName, container: SharedContainer) {
    self.name = name
    self.container = container
  }

  deinit {
    if let fd = lookDescriptor.withLock({ $0 }) { Syscall.close(fd) }
  }

  /// The descriptor of ``lookDescriptor``, opening it if needed; `nil` when the file does not
  /// exist (nobody ever claimed or leased the presence).
  private func fileToLookAt() throws(LiaisonError) -> CInt? {
    try lookDescriptor.withLock { kept throws(LiaisonError) -> CInt? in
      if let kept { return kept }
      // For reading alone: a look writes nothing, and so works in a read-only container.
      kept = try container.presenceFolder.openFile(name.rawValue, create: false, writing: false)
      return kept
    }
  }

  var path: String { container.presenceFolder.path(of: name.rawValue) }

  /// Whether the presence is claimed, or leased and not expired, right now.
  ///
  /// Looking never waits: it reads the record and, for a claim, whether the presence's file is
  /// locked (see ``holder``), so it never makes a claimant wait, and is safe to call from any
  /// thread, as often as needed. On Linux it takes no lock; on Apple platforms a claim's record
  /// is checked by taking the file's lock, shared, for a moment. A record being rewritten under
  /// its lock counts as active.
  public var isActive: Bool {
    get throws(LiaisonError) { try look(namingHolder: false).probe != .known(nil) }
  }

  /// The current holder, or `nil` when the presence is not active.
  ///
  /// Reading it never waits, and on Linux takes no lock, so it never makes another process's
  /// claim fail or wait: it reads the holder's record, and for a claim whether the claim still holds the presence's file. On
  /// Linux a claim marks its file with an open-file-description lock on its first byte, which a
  /// look tests without taking it (`F_OFD_GETLK`, about a microsecond) and which the kernel drops
  /// with the claim's `flock`; only a file that is not marked but whose record names a claim (a
  /// holder that died, or a claim of an earlier version of Liaison) sends the look to the
  /// kernel's table of locks (`/proc/locks`). A claim is reported while it is held, so a holder
  /// that died is never reported; one whose process has exited while a descendant holds the lock
  /// on (a self-daemonising program run under `liaison presence claim`) is reported with
  /// ``PresenceHolder/processHasExited`` set. On Apple platforms, which have neither such locks
  /// nor such a table, a record that names a claim is checked by taking the file's lock, shared,
  /// for a moment, without waiting (a claimant that meets it waits it out): the lock is what the
  /// kernel releases when the holder dies, while its process id can still name a zombie that its
  /// parent has not reaped.
  /// While the container is suspended, when the process may take no lock, a claim is judged by its
  /// record and its process's existence instead: a holder that died is then reported until its pid
  /// is gone (or for as long as another process reuses it). A claim being made (its record not
  /// written yet) is not seen there until it is.
  ///
  /// A process id names a process in the holder's pid namespace: processes in different
  /// containers (Docker, LXC) that share a volume see each other's leases, and claims as far as
  /// the above allows, but a ``PresenceHolder/processID`` from another namespace means nothing
  /// here.
  ///
  /// - Throws: ``LiaisonError/Code/claimInProgress`` when the presence's file stays marked as a
  ///   claim's for 100 ms without a record that reads whole (a claim being made, or a record
  ///   being written, by a process descheduled there): read again shortly.
  public var holder: PresenceHolder? {
    get throws(LiaisonError) { try holder(in: nil) }
  }

  /// The current holder, as ``holder`` reads it, judging claims by `table` when a listing read
  /// the kernel's table of locks already (one read for every presence listed).
  package func holder(in table: FileLockTable?) throws(LiaisonError) -> PresenceHolder? {
    // On the place's clock: a manual one spins until the test moves it, or the claimant writes.
    let deadline = container.clock.now.nanoseconds + Self.settleTime
    while true {
      switch try look(in: table).probe {
      case .known(let holder):
        return holder
      case .inProgress:
        if container.clock.now.nanoseconds > deadline {
          throw LiaisonError(
            .claimInProgress,
            "The presence '\(name)' has a record being written, or a damaged one, in '\(path)'. Read it again "
              + "shortly.",
            path: path)
        }
        sched_yield()
      }
    }
  }

  /// What one look at the presence's file tells about its holder.
  enum Probe: Equatable {
    /// The holder, or `nil` when the presence is not active.
    case known(PresenceHolder?)
    /// A record that does not read whole: being written, or damaged. The writer's write (or
    /// close) is a change of the file, so a watch learns the outcome by itself.
    case inProgress
  }

  /// What one look found, and whether it judged the presence held by a claim then: only then
  /// can a bare unlock of the file (Apple's `NOTE_FUNLOCK`) be news (see `PresenceWatch`).
  struct Look {
    let probe: Probe
    let heldExclusively: Bool
  }

  /// Looks at the presence once, never waiting (and, but for a claim's record where no table can
  /// be read, taking no lock): safe on the event loop's thread. Reads the record, then, for a
  /// claim, the kernel's table of locks: `table` when a listing read it already, else read now.
  ///
  /// - Parameter namingHolder: whether the holder returned must say whether its process has
  ///   exited (a `kill(pid, 0)`); ``isActive`` needs only whether there is one.
  func look(in table: FileLockTable? = nil, namingHolder: Bool = true) throws(LiaisonError) -> Look {
    guard let fd = try fileToLookAt() else { return Look(probe: .known(nil), heldExclusively: false) }
    // A record being written reads as a mix of the old and the new for a moment: read again.
    var record = try readRecord(fd)
    for _ in 0..<3 where record == .unreadable {
      sched_yield()
      record = try readRecord(fd)
    }
    let claim: PresenceHolder?
    switch record {
    case .holder(let lease) where lease.kind == .lease:
      let now = container.clock.now.nanoseconds
      return Look(probe: .known(lease.isLiveLease(now: now) ? lease.read(at: now) : nil), heldExclusively: false)
    case .holder(let recorded):
      claim = recorded
    case .empty, .unreadable:
      claim = nil
    }
    // A claim's record, none (a claim being made has the lock before its record), or one that
    // does not read whole: whether the file is locked decides.
    switch try lockState(fd, recordsAClaim: claim != nil, table: table) {
    case .exclusive:
      guard let claim else { return Look(probe: .inProgress, heldExclusively: true) }
      let exited = namingHolder && !Syscall.processExists(claim.processID)
      return Look(probe: .known(exited ? claim.withProcessExited() : claim), heldExclusively: true)
    case .unlocked, .shared, .unknown:
      // Released (a release clears the record first), or its holder died; a damaged record.
      return Look(probe: .known(nil), heldExclusively: false)
    case nil:
      // No table to tell (Apple platforms): no record is nobody, and one that stays unreadable
      // most likely one cut short by a crash. A claim's record: whether its lock is held decides,
      // not whether its process exists (a killed holder is a zombie, alive to `kill(pid, 0)`,
      // until its parent reaps it); while suspended, when no lock may be taken, its process.
      guard let claim else { return Look(probe: .known(nil), heldExclusively: false) }
      guard isLockedElsewhere(fd) ?? Syscall.processExists(claim.processID) else {
        return Look(probe: .known(nil), heldExclusively: false)
      }
      let exited = namingHolder && !Syscall.processExists(claim.processID)
      return Look(probe: .known(exited ? claim.withProcessExited() : claim), heldExclusively: true)
    }
  }

  /// Whether the lock of the file open on `fd`, which this process could not take exclusively, is
  /// held shared only (by looks): taken shared for a moment, and released.
  private func onlyLookersHold(_ fd: CInt) -> Bool {
    guard case .success(true) = Syscall.lock(fd, LOCK_SH | LOCK_NB) else { return false }
    Syscall.unlock(fd)
    return true
  }

  /// Whether another open file holds the `flock` of the file open on `fd`, found by taking it
  /// shared for a moment (`LOCK_SH | LOCK_NB`, which never waits); `nil` when that cannot tell:
  /// while the container is suspended, when this process may take no lock, or when the system
  /// refuses the lock (a sandbox, a file system without `flock`). Taken, the lock is released at
  /// once: a `NOTE_FUNLOCK` on Apple platforms, which a watch ignores when its last look found
  /// the file free (see `PresenceWatch`).
  private func isLockedElsewhere(_ fd: CInt) -> Bool? {
    let probed = try? container.lifecycle.briefly { () -> Bool? in
      switch Syscall.lock(fd, LOCK_SH | LOCK_NB) {
      case .success(true):
        Syscall.unlock(fd)
        return false
      case .success(false): return true
      case .failure: return nil
      }
    }
    return probed ?? nil
  }

  /// Whether the file open on `fd` is held by a claim. On Linux, a claim of this version marks
  /// its file with a lock that can be tested without taking it (``Syscall/markClaimed(_:)``), a
  /// `fcntl` of about a microsecond: a marked file is held. An unmarked one is free unless its
  /// record names a claim — a holder that died, or one of an earlier version of Liaison, which
  /// held the `flock` alone — and then the kernel's table of locks (`table`, or read now) tells
  /// whether the file is `flock`-ed. `nil` when nothing can tell (no table to read, or one that
  /// does not list every lock).
  private func lockState(
    _ fd: CInt, recordsAClaim: Bool, table: FileLockTable?
  ) throws(LiaisonError) -> LockState? {
    #if os(Linux) && !DarwinModel
      switch Syscall.isMarkedClaimed(fd) {
      case true: return .exclusive
      case false: if !recordsAClaim { return .unlocked }
      case nil: break
      }
    #endif
    guard let table = table ?? FileLockTable.read() else { return nil }
    let key: FileKey
    switch Syscall.status(fd) {
    case .success(let info): key = FileKey(device: deviceNumber(info.st_dev), inode: UInt64(info.st_ino))
    case .failure(let error): throw LiaisonError.system(error, "inspect", path: path)
    }
    return table.state(of: key) ?? (table.isComplete ? .unlocked : nil)
  }

  /// Claims the presence for as long as the returned ``PresenceClaim`` lives.
  ///
  /// - Parameter info: a short text for others to read in ``holder`` (at most
  ///   ``maximumInfoLength`` bytes).
  /// - Throws: ``LiaisonError/Code/alreadyClaimed`` when another holder has the presence (the
  ///   message names it, or says that its record is not written yet when the file stays locked
  ///   for 100 ms without one); ``LiaisonError/Code/suspended`` while the container is suspended;
  ///   ``LiaisonError`` when the file cannot be opened or is unsafe.
  public func claim(info: String? = nil) throws(LiaisonError) -> PresenceClaim {
    try Self.validate(info: info)
    // A brief access: a suspend() that starts meanwhile waits until the claim is either joined
    // (and so released by it) or refused and released.
    let claimed = try container.lifecycle.briefly { () throws(LiaisonError) -> PresenceClaim? in
      let claim = PresenceClaim(presence: self, info: info)
      try claim.acquire()
      guard container.lifecycle.join(claim) else {
        claim.release()
        return nil
      }
      return claim
    }
    guard let claim = claimed ?? nil else { throw ProcessLock.suspendedError(name) }
    return claim
  }

  /// Leases the presence for `duration`, renewed automatically every third of it for as long as
  /// the returned ``PresenceLease`` lives and the process runs.
  ///
  /// A lease holds no lock between renewals, so a suspended process (iOS) is not terminated for
  /// holding one: its heartbeat stops, and the presence reads inactive once `duration` has passed
  /// since the last renewal. When the process runs again the heartbeat renews the lease, or takes
  /// it back if it lapsed and nobody else took it; if somebody did, the lease is lost
  /// (``PresenceLease/isHeld`` turns `false`). A lease's holder that crashes stays reported until
  /// the lease lapses: choose `duration` as the longest you accept.
  ///
  /// - Parameters:
  ///   - duration: how long the lease stays valid without renewal; at least 10 ms.
  ///   - info: a short text for others to read in ``holder``.
  /// - Throws: ``LiaisonError/Code/alreadyClaimed`` when another holder has the presence.
  public func lease(for duration: Duration, info: String? = nil) throws(LiaisonError) -> PresenceLease {
    try Self.validate(info: info)
    guard duration >= .milliseconds(10) else {
      throw LiaisonError(.invalidArgument, "A lease of \(duration) is too short; give at least 10 milliseconds.")
    }
    if container.isSuspended { throw ProcessLock.suspendedError(name) }
    let lease = PresenceLease(presence: self, duration: duration, info: info)
    try lease.start()
    return lease
  }

  // MARK: - Shared machinery for claims, leases and probes

  /// How long a reader waits out a record being written, or a brief exclusive holder, before it
  /// concludes. Measured on the boot clock, not the container's: it bounds a spin on what
  /// another process does in real time (a manual clock, which does not move meanwhile, would
  /// spin for ever).
  static let settleTime: UInt64 = 100_000_000

  /// Opens the presence file for a claim or a lease, creating it.
  ///
  /// - Throws: ``LiaisonError/Code/readOnly`` when the container is read-only for this process.
  func openFileForWriting() throws(LiaisonError) -> CInt {
    try container.presenceFolder.openFile(name.rawValue, create: true)!
  }

  /// Opens the presence file for a watch of its changes, creating it; in a container this
  /// process may not write, opens it for reading (a watch writes nothing).
  ///
  /// - Throws: ``LiaisonError/Code/readOnly`` when the container is read-only for this process
  ///   and the file does not exist (the presence was never claimed or leased there): there is no
  ///   file to watch until a writer makes it.
  func openFile() throws(LiaisonError) -> CInt {
    do {
      return try openFileForWriting()
    } catch let error where error.code == .readOnly {
      guard let fd = try container.presenceFolder.openFile(name.rawValue, create: false, writing: false) else {
        throw LiaisonError(
          .readOnly,
          "The presence '\(name)' cannot be watched: it was never claimed or leased in this container, and the "
            + "container is read-only for this process, so its file '\(path)' cannot be made. Probe it with isActive "
            + "(it reads inactive), or watch it once a process that may write the container has claimed it.",
          errno: error.errno, path: path)
      }
      return fd
    }
  }

  func readRecord(_ fd: CInt) throws(LiaisonError) -> PresenceRecord.Decoded {
    switch Syscall.read(fd, count: PresenceRecord.maximumSize + 1) {
    case .success(let bytes): return PresenceRecord.decode(bytes)
    case .failure(let error): throw LiaisonError.system(error, "read", path: path)
    }
  }

  func writeRecord(_ fd: CInt, _ holder: PresenceHolder?) throws(LiaisonError) {
    let bytes = holder.map(PresenceRecord.encode) ?? []
    if case .failure(let error) = Syscall.replaceContent(fd, with: bytes) {
      throw LiaisonError.system(error, "write", path: path)
    }
    EventLoop.ring(doorbell)
  }

  /// Takes the exclusive lock on the presence file, waiting out the brief holders (probes and
  /// lease writers hold it for microseconds), and returns the record it finds.
  ///
  /// - Throws: ``LiaisonError/Code/alreadyClaimed`` when a live claim holds it;
  ///   ``LiaisonError/Code/claimInProgress`` when it stays locked for 100 ms without a record.
  func lockRecord(_ fd: CInt) throws(LiaisonError) -> PresenceRecord.Decoded {
    let deadline = container.clock.now.nanoseconds + Self.settleTime
    while true {
      switch Syscall.lock(fd, LOCK_EX | LOCK_NB) {
      case .success(true):
        return try readRecord(fd)
      case .success(false):
        // Held by a claim, or only by lookers: on Apple platforms a look at a claim's record
        // takes the file's lock shared for a moment, which a dead claimant's record (its pid a
        // zombie's, or reused) draws from every watcher at once. Shared taken, the holders are
        // lookers: wait them out.
        if case .holder(let holder) = try readRecord(fd), holder.kind == .claim,
          Syscall.processExists(holder.processID), !onlyLookersHold(fd)
        {
          throw alreadyClaimed(by: holder)
        }
        if container.clock.now.nanoseconds > deadline {
          // Held for longer than any probe or lease write: by a claimant between taking the lock
          // and writing its record (a process can be descheduled there for that long on a busy
          // machine), or by another program.
          throw LiaisonError(
            .claimInProgress,
            "The presence '\(name)' is held by a process that has not written its record yet (a claim being made, "
              + "or another program locking '\(path)'). Wait for it to be released, or check isActive first.",
            path: path)
        }
        sched_yield()
      case .failure(let error):
        throw LiaisonError.system(error, "lock", path: path)
      }
    }
  }

  func alreadyClaimed(by holder: PresenceHolder) -> LiaisonError {
    LiaisonError(
      .alreadyClaimed,
      "The presence '\(name)' is already held by \(holder). Wait for it to be released, or check isActive first.",
      path: path)
  }

  private static func validate(info: String?) throws(LiaisonError) {
    if let info, info.utf8.count > maximumInfoLength {
      throw LiaisonError(
        .invalidArgument,
        "The presence info is \(info.utf8.count) bytes long; keep it to \(maximumInfoLength) bytes.")
    }
  }
}

extension SharedContainer {
  /// Every presence in the container that has ever been claimed or leased, by name.
  ///
  /// ```swift
  /// for presence in try container.presences() {
  ///   print(presence.name, try presence.holder?.description ?? "inactive")
  /// }
  /// ```
  public func presences() throws(LiaisonError) -> [Presence] {
    try presenceNames().map { Presence(name: $0, container: self) }
  }

  /// The name of every presence in the container, sorted: for a listing that looks at one
  /// presence at a time (each ``Presence`` keeps a descriptor once looked at).
  package func presenceNames() throws(LiaisonError) -> [LiaisonName] {
    try presenceFolder.names()
  }
}

extension Presence: ClockedPart {
  /// The container's clock.
  package var clock: LiaisonClock { container.clock }
}
