// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  // A model of the Darwin calls Liaison's Apple code makes, so that this code (the `#if
  // canImport(Darwin) || DarwinModel` branches of Liaison and LiaisonStore) compiles and runs on
  // Linux. Built only with the package trait `DarwinModel`, which only Liaison's own CI enables
  // (.ci/run); no product ever contains it.
  //
  // What the Apple code calls, and what the model gives it, each as XNU (xnu-11417), libdispatch
  // (1542) and libnotify behave where Liaison depends on it:
  //
  // - notify(3) (`Notify.swift`): `notify_register_dispatch`, `notify_post`, `notify_cancel`.
  //   A post reaches every registration of the name in every process of the model; posts made
  //   before a delivery runs coalesce into one, as notifyd's may.
  // - Dispatch vnode sources (`VnodeSource.swift`): `DispatchSource.makeFileSystemObjectSource`,
  //   edge-triggered (EV_CLEAR): what happened between two deliveries is merged into one `data`.
  //   NOTE_WRITE and NOTE_EXTEND for a write, NOTE_ATTRIB for an attribute change, and NOTE_FUNLOCK
  //   for every `flock` release and for the last close of a descriptor that held one, by any process
  //   of the model, the watcher's own included. None for `fcntl` locks (SQLite's), and none for a
  //   close: XNU reports neither.
  // - `flock` and `close` (`Locks.swift`): the real calls, plus what the model needs to post
  //   NOTE_FUNLOCK; a holder's death is seen through a file that the kernel closes with the
  //   holder's descriptors, once the kernel's lock table shows the lock gone.
  // - Dispatch process sources (`ProcessSource.swift`): `DispatchSource.makeProcessSource`,
  //   NOTE_EXIT when the process exits (a `pidfd` turns readable), which is before its parent reaps
  //   it, as XNU posts it; at once for a process that does not exist, as libdispatch fakes it. And
  //   `kill(pid, 0)` is Linux's own, which, as XNU's, answers 0 for a zombie.
  // - `pthread_kill` (`Threads.swift`): `ENOTSUP` for a thread of Dispatch's pool (which runs
  //   Swift's cooperative pool too), as XNU refuses it to every workqueue thread; the real call
  //   for any other thread.
  // - `O_EVTONLY`: an ordinary read-only open.
  // - Data protection (`DataProtection.swift`): `fcntl(F_SETPROTECTIONCLASS / F_GETPROTECTIONCLASS)`,
  //   `getattrlistat(ATTR_CMN_DATA_PROTECT_FLAGS)` and `openat`: a class per file, a new file
  //   takes its folder's, and a locked device refuses opens of class A and B files with `EPERM`.
  //
  // What it leaves out, so what only a Mac or a device shows: the sandbox (which may keep a vnode
  // event or a notify(3) name from crossing between apps); notify's state words and its
  // `NOTIFY_REUSE` flags; dup'd descriptors and inherited ones (a lock's release is posted at the
  // close of the descriptor that took it, not at the last close of its open file description);
  // unlocks by programs that do not run in the model (`flock(1)`); the order of events across
  // processes (the model's files add a hop); data protection's keys, and the classes of the files
  // SQLite makes (DataProtection.swift); and what iOS does to a suspended process (the tests check
  // what Liaison holds instead, in the kernel's lock table).

  import CLiaison
  import Glibc

  /// The model's shared folder: where every process of the model (a test and the peers it starts,
  /// which inherit the environment) meets. `LIAISON_DARWIN_MODEL` names it; by default a folder of
  /// this user's in `/tmp`.
  public enum DarwinModelFiles {
    public static let folder: String = {
      if let value = getenv("LIAISON_DARWIN_MODEL"), value.pointee != 0 { return String(cString: value) }
      let path = "/tmp/liaison-darwin-model-\(getuid())"
      mkdir(path, 0o700)
      return path
    }()

    /// How many times a `flock` was taken on the file at `path` (which must exist), by every
    /// process of the model: each release of one is a NOTE_FUNLOCK. For tests.
    public static func lockCount(ofFileAt path: String) -> Int {
      var info = stat()
      guard stat(path, &info) == 0, let folder = opendir(unlocksFolder(info)) else { return 0 }
      defer { closedir(folder) }
      var count = 0
      while let entry = readdir(folder) {
        if entry.pointee.d_name.0 != UInt8(ascii: ".") { count += 1 }
      }
      return count
    }

    /// The folder whose files stand for the `flock`s taken on the file whose identity is `info`.
    static func unlocksFolder(_ info: stat) -> String {
      folder + "/unlocks.\(UInt64(truncatingIfNeeded: info.st_dev)).\(info.st_ino)"
    }
  }

  /// A 64-bit FNV-1a hash, for file names made from arbitrary text.
  func modelHash(_ text: String) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    return hash
  }
#endif
