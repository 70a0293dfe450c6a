import Foundation
import Liaison

/// Writes a line to standard error.
func printError(_ line: String) {
  FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Prints `value` as one line of JSON with sorted keys.
func printJSON<T: Encodable>(_ value: T) throws {
  print(try jsonLine(value))
}

/// `value` as one line of JSON with sorted keys.
func jsonLine<T: Encodable>(_ value: T) throws -> String {
  let encoder = JSONEncoder()
  encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
  encoder.dateEncodingStrategy = .iso8601
  return String(decoding: try encoder.encode(value), as: UTF8.self)
}

/// A presence holder as the CLI shows it.
struct HolderReport: Encodable {
  let kind: String
  let pid: Int32
  let since: Date
  let info: String?
  let leaseRemainingSeconds: Double?
  /// Whether `pid` has exited while a descendant holds the claim on (its pid is not recorded).
  let pidExited: Bool

  init(_ holder: PresenceHolder) {
    kind = holder.kind.rawValue
    pid = holder.processID
    pidExited = holder.processHasExited
    since = holder.since
    info = holder.info
    leaseRemainingSeconds = holder.leaseRemaining.map {
      Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18
    }
  }

  var text: String {
    var line = "pid \(pid) (\(kind)) since \(since.formatted(.iso8601))"
    if pidExited { line += ", held by a descendant of pid \(pid), which has exited" }
    if let leaseRemainingSeconds { line += String(format: ", lease %.1f s left", leaseRemainingSeconds) }
    if let info { line += ": \(info)" }
    return line
  }
}

/// A presence as the CLI lists it.
struct PresenceReport: Encodable {
  let name: String
  let active: Bool
  let holder: HolderReport?

  /// Reads `presence`'s holder.
  static func of(_ presence: some CoordinationPresence) async throws -> PresenceReport {
    try await of(name: presence.name) { try await presence.holder }
  }

  /// The report of the presence `name`, whose holder `holder` reads.
  static func of(name: LiaisonName, holder: () async throws -> PresenceHolder?) async throws -> PresenceReport {
    do {
      return PresenceReport(name: name.rawValue, holder: try await holder(), active: nil)
    } catch let error as LiaisonError where error.code == .claimInProgress {
      // Claimed a moment ago: active, its holder not written yet.
      return PresenceReport(name: name.rawValue, holder: nil, active: true)
    }
  }

  private init(name: String, holder: PresenceHolder?, active: Bool?) {
    self.name = name
    self.holder = holder.map(HolderReport.init)
    self.active = active ?? (holder != nil)
  }

  /// `active: HOLDER`, `active: claim in progress` or `inactive`.
  var text: String {
    guard active else { return "inactive" }
    return "active: " + (holder?.text ?? "claim in progress (its holder is not recorded yet)")
  }
}

/// The line that ends each command's help: the page of the DocC documentation that explains it.
enum DocsPage {
  static let command = "Docs: \"The liaison Command\" in the Liaison documentation (the README says where it is)."
  static let lock = "Docs: ProcessLock, and \"The liaison Command\", in the Liaison documentation."
  static let presence = "Docs: Presence in the Liaison documentation."
  static let signal = "Docs: Signal in the Liaison documentation."
  static let defaults = "Docs: SharedDefaults in the LiaisonStore documentation."
  static let mailbox = "Docs: Mailbox in the LiaisonStore documentation."
  static let demo = "Docs: \"Choosing a Part\" in the Liaison documentation."
}
