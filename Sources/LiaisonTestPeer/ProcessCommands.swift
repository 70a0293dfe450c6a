// The peer's commands on the process itself: its resources, suspension, signal handlers.

import Liaison
import LiaisonStore

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

let processCommands: [PeerCommand] = [
  PeerCommand("counts", "→ ok DESCRIPTORS THREADS") { _ in
    let (descriptors, threads) = counts()
    return "\(descriptors) \(threads)"
  },
  PeerCommand("threads-named", "NAME  → ok COUNT (threads of this process called NAME)") { words in
    String(threadNames().filter { $0 == words[1] }.count)
  },
  PeerCommand("suspend", "→ ok suspended") { _ in
    container.suspend()
    return "suspended"
  },
  PeerCommand("resume", "→ ok resumed") { _ in
    try container.resume()
    return "resumed"
  },
  PeerCommand(
    "host-handler",
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
  PeerCommand(
    "die-before-ring", "→ ok armed (the next commit of defaults or of a database SIGKILLs this process before it rings)"
  ) { _ in
    StoreTestHooks.beforeRing.withLock {
      $0 = {
        kill(getpid(), SIGKILL)
        while true { pause() }  // another thread may take the signal: this one goes no further
      }
    }
    return "armed"
  },
]
