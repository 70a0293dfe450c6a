// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  import Glibc

  // `flock` and `close` as Liaison's Apple code calls them: the real calls, and what the model
  // needs to post XNU's NOTE_FUNLOCK to every vnode source watching the file, in every process.
  //
  // Each `flock` taken makes a file of the model in the locked file's folder of locks
  // (`unlocks.DEV.INODE/PID.FD.SEQUENCE`), kept open, for writing, for as long as the lock is held:
  // - a release (`flock(LOCK_UN)`, or `close` of the locked descriptor) writes a byte into it and
  //   closes it: the write is the NOTE_FUNLOCK, at once;
  // - a holder that dies closes it without a write (the kernel closes its descriptors): the model's
  //   sources see that close and post NOTE_FUNLOCK once the kernel's lock table shows the dead
  //   process's `flock` gone (the kernel releases the two files in no set order).

  /// The C library's `flock` (Swift's `Glibc.flock` names the C struct of that name too).
  @_silgen_name("flock") private func systemFlock(_ fd: Int32, _ operation: Int32) -> Int32

  private let witnesses = ModelMutex()
  nonisolated(unsafe) private var witnessOf: [Int32: Int32] = [:]
  nonisolated(unsafe) private var sequence = 0

  /// `flock(2)`, which also records a lock taken, and reports its release, for the model's vnode
  /// sources.
  public func flock(_ fd: Int32, _ operation: Int32) -> Int32 {
    let result = systemFlock(fd, operation)
    guard result == 0 else { return result }
    if operation & LOCK_UN != 0 {
      released(fd)
    } else {
      witnesses.locked {
        guard witnessOf[fd] == nil else { return }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return }
        let folder = DarwinModelFiles.unlocksFolder(info)
        mkdir(folder, 0o700)
        sequence += 1
        let witness = open("\(folder)/\(getpid()).\(fd).\(sequence)", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        if witness >= 0 { witnessOf[fd] = witness }
      }
    }
    return result
  }

  /// `close(2)`: a descriptor that held a `flock` releases it, which the model reports.
  public func close(_ fd: Int32) -> Int32 {
    witnesses.locked {
      let result = Glibc.close(fd)
      if let witness = witnessOf.removeValue(forKey: fd) { report(witness) }
      return result
    }
  }

  private func released(_ fd: Int32) {
    witnesses.locked {
      if let witness = witnessOf.removeValue(forKey: fd) { report(witness) }
    }
  }

  private func report(_ witness: Int32) {
    var byte: UInt8 = 1
    _ = write(witness, &byte, 1)
    Glibc.close(witness)
  }
#endif
