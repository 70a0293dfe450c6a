import Foundation

/// What each thread of a process has done so far, read from `/proc/PID/task` (Linux only: see
/// ``readsProc``): for a test that must see a process sleep, not poll.
public struct ThreadActivity: Sendable {
  /// One thread's counters.
  public struct Counters: Sendable, Equatable {
    /// Its name (`comm`), for messages.
    public let name: String
    /// Whether it is asleep (state `S`: blocked in the kernel, interruptibly).
    public let isAsleep: Bool
    /// Its voluntary and involuntary context switches: each time it slept or was put off the CPU.
    public let contextSwitches: Int
    /// Its CPU time, user and system, in clock ticks.
    public let cpuTicks: Int
    /// Its calls of `read` and the like (`syscr`).
    public let readCalls: Int
    /// The kernel function it waits in (`wchan`), when asleep: `do_sys_poll`, `do_epoll_wait`…
    public let waitChannel: String
    /// Whether it is a thread that wakes by itself, whatever the process does: Dispatch's event
    /// thread, asleep in `epoll_wait` (on Linux, Dispatch wakes it every second to look at its
    /// worker threads), or, under ThreadSanitizer, the sanitizer's background thread (unnamed,
    /// asleep in `nanosleep`, awake every 100 ms).
    public let wakesByItself: Bool
  }

  /// The counters of each thread, by thread id.
  public let threads: [Int32: Counters]

  /// Reads the threads of process `pid`; a thread that ends while it is read is left out.
  public init(process pid: Int32) throws {
    let folder = "/proc/\(pid)/task"
    let processName = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? ""
    var threads: [Int32: Counters] = [:]
    for entry in try FileManager.default.contentsOfDirectory(atPath: folder) {
      guard let id = Int32(entry) else { continue }
      let path = folder + "/" + entry
      guard let stat = try? String(contentsOfFile: path + "/stat", encoding: .utf8),
        let status = try? String(contentsOfFile: path + "/status", encoding: .utf8),
        let name = try? String(contentsOfFile: path + "/comm", encoding: .utf8),
        let afterName = stat.range(of: ")", options: .backwards)
      else { continue }
      // After "PID (NAME) ": state, then 10 fields, then utime and stime (proc(5)).
      let fields = stat[afterName.upperBound...].split(separator: " ")
      let switches = status.split(separator: "\n").filter { $0.contains("ctxt_switches:") }
        .compactMap { Int($0.split(separator: "\t").last ?? "") }
      let blockedIn = (try? String(contentsOfFile: path + "/wchan", encoding: .utf8)) ?? ""
      let io = (try? String(contentsOfFile: path + "/io", encoding: .utf8)) ?? ""
      let readCalls =
        io.split(separator: "\n").first { $0.hasPrefix("syscr:") }
        .flatMap { Int($0.dropFirst(6).trimmingCharacters(in: .whitespaces)) } ?? 0
      threads[id] = Counters(
        name: name.trimmingCharacters(in: .whitespacesAndNewlines), isAsleep: fields[0] == "S",
        contextSwitches: switches.reduce(0, +), cpuTicks: Int(fields[11])! + Int(fields[12])!,
        readCalls: readCalls, waitChannel: blockedIn,
        wakesByItself: blockedIn.contains("epoll_wait") || blockedIn == "ep_poll"
          || (underThreadSanitizer && id != pid && name == processName && blockedIn.contains("nanosleep")))
    }
    self.threads = threads
  }

  /// Whether every thread is asleep.
  public var allAsleep: Bool { threads.values.allSatisfy(\.isAsleep) }

  /// The threads of process `pid` that ran in 300 ms during which nothing woke them: waits until
  /// every thread is asleep, then looks again 300 ms later (see ``threadsThatRan(since:)``).
  ///
  /// The 300 ms are an observation of a process left alone, not a synchronisation: a process
  /// that polled every 100 ms or more often would wake up at least twice in them.
  public static func threadsThatRanWhileLeftAlone(_ pid: Int32) throws -> [String] {
    var before = try ThreadActivity(process: pid)
    try waitUntil("every thread of process \(pid) is asleep") {
      before = try ThreadActivity(process: pid)
      return before.allAsleep
    }
    usleep(300_000)
    return try ThreadActivity(process: pid).threadsThatRan(since: before)
  }

  /// The threads that ran since `earlier` (two context switches or CPU time more), or that
  /// started, leaving out those that wake by themselves (see ``Counters/wakesByItself``). A single
  /// wake-up is not counted: a thread of Dispatch's pool wakes once when its idle time runs out,
  /// to end (seen in a full run of the suites); a poll wakes at every period, at least twice in
  /// the 300 ms of ``threadsThatRanWhileLeftAlone(_:)`` for a period of 100 ms or less.
  public func threadsThatRan(since earlier: ThreadActivity) -> [String] {
    threads.sorted { $0.key < $1.key }.compactMap { id, now in
      if let before = earlier.threads[id], before.wakesByItself { return nil }
      guard let before = earlier.threads[id] else { return "\(id) \(now.name) (new)" }
      guard now.contextSwitches - before.contextSwitches >= 2 || now.cpuTicks != before.cpuTicks else { return nil }
      return
        "\(id) \(now.name) (\(now.contextSwitches - before.contextSwitches) switches, "
        + "\(now.cpuTicks - before.cpuTicks) ticks)"
    }
  }
}

/// Whether this build runs under ThreadSanitizer (`swift test --sanitize=thread`), and so the
/// test peer, built alike, too.
private let underThreadSanitizer: Bool = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil
