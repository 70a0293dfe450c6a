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
  /// A descriptor kept open for probes, once the presence's file exists.
  private let probeDescriptor = Locked<CInt?>(nil)

  init(name: LiaisonName, container: SharedContainer) {
    self.name = name
    self.container = container
  }

  deinit {
    if let fd = probeDescriptor.withLock({ $0 }) { Syscall.close(fd) }
  }

  var path: String { container.presenceFolder.path(of: name.rawValue) }

  /// Whether the presence is claimed, or leased and not expired, right now.
  ///
  /// A non-blocking probe: a shared `flock` attempt on a descriptor kept open, and for leases a
  /// read of the record. It holds nothing afterwards, so it is safe to call from any thread, as
  /// often as needed. While the container is suspended (``SharedContainer/suspend()``) it takes
  /// no lock, even for that moment: it reads the record, and a claim counts as active while its
  /// process exists.
  public var isActive: Bool {
    get throws(LiaisonError) {
      try withProbe { fd throws(LiaisonError) in
        let probed = try container.lifecycle.briefly { () throws(LiaisonError) -> Bool in
          switch Syscall.lock(fd, LOCK_SH | LOCK_NB) {
          case .success(false):
            return true  // an exclusive holder: a claim, or a lease being written
          case .success(true):
            defer { Syscall.unlock(fd) }
            if case .holder(let holder) = try readRecord(fd) {
              return holder.isLiveLease(now: SystemClock.bootNanoseconds())
            }
            return false
          case .failure(let error):
            throw LiaisonError.system(error, "probe", path: path)
          }
        }
        if let probed { return probed }
        return try lookWithoutLocking(fd).probe != .known(nil)
      } ?? false
    }
  }

  /// The current holder, or `nil` when the presence is not active.
  ///
  /// The record of a claim is returned only while its lock is held, so a holder that died is
  /// never reported. A process id names a process in the holder's pid namespace: processes in
  /// different containers (Docker, LXC) that share a volume see each other's claims and leases,
  /// but a ``PresenceHolder/processID`` from another namespace means nothing here. Liveness is
  /// the kernel's lock, never the pid, except for the brief moment of a claim being written, and
  /// while the container is suspended (``SharedContainer/suspend()``): a suspended process takes
  /// no lock, so a claim is then judged by its record and its process's existence, and a holder
  /// that died is reported until its pid is gone (or for as long as another process reuses it).
  ///
  /// - Throws: ``LiaisonError/Code/claimInProgress`` when the presence is active but its holder
  ///   has not written its record within 100 ms (a claim being made by a process descheduled
  ///   there, or another program locking the file): read again shortly.
  public var holder: PresenceHolder? {
    get throws(LiaisonError) {
      let deadline = SystemClock.bootNanoseconds() + Self.settleTime
      while true {
        switch try probeHolder() {
        case .known(let holder):
          return holder
        case .inProgress:
          if SystemClock.bootNanoseconds() > deadline {
            throw LiaisonError(
              .claimInProgress,
              "The presence '\(name)' is active, but its holder has not written its record yet (a claim being made, "
                + "or another program locking '\(path)'). Read it again shortly.",
              path: path)
          }
          sched_yield()
        }
      }
    }
  }

  /// What one look at the presence's file tells about its holder.
  enum Probe: Equatable {
    /// The holder, or `nil` when the presence is not active.
    case known(PresenceHolder?)
    /// Locked without a complete record: a claim or a lease renewal being written. The writer's
    /// write (or close) is a change of the file, so a watch learns the outcome by itself.
    case inProgress
  }

  /// What one look found, and whether the file's lock was held exclusively then (by a claim, or
  /// a claim or lease being written), as far as the look could tell.
  struct Look {
    let probe: Probe
    let heldExclusively: Bool
  }

  /// Reads the holder once, without waiting: safe on the event loop's thread.
  func probeHolder() throws(LiaisonError) -> Probe {
    try look().probe
  }

  /// Looks at the presence once, without waiting: a shared `flock` attempt and a read of the
  /// record; while the container is suspended, the record alone (``lookWithoutLocking(_:)``).
  func look() throws(LiaisonError) -> Look {
    try withProbe { fd throws(LiaisonError) -> Look in
      let locked = try container.lifecycle.briefly { () throws(LiaisonError) -> Look in
        switch Syscall.lock(fd, LOCK_SH | LOCK_NB) {
        case .success(true):
          defer { Syscall.unlock(fd) }
          if case .holder(let holder) = try readRecord(fd), holder.isLiveLease(now: SystemClock.bootNanoseconds()) {
            return Look(probe: .known(holder), heldExclusively: false)
          }
          return Look(probe: .known(nil), heldExclusively: false)
        case .success(false):
          // Held exclusively: a claim (whose record is complete once written), or a lease being
          // renewed (whose complete record is the one being renewed, or its renewal).
          if case .holder(let holder) = try readRecord(fd) {
            if holder.kind == .claim, Syscall.processExists(holder.processID) {
              return Look(probe: .known(holder), heldExclusively: true)
            }
            if holder.isLiveLease(now: SystemClock.bootNanoseconds()) {
              return Look(probe: .known(holder), heldExclusively: true)
            }
          }
          return Look(probe: .inProgress, heldExclusively: true)
        case .failure(let error):
          throw LiaisonError.system(error, "probe", path: path)
        }
      }
      if let locked { return locked }
      return try lookWithoutLocking(fd)
    } ?? Look(probe: .known(nil), heldExclusively: false)
  }

  /// Looks at the record without any lock, while the container is suspended: a claim is taken
  /// as held while its process exists (a process that died leaves its record, and its pid may
  /// be reused), a lease until it expires. A claim being made, its record not written yet, is not
  /// seen. A record being rewritten (truncated, then written) reads empty or partial for a
  /// moment: such a read is made again, and one that stays partial is a record being written.
  private func lookWithoutLocking(_ fd: CInt) throws(LiaisonError) -> Look {
    var record = try readRecord(fd)
    for _ in 0..<3 {
      if case .holder = record { break }
      sched_yield()
      record = try readRecord(fd)
    }
    if record == .unreadable { return Look(probe: .inProgress, heldExclusively: true) }
    guard case .holder(let holder) = record else { return Look(probe: .known(nil), heldExclusively: false) }
    if holder.kind == .claim {
      let alive = Syscall.processExists(holder.processID)
      return Look(probe: .known(alive ? holder : nil), heldExclusively: alive)
    }
    return Look(
      probe: .known(holder.isLiveLease(now: SystemClock.bootNanoseconds()) ? holder : nil), heldExclusively: false)
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
  /// concludes.
  static let settleTime: UInt64 = 100_000_000

  /// Opens the presence file, creating it.
  func openFile() throws(LiaisonError) -> CInt {
    try container.presenceFolder.openFile(name.rawValue, create: true)!
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
    let deadline = SystemClock.bootNanoseconds() + Self.settleTime
    while true {
      switch Syscall.lock(fd, LOCK_EX | LOCK_NB) {
      case .success(true):
        return try readRecord(fd)
      case .success(false):
        if case .holder(let holder) = try readRecord(fd), holder.kind == .claim,
          Syscall.processExists(holder.processID)
        {
          throw alreadyClaimed(by: holder)
        }
        if SystemClock.bootNanoseconds() > deadline {
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

  /// Runs `body` with the probe descriptor, opening it once the file exists.
  ///
  /// - Returns: `nil` when the presence's file does not exist (never claimed).
  private func withProbe<T>(_ body: (CInt) throws(LiaisonError) -> T) throws(LiaisonError) -> T? {
    try probeDescriptor.withLock { descriptor throws(LiaisonError) -> T? in
      if descriptor == nil {
        descriptor = try container.presenceFolder.openFile(name.rawValue, create: false)
      }
      guard let fd = descriptor else { return nil }
      return try body(fd)
    }
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
    try presenceFolder.names().map { Presence(name: $0, container: self) }
  }
}
