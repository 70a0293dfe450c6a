// A simulated remote host on this machine, for the tests of what LiaisonPostgres does when the
// network between a client and the server dies: a Linux network namespace joined to this one by a
// pair of virtual Ethernet interfaces, whose traffic `cut()` drops without a word.

import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Another host, simulated: a network namespace (`ip netns`) with a link to this one, on which a
/// peer process runs and reaches a server listening on ``hostAddress``; ``cut()`` makes each side
/// vanish for the other, as a host that loses power or a network that partitions does.
///
/// ```swift
/// @Test(.enabled(if: NetworkNamespace.mustRun, "needs root and iproute2: apt-get install iproute2"))
/// func aClientCutOffLosesItsLock() throws {
///   let host = try NetworkNamespace.create()
///   let server = try PostgresTestServer.start(listenAddresses: ["127.0.0.1", host.hostAddress])
///   let command = host.command(["/path/to/peer", server.url(host: host.hostAddress)])
///   let peer = try ChildProcess(command[0], Array(command.dropFirst()))
///   // … the peer takes a lock …
///   try host.cut()
///   // … the lock must come free here once the server gives the silent session up …
/// }
/// ```
///
/// Each namespace has a /30 of its own in 10.231.0.0/16 (``hostAddress`` on this side,
/// ``namespaceAddress`` inside), and names that say its number: the namespace `liaisonN`, the
/// interfaces `liaisonNh` (here) and `liaisonNn` (inside). The number is claimed by creating the
/// namespace, which fails when another process has it, so parallel test processes never share
/// one. Nothing but what it creates is touched. Inside, only ``hostAddress`` is reachable (and
/// the namespace's own loopback): not this side's 127.0.0.1.
///
/// Needs Linux, root (`CAP_NET_ADMIN`, `CAP_SYS_ADMIN`) and iproute2 (`ip`, `tc`).
///
/// Guarantees: the namespace and its interfaces are deleted by ``remove()``, by `deinit`, by an
/// `atexit` hook when this process exits, and, when this process dies without exiting (a crash,
/// `SIGKILL`), by a watchdog child process that notices (see ``PostgresTestServer``).
public final class NetworkNamespace: Sendable {
  /// The namespace's name, for `ip netns exec`.
  public let name: String
  /// The address of this side of the link: where a server listens for the namespace's peers.
  public let hostAddress: String
  /// The address of the namespace's side: where its peers' connections come from.
  public let namespaceAddress: String
  /// The interface on this side of the link.
  public let hostInterface: String
  /// The interface inside the namespace.
  public let namespaceInterface: String

  private let tools: NetworkTools
  private let watchdog: Watchdog
  private let state = NamespaceState()

  // MARK: - Availability

  /// Why no namespace can be made here, or `nil` when one can: not Linux, not root, no iproute2,
  /// or the kernel refuses (as in a container without `CAP_SYS_ADMIN`).
  public static var unavailableReason: String? { availability.reason }

  /// Whether the tests that need a namespace must run: one can be made, or this is CI
  /// (`CI=true`), where such a test runs and fails with ``unavailableReason`` instead of being
  /// skipped.
  public static var mustRun: Bool { unavailableReason == nil || runsInCI }

  private static let availability: (tools: NetworkTools?, reason: String?) = {
    #if os(Linux)
      guard isRoot else { return (nil, "making a network namespace needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)") }
      guard let tools = NetworkTools.find() else {
        return (nil, "`ip` and `tc` are not installed: `apt-get install iproute2`")
      }
      // A namespace with a silent loopback: what `create()` and `cut()` need of the kernel.
      let probe = "liaison-probe-\(getpid())"
      _ = try? runCommand([tools.ip, "netns", "del", probe])  // left by a dead process of this pid
      do {
        try runCommand([tools.ip, "netns", "add", probe])
        defer { _ = try? runCommand([tools.ip, "netns", "del", probe]) }
        try runCommand([tools.tc, "-n", probe, "qdisc", "add", "dev", "lo", "root", "blackhole"])
      } catch {
        return (nil, "this machine cannot make a network namespace with a silent link: \(error)")
      }
      return (tools, nil)
    #else
      return (nil, "network namespaces are a Linux feature")
    #endif
  }()

  // MARK: - Making one

  /// Makes a namespace with a link to this one, both ends up and addressed.
  ///
  /// - Throws: ``TestInfrastructureError`` when namespaces are not available here
  ///   (``unavailableReason``), or a command fails, with its error output.
  public static func create() throws -> NetworkNamespace {
    guard let tools = availability.tools else {
      throw TestInfrastructureError(unavailableReason ?? "network namespaces are not available")
    }
    let first = Int.random(in: 0..<numbers)
    for attempt in 0..<64 {
      let number = (first + attempt) % numbers
      let name = "liaison\(number)"
      do {
        try runCommand([tools.ip, "netns", "add", name])
      } catch let failure as CommandFailure where failure.errors.contains("File exists") {
        continue  // another process's
      }
      // The name is this process's from here on.
      let hostInterface = name + "h"
      let namespaceInterface = name + "n"
      let watchdog: Watchdog
      do {
        watchdog = try Watchdog(script: cleanupScript, arguments: [tools.ip, name, hostInterface])
      } catch {
        _ = try? runCommand([tools.ip, "netns", "del", name])
        throw error
      }
      // Locally administered addresses that say the number and the end: 02:6c:69 ("li"), N, end.
      let mac = { (end: Int) in
        ([0x02, 0x6c, 0x69, number >> 8, number & 0xff, end]).map(twoHexDigits).joined(separator: ":")
      }
      do {
        try runCommand([
          tools.ip, "link", "add", hostInterface, "address", mac(1), "type", "veth",
          "peer", "name", namespaceInterface, "address", mac(2), "netns", name,
        ])
      } catch let failure as CommandFailure where failure.errors.contains("File exists") {
        // A link left by a namespace whose deletion the kernel has not finished.
        watchdog.abandon()
        continue
      } catch {
        watchdog.abandon()
        throw error
      }
      let base = number * 4
      let address = { (host: Int) in "10.231.\(base >> 8).\((base & 0xff) + host)" }
      let namespace = NetworkNamespace(
        name: name, hostAddress: address(1), namespaceAddress: address(2), hostInterface: hostInterface,
        namespaceInterface: namespaceInterface, tools: tools, watchdog: watchdog)
      // Permanent neighbours: no ARP, which `cut()` would silence too, and the kernel would then
      // report the other side unreachable ("No route to host") instead of leaving it silent.
      try runCommand(
        [tools.ip, "-batch", "-"],
        input: [
          "addr add \(address(1))/30 dev \(hostInterface)",
          "link set \(hostInterface) up",
          "neigh replace \(address(2)) lladdr \(mac(2)) dev \(hostInterface) nud permanent",
        ].joined(separator: "\n"))
      try runCommand(
        [tools.ip, "-n", name, "-batch", "-"],
        input: [
          "link set lo up",
          "addr add \(address(2))/30 dev \(namespaceInterface)",
          "link set \(namespaceInterface) up",
          "neigh replace \(address(1)) lladdr \(mac(1)) dev \(namespaceInterface) nud permanent",
        ].joined(separator: "\n"))
      return namespace
    }
    throw TestInfrastructureError("no free network namespace number after 64 tries (liaison0-\(numbers - 1))")
  }

  /// How many /30 fit in 10.231.0.0/16.
  private static let numbers = 16384

  private init(
    name: String, hostAddress: String, namespaceAddress: String, hostInterface: String,
    namespaceInterface: String, tools: NetworkTools, watchdog: Watchdog
  ) {
    self.name = name
    self.hostAddress = hostAddress
    self.namespaceAddress = namespaceAddress
    self.hostInterface = hostInterface
    self.namespaceInterface = namespaceInterface
    self.tools = tools
    self.watchdog = watchdog
    ExitCleanup.register(self) { [weak self] in self?.remove() }
  }

  deinit { remove() }

  // MARK: - Using it

  /// `arguments` (a program and its arguments) run inside the namespace: `ip netns exec NAME`
  /// before them. Start it with `ChildProcess(command[0], Array(command.dropFirst()))`.
  public func command(_ arguments: [String]) -> [String] {
    [tools.ip, "netns", "exec", name] + arguments
  }

  /// Whether the link is cut.
  public var isCut: Bool { state.withLock { $0.cut } }

  /// Cuts the link: from now on, every packet either side sends is dropped, in silence.
  ///
  /// Each end's interface gets a `blackhole` queueing discipline, which frees every packet it is
  /// given and tells the sender it was sent: no reset, no FIN, no ICMP error, no socket closed.
  /// An established TCP connection stays `ESTABLISHED` on both sides and retransmits into the
  /// void; a new one hangs in `SYN-SENT` until its connect timeout; once ``restore()`` is called,
  /// retransmission delivers what was held back and the connection goes on.
  ///
  /// The other ways drop traffic, or drop it with a word. Setting a link down takes its routes
  /// with it: this side then sends the namespace's traffic to its default gateway (out onto the
  /// real network), and the namespace's side tells its sockets the network is unreachable.
  /// `netem loss 100%` is not in every kernel (not in this project's machines'), and iptables or
  /// nftables are not installed. The neighbours are permanent entries, so that no ARP request,
  /// which the blackhole would drop too, is ever needed (a failed one reports "No route to host").
  ///
  /// Calling it again does nothing.
  ///
  /// - Throws: when `tc` fails, with its error output.
  public func cut() throws {
    try state.withLock { state in
      guard !state.cut, !state.removed else { return }
      try runCommand([tools.tc, "qdisc", "replace", "dev", hostInterface, "root", "blackhole"])
      try runCommand([tools.tc, "-n", name, "qdisc", "replace", "dev", namespaceInterface, "root", "blackhole"])
      state.cut = true
    }
  }

  /// Mends the link that ``cut()`` cut: packets flow again, and what the connections retransmit
  /// arrives. Does nothing when the link is not cut.
  ///
  /// - Throws: when `tc` fails, with its error output.
  public func restore() throws {
    try state.withLock { state in
      guard state.cut, !state.removed else { return }
      try runCommand([tools.tc, "qdisc", "del", "dev", hostInterface, "root"])
      try runCommand([tools.tc, "-n", name, "qdisc", "del", "dev", namespaceInterface, "root"])
      state.cut = false
    }
  }

  /// Deletes the link and the namespace. A process still running inside keeps the namespace (with
  /// no link) until it ends. Calling it again does nothing; `deinit` and this process's exit call
  /// it.
  public func remove() {
    let removedNow = state.withLock { state -> Bool in
      guard !state.removed else { return false }
      state.removed = true
      // The link first: deleting a namespace deletes its interfaces only once the kernel gets to
      // it, after `ip netns del` has returned.
      _ = try? runCommand([tools.ip, "link", "del", hostInterface])
      _ = try? runCommand([tools.ip, "netns", "del", name])
      return true
    }
    guard removedNow else { return }
    watchdog.dismiss()
    ExitCleanup.unregister(self)
  }

  /// The watchdog's cleanup: `$1` is `ip`, `$2` the namespace, `$3` the interface on this side.
  private static let cleanupScript = #"""
    "$1" link del "$3" 2>/dev/null
    "$1" netns del "$2" 2>/dev/null
    """#
}

/// Whether a namespace's link is cut, and whether it is removed, guarded by a lock.
private final class NamespaceState: @unchecked Sendable {
  struct Value {
    var cut = false
    var removed = false
  }

  private let lock = NSLock()
  private var value = Value()

  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}

private func twoHexDigits(_ byte: Int) -> String {
  let digits = String(byte, radix: 16)
  return digits.count == 1 ? "0" + digits : digits
}

/// Where iproute2's `ip` and `tc` are.
private struct NetworkTools: Sendable {
  let ip: String
  let tc: String

  static func find() -> NetworkTools? {
    let folders = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
    let find = { (name: String) in
      folders.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
    guard let ip = find("ip"), let tc = find("tc") else { return nil }
    return NetworkTools(ip: ip, tc: tc)
  }
}
