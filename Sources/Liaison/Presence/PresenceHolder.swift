#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// Who holds a presence: the process, since when, and what it said about itself.
public struct PresenceHolder: Sendable, Hashable, CustomStringConvertible {
  /// How the presence is held.
  public enum Kind: String, Sendable, Hashable {
    /// A claim: a lock held for as long as the holder runs, released by the kernel if it dies.
    case claim
    /// A lease: valid until it expires unless renewed; no lock is held.
    case lease
  }

  /// How the presence is held.
  public let kind: Kind
  /// The holder's process id.
  public let processID: Int32
  /// When the holder claimed or first leased the presence (wall clock).
  public let since: Date
  /// The text the holder gave when claiming, if any.
  public let info: String?
  /// The holder's host name, for a presence held through PostgreSQL; `nil` for a local one,
  /// whose holder is on this machine.
  public let host: String?
  /// For a lease, when it lapses unless renewed, on the shared boot clock (nanoseconds).
  package let leaseExpiry: UInt64?
  /// For a lease, the lease's identity, so that only its holder renews or releases it.
  package let leaseToken: UInt64?
  /// Whether the claim's process (``processID``) has exited while the claim lives on: a process
  /// it passed the claim's descriptor to holds the lock, a descendant such as the worker a
  /// self-daemonising program leaves running (`liaison presence claim NAME -- sh -c 'worker &'`).
  /// The holder's own pid is not recorded. Always `false` for a lease.
  public let processHasExited: Bool
  /// For a lease, when it was read, on its place's clock (nanoseconds): ``leaseRemaining`` counts
  /// from it. Not part of the holder's identity (equality and hash leave it out).
  package private(set) var readAt: UInt64?

  package init(
    kind: Kind, processID: Int32, since: Date, info: String?, host: String? = nil, leaseExpiry: UInt64? = nil,
    leaseToken: UInt64? = nil, processHasExited: Bool = false
  ) {
    self.host = host
    self.processHasExited = processHasExited
    self.kind = kind
    self.processID = processID
    self.since = since
    self.info = info
    self.leaseExpiry = leaseExpiry
    self.leaseToken = leaseToken
  }

  /// For a lease, how long it stays valid without renewal, as of the moment it was read.
  public var leaseRemaining: Duration? {
    guard let leaseExpiry else { return nil }
    // A holder that no place read (made by hand) counts on the system's clock.
    let now = readAt ?? LiaisonClock.system.now.nanoseconds
    return .nanoseconds(leaseExpiry > now ? Int64(clamping: leaseExpiry - now) : 0)
  }

  /// This holder, noted as read at `now` on its place's clock (see ``leaseRemaining``).
  func read(at now: UInt64) -> PresenceHolder {
    var holder = self
    holder.readAt = now
    return holder
  }

  public static func == (lhs: PresenceHolder, rhs: PresenceHolder) -> Bool {
    lhs.kind == rhs.kind && lhs.processID == rhs.processID && lhs.since == rhs.since && lhs.info == rhs.info
      && lhs.host == rhs.host && lhs.leaseExpiry == rhs.leaseExpiry && lhs.leaseToken == rhs.leaseToken
      && lhs.processHasExited == rhs.processHasExited
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(kind)
    hasher.combine(processID)
    hasher.combine(since)
    hasher.combine(info)
    hasher.combine(host)
    hasher.combine(leaseExpiry)
    hasher.combine(leaseToken)
    hasher.combine(processHasExited)
  }

  /// Whether this is a lease that has not expired.
  func isLiveLease(now: UInt64) -> Bool {
    kind == .lease && (leaseExpiry ?? 0) > now
  }

  /// This holder, noted as held by a descendant of its exited process.
  func withProcessExited() -> PresenceHolder {
    var holder = PresenceHolder(
      kind: kind, processID: processID, since: since, info: info, host: host, leaseExpiry: leaseExpiry,
      leaseToken: leaseToken, processHasExited: true)
    holder.readAt = readAt
    return holder
  }

  public var description: String {
    var text = "pid \(processID)\(host.map { " on \($0)" } ?? "") (\(kind.rawValue))"
    if processHasExited { text += ", held by a descendant of pid \(processID), which has exited" }
    if let info { text += ": \(info)" }
    return text
  }
}

/// The text format of a presence file.
///
/// ```
/// liaison-presence 1
/// kind claim
/// pid 4242
/// since 1732262400.25
/// info recording%20episode%207      (optional; bytes below 0x20, '%' and 0x7F escaped)
/// token 9f3a…                       (leases only)
/// expires 123456789000              (leases only; boot clock, nanoseconds)
/// end
/// ```
///
/// An empty file means nobody holds the presence. A file without the final `end` line is being
/// written (or was cut short) and is read again. `encode` and `decode` are `package` so that the
/// fuzzer (`LiaisonFuzz`) reaches them.
package enum PresenceRecord {
  static let header = "liaison-presence 1"
  /// Longest file the decoder reads; longer ones are corrupt.
  package static let maximumSize = 4096

  package enum Decoded: Equatable {
    case empty
    case holder(PresenceHolder)
    /// Not (yet) a whole record: being written, cut short, or garbage.
    case unreadable
  }

  package static func encode(_ holder: PresenceHolder) -> [UInt8] {
    var lines = [
      header,
      "kind \(holder.kind.rawValue)",
      "pid \(holder.processID)",
      "since \(holder.since.timeIntervalSince1970)",
    ]
    if let info = holder.info { lines.append("info \(escape(info))") }
    if let token = holder.leaseToken { lines.append("token \(String(token, radix: 16))") }
    if let expiry = holder.leaseExpiry { lines.append("expires \(expiry)") }
    lines.append("end")
    return Array((lines.joined(separator: "\n") + "\n").utf8)
  }

  package static func decode(_ bytes: [UInt8]) -> Decoded {
    if bytes.isEmpty { return .empty }
    guard bytes.count <= maximumSize, bytes.last == UInt8(ascii: "\n") else { return .unreadable }
    let lines = bytes.dropLast().split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
    guard lines.count >= 5, lines[0].elementsEqual(header.utf8), lines[lines.count - 1].elementsEqual("end".utf8)
    else { return .unreadable }
    var fields: [String: String] = [:]
    for line in lines.dropFirst().dropLast() {
      // Split on the byte: in Characters, a space followed by a combining mark is one character.
      guard let space = line.firstIndex(of: UInt8(ascii: " ")) else { return .unreadable }
      let key = String(decoding: line[..<space], as: UTF8.self)
      guard fields[key] == nil else { return .unreadable }
      fields[key] = String(decoding: line[(space + 1)...], as: UTF8.self)
    }
    guard let kind = fields["kind"].flatMap(PresenceHolder.Kind.init(rawValue:)),
      let pid = fields["pid"].flatMap(Int32.init), pid > 0,
      let since = fields["since"].flatMap(Double.init), since.isFinite
    else { return .unreadable }
    var info: String?
    if let escaped = fields["info"] {
      guard let text = unescape(escaped) else { return .unreadable }
      info = text
    }
    var token: UInt64?
    var expiry: UInt64?
    if kind == .lease {
      guard let leaseToken = fields["token"].flatMap({ UInt64($0, radix: 16) }),
        let leaseExpiry = fields["expires"].flatMap({ UInt64($0) })
      else { return .unreadable }
      token = leaseToken
      expiry = leaseExpiry
    }
    return .holder(
      PresenceHolder(
        kind: kind, processID: pid, since: Date(timeIntervalSince1970: since), info: info,
        leaseExpiry: expiry, leaseToken: token))
  }

  /// Percent-escapes control bytes, DEL and '%' so that the text stays on one line.
  private static func escape(_ text: String) -> String {
    String(decoding: escapeBytes(text), as: UTF8.self)
  }

  private static func escapeBytes(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    for byte in text.utf8 {
      if byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "%") {
        out.append(UInt8(ascii: "%"))
        out.append(contentsOf: Array(String(byte >> 4, radix: 16, uppercase: true).utf8))
        out.append(contentsOf: Array(String(byte & 0xF, radix: 16, uppercase: true).utf8))
      } else {
        out.append(byte)
      }
    }
    return out
  }

  private static func unescape(_ text: String) -> String? {
    var out: [UInt8] = []
    var bytes = Array(text.utf8)[...]
    while let byte = bytes.popFirst() {
      if byte != UInt8(ascii: "%") {
        out.append(byte)
        continue
      }
      guard bytes.count >= 2,
        let value = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16)
      else { return nil }
      out.append(value)
      bytes = bytes.dropFirst(2)
    }
    // `String(validating:as:)` would say this in one call, but needs macOS 15 / iOS 18: decoding
    // repairs invalid UTF-8, so a decoding that does not give the same bytes back was invalid.
    let text = String(decoding: out, as: UTF8.self)
    return text.utf8.elementsEqual(out) ? text : nil
  }
}
