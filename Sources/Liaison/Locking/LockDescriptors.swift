/// A ``ProcessLock``'s open descriptors on its file, and its grants in this process.
///
/// It is the container's suspension participant for every grant of the lock: a
/// ``SharedContainer/suspend()`` ends them all through it, so that a grant costs no registration
/// of its own. The lifecycle holds it strongly and the lock removes it in its `deinit`: a weak
/// reference to the lock itself would give the lock a side table, and make every retain and
/// release of it (several per grant) take the runtime's slow path.
final class LockDescriptors: SuspensionParticipant {
  private struct State {
    /// Open descriptors not used by an acquisition, so that an uncontended lock costs two
    /// `flock` calls and no `open`.
    var idle: [CInt] = []
    /// The grants that hold the lock now.
    var held: [LockGuard.Grant] = []
  }

  private static let maximumIdle = 2
  private let name: LiaisonName
  private let state = Locked(State())

  init(name: LiaisonName) {
    self.name = name
  }

  /// An idle descriptor, if one is kept.
  func takeIdle() -> CInt? {
    state.withLock { $0.idle.popLast() }
  }

  /// Lists a grant just taken, for ``suspend()``.
  func add(_ grant: LockGuard.Grant) {
    state.withLock { $0.held.append(grant) }
  }

  /// Keeps `fd` for the next acquisition, or closes it when enough are kept; forgets `grant`,
  /// the grant that ended on it, if any.
  func giveBack(_ fd: CInt, endingGrant grant: LockGuard.Grant?) {
    let kept = state.withLock { state -> Bool in
      if let grant, let index = state.held.firstIndex(where: { $0.isSame(as: grant) }) {
        state.held.remove(at: index)
      }
      guard state.idle.count < Self.maximumIdle else { return false }
      state.idle.append(fd)
      return true
    }
    if !kept { Syscall.close(fd) }
  }

  /// Closes the idle descriptors (the lock is going away).
  func closeIdle() {
    let idle = state.withLock { state in
      defer { state.idle = [] }
      return state.idle
    }
    for fd in idle { Syscall.close(fd) }
  }

  /// Gives up every grant of the lock in this process; their guards report the loss.
  func suspend() {
    let grants = state.withLock { $0.held }
    let loss = LiaisonError(
      .lost, "The lock '\(name)' was given up by SharedContainer.suspend(); take it again after resume().")
    for grant in grants { grant.release(of: self, lost: loss) }
  }

  func resume() throws(LiaisonError) {}
}
