// The peer's commands on the process itself: its resources, suspension, signal handlers.

import Foundation
import GRDB
import Liaison
import LiaisonStore
import LiaisonTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The descriptors `hold-file-lock` holds, by path.
@MainActor private var heldFiles: [String: CInt] = [:]

let processCommands: [PeerCommandHandler] = [
  PeerCommandHandler(.counts, "→ ok DESCRIPTORS THREADS") { _ in
    let (descriptors, threads) = counts()
    return "\(descriptors) \(threads)"
  },
  PeerCommandHandler(
    .busyPool,
    "MS   keeps every thread of the cooperative pool busy for MS ms of the monotonic clock (a stop included) → ok busy"
  ) { words in
    let until = monotonicNanoseconds() + UInt64(words[1])! * 1_000_000
    // Twice the pool's width, at the highest priority: no other task of the pool runs meanwhile.
    for _ in 0..<(2 * ProcessInfo.processInfo.activeProcessorCount) {
      Task.detached(priority: .high) { while monotonicNanoseconds() < until {} }
    }
    return "busy"
  },
  PeerCommandHandler(.threadsNamed, "NAME  → ok COUNT (threads of this process called NAME)") { words in
    String(threadNames().filter { $0 == words[1] }.count)
  },
  PeerCommandHandler(.suspend, "→ ok suspended") { _ in
    container.suspend()
    return "suspended"
  },
  PeerCommandHandler(.resume, "→ ok resumed") { _ in
    try container.resume()
    return "resumed"
  },
  PeerCommandHandler(.grdbSuspend, "posts GRDB's Database.suspendNotification, as an iOS app may → ok posted") { _ in
    NotificationCenter.default.post(name: Database.suspendNotification, object: nil)
    return "posted"
  },
  PeerCommandHandler(.grdbResume, "posts GRDB's Database.resumeNotification → ok posted") { _ in
    NotificationCenter.default.post(name: Database.resumeNotification, object: nil)
    return "posted"
  },
  PeerCommandHandler(
    .holdFileLock,
    "PATH   takes an exclusive flock on the file PATH (which must exist), as another program may → ok held"
  ) { words in
    let fd = open(words[1], O_RDWR | O_CLOEXEC)
    guard fd >= 0 else { throw PeerFailure("cannot open \(words[1]): errno \(errno)") }
    guard flock(fd, LOCK_EX) == 0 else { throw PeerFailure("cannot lock \(words[1]): errno \(errno)") }
    heldFiles[words[1]] = fd
    return "held"
  },
  PeerCommandHandler(.probeFileLock, "PATH   whether an exclusive flock on PATH could be taken now → ok free | ok busy")
  {
    words in
    let fd = open(words[1], O_RDWR | O_CLOEXEC)
    guard fd >= 0 else { throw PeerFailure("cannot open \(words[1]): errno \(errno)") }
    defer { close(fd) }
    return flock(fd, LOCK_EX | LOCK_NB) == 0 ? "free" : "busy"
  },
  PeerCommandHandler(.releaseFileLock, "PATH   ends what hold-file-lock PATH holds → ok released") { words in
    if let fd = heldFiles.removeValue(forKey: words[1]) { close(fd) }
    return "released"
  },
  PeerCommandHandler(
    .hostHandler,
    """
    installs a no-op handler with SA_RESTART for the signal Liaison interrupts its waits with, as a \
    host program may (the Go runtime does): send it before any wait → ok installed
    """
  ) { _ in
    var action = sigaction()
    #if os(Linux)
      action.__sigaction_handler.sa_handler = { _ in }
    #else
      action.__sigaction_u.__sa_handler = { _ in }
    #endif
    sigemptyset(&action.sa_mask)
    action.sa_flags = SA_RESTART
    guard sigaction(InterruptSignal.number, &action, nil) == 0 else { return "sigaction failed: errno \(errno)" }
    return "installed"
  },
  PeerCommandHandler(
    .dieBeforeRing, "→ ok armed (the next commit of defaults or of a database SIGKILLs this process before it rings)"
  ) { _ in
    StoreTestHooks.beforeRing.set {
      kill(getpid(), SIGKILL)
      while true { pause() }  // another thread may take the signal: this one goes no further
    }
    return "armed"
  },
]

/// A command that could not do what it was asked, for a reason the system gave.
struct PeerFailure: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
