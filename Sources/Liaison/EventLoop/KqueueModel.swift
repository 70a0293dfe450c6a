// A model of Apple's kernel events, compiled on Linux only, so that the logic that reacts to them
// runs in this CI (no Apple SDK here). Off unless LIAISON_KQUEUE_MODEL names a folder.
#if os(Linux)
  import Glibc

  /// What Apple's kernel reports to Liaison's event loop, reproduced on Linux for tests.
  ///
  /// On Apple platforms a watched file is a vnode dispatch source (`kqueue`'s `EVFILT_VNODE`,
  /// edge-triggered) plus a `notify(3)` registration; on Linux it is an `inotify` watch. The two
  /// differ where it matters: XNU posts `NOTE_FUNLOCK` for every `flock` release on the file, by any
  /// descriptor of any process, the watcher's own included, and reports no close; `inotify`
  /// reports closes and knows nothing of locks. Code that reacts to events (a presence's watch, the
  /// store's recovery from a dead writer) can be right on one and wrong on the other, so when the
  /// environment variable `LIAISON_KQUEUE_MODEL` names a folder, the Linux event loop delivers what
  /// the Apple one would:
  ///
  /// - **`NOTE_FUNLOCK`.** Every `flock` release that Liaison makes (``Syscall/unlock(_:)``) appends
  ///   a byte to `unlocks.DEVICE.INODE` in the model's folder, which every process in the model
  ///   watches beside the file: an unlock by anyone, this process included, reaches every watcher as
  ///   ``WatchEvents/unlocked``. A close that drops a lock (a holder's death) is the close of a
  ///   descriptor open for writing, which `inotify` reports (`IN_CLOSE_WRITE`), delivered as an
  ///   unlock too.
  /// - **`NOTE_WRITE`, `NOTE_EXTEND`, `NOTE_ATTRIB`**: `IN_MODIFY` and `IN_ATTRIB`, as
  ///   ``WatchEvents/changed``. No close is reported as a change.
  /// - **`notify(3)`**: a ring appends to `notify.HASH` in the folder, watched by every registration
  ///   of that name; rings before a delivery coalesce into one, as `notify(3)`'s may.
  /// - **Edge-triggered delivery (`EV_CLEAR`)**: what happened between two deliveries is merged
  ///   into one, with every kind it had, as `inotify`'s events are merged per wake-up of the loop.
  /// - **`EVFILT_PROC` `NOTE_EXIT`** and timers are what the Linux loop does already (`pidfd`, the
  ///   boot clock).
  ///
  /// What it leaves out, so what only a Mac or a device shows: unlocks by programs that do not run
  /// Liaison in the model (`flock(1)`), except through a close of a writable descriptor; a dropped
  /// lock whose descriptor was read-only; the order of events across processes (the model's files
  /// add a hop); `fcntl` locks (XNU posts nothing for them, nor does the model); the sandbox, which
  /// may keep a vnode event or a `notify(3)` name from crossing between apps; Dispatch's queues and
  /// clocks (the loop is one thread on the boot clock); and what iOS does to a suspended process.
  package enum KqueueModel {
    /// The model's folder, or `nil` when the model is off (always, outside tests).
    package static let folder: String? = {
      guard let value = getenv("LIAISON_KQUEUE_MODEL") else { return nil }
      let path = String(cString: value)
      return path.isEmpty ? nil : path
    }()

    /// Whether the event loop runs the model.
    static var isActive: Bool { folder != nil }

    /// The name of the file that records the unlocks of the file whose identity is `info`.
    private static func unlocksName(_ info: stat) -> String {
      "unlocks.\(deviceNumber(info.st_dev)).\(info.st_ino)"
    }

    /// How many `flock` releases Liaison made, in any process in the model, on the file at `path`
    /// (which must exist); for tests. Reads the model's files in `folder`.
    package static func unlockCount(in folder: String, ofFileAt path: String) -> Int {
      var info = stat()
      guard stat(path, &info) == 0 else { return 0 }
      var record = stat()
      guard stat(folder + "/" + unlocksName(info), &record) == 0 else { return 0 }
      return Int(record.st_size)
    }

    /// Called after every `flock` release that Liaison makes: the `NOTE_FUNLOCK` XNU would post.
    static func noteUnlock(_ fd: CInt) {
      guard let folder, case .success(let info) = Syscall.status(fd) else { return }
      append(folder + "/" + unlocksName(info))
    }

    /// Rings the `notify(3)` name `name`.
    static func ring(_ name: String) {
      guard let folder else { return }
      append(folder + "/" + doorbellName(name))
    }

    /// The record of unlocks of the file open as `fd`, made if needed, for watching.
    static func unlocksFile(of fd: CInt) throws(LiaisonError) -> String {
      switch Syscall.status(fd) {
      case .success(let info): return try made(unlocksName(info))
      case .failure(let error): throw LiaisonError.system(error, "inspect", path: "/proc/self/fd/\(fd)")
      }
    }

    /// The record of unlocks of the file `name` in the folder open as `folder`, made if needed.
    static func unlocksFile(folder: CInt, name: String) throws(LiaisonError) -> String {
      var info = stat()
      guard fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
        throw LiaisonError.system(currentErrno(), "inspect", path: name)
      }
      return try made(unlocksName(info))
    }

    /// The file that rings of `name` append to, made if needed, for watching.
    static func doorbellFile(_ name: String) throws(LiaisonError) -> String {
      try made(doorbellName(name))
    }

    private static func doorbellName(_ name: String) -> String { "notify.\(fnv1a(name.utf8))" }

    private static func made(_ name: String) throws(LiaisonError) -> String {
      let path = (folder ?? "") + "/" + name
      let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
      guard fd >= 0 else { throw LiaisonError.system(currentErrno(), "create the kqueue model's file", path: path) }
      Syscall.close(fd)
      return path
    }

    private static func append(_ path: String) {
      let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
      guard fd >= 0 else { return }
      var byte: UInt8 = 1
      _ = write(fd, &byte, 1)
      Syscall.close(fd)
    }
  }
#endif
