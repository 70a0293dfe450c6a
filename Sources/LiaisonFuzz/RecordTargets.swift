import Foundation
import Liaison

extension FuzzTarget {
  /// The signal file (32 bytes): decoding any bytes never traps; what decodes is exactly a
  /// record's encoding; a record encodes and decodes to itself; one changed byte is detected.
  static let signalFile = FuzzTarget(
    name: "signal-file", summary: "SignalFile.decode: any bytes, round trips, one changed byte is refused"
  ) { bytes in
    if let record = SignalFile.decode(bytes) {
      if bytes.isEmpty {
        require(record == SignalFile.Record(), "an empty file is not the record of a signal never posted")
      } else {
        require(SignalFile.encode(record) == bytes, "decoded bytes that are not the record's encoding")
      }
    }
    var input = FuzzInput(bytes)
    let record = SignalFile.Record(
      sequence: input.integer(UInt64.self), state: input.integer(UInt64.self), poster: input.integer(Int32.self))
    var encoded = SignalFile.encode(record)
    require(encoded.count == SignalFile.size, "a record encodes to \(encoded.count) bytes")
    require(SignalFile.decode(encoded) == record, "a record does not decode to itself: \(record)")
    // A torn or corrupt write of one byte: the checksum must catch it (FNV-1a does, for one byte).
    let position = Int(input.byte()) % SignalFile.size
    let change = input.byte() | 1
    encoded[position] ^= change
    require(SignalFile.decode(encoded) == nil, "a record with byte \(position) changed still decodes")
  }

  /// The presence file (text): decoding any bytes never traps; a holder that decodes encodes and
  /// decodes to the same holder; a holder Liaison writes reads back the same.
  static let presenceRecord = FuzzTarget(
    name: "presence-record", summary: "PresenceRecord.decode: any bytes, and encode/decode round trips"
  ) { bytes in
    switch PresenceRecord.decode(bytes) {
    case .empty:
      require(bytes.isEmpty, "non-empty bytes decoded as an empty presence")
    case .unreadable:
      break
    case .holder(let holder):
      require(bytes.count <= PresenceRecord.maximumSize, "decoded a record longer than the limit")
      // Liaison writes info of at most `maximumInfoLength` bytes; a longer one read from a foreign
      // file may not fit in a record once escaped.
      if (holder.info?.utf8.count ?? 0) <= Presence.maximumInfoLength {
        requireRoundTrip(holder)
      }
    }
    // A holder as Liaison writes one: a live process id, a finite time, info within the limit.
    var input = FuzzInput(bytes)
    let kind: PresenceHolder.Kind = input.byte() & 1 == 0 ? .claim : .lease
    let processID = max(1, input.integer(Int32.self) & Int32.max)
    let since = Double(bitPattern: input.integer(UInt64.self))
    let token = input.integer(UInt64.self)
    let expiry = input.integer(UInt64.self)
    let info =
      input.byte() & 1 == 0 ? nil : String(decoding: input.bytes(upTo: Presence.maximumInfoLength), as: UTF8.self)
    guard since.isFinite, (info?.utf8.count ?? 0) <= Presence.maximumInfoLength else { return }
    requireRoundTrip(
      PresenceHolder(
        kind: kind, processID: processID, since: Date(timeIntervalSince1970: since), info: info,
        leaseExpiry: kind == .lease ? expiry : nil, leaseToken: kind == .lease ? token : nil))
  }
}

/// `holder`, encoded and decoded, is `holder` again.
private func requireRoundTrip(_ holder: PresenceHolder) {
  let encoded = PresenceRecord.encode(holder)
  guard case .holder(let again) = PresenceRecord.decode(encoded) else {
    require(false, "a holder does not decode after encoding: \(String(decoding: encoded, as: UTF8.self))")
    return
  }
  require(
    again.kind == holder.kind && again.processID == holder.processID && again.info == holder.info
      && again.leaseExpiry == holder.leaseExpiry && again.leaseToken == holder.leaseToken,
    "a holder reads back changed: \(holder) became \(again)")
  // `since` is written as seconds since 1970, but `Date` keeps seconds since 2001: converting may
  // round once (about 1e-7 s for present-day times), so it is compared within that rounding.
  let written = holder.since.timeIntervalSince1970
  let read = again.since.timeIntervalSince1970
  require(
    abs(written - read) <= 1e-6 + abs(written) * 1e-15,
    "the time of a holder reads back as \(read), written as \(written)")
}
