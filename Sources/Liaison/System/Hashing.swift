/// FNV-1a, 64 bits, of `bytes`: the one hash Liaison writes into files and names (a signal
/// record's checksum, a generation counter's slot, a refresh lock's name), so it must give the
/// same value in every process and every version — unlike Swift's `Hasher`, which is seeded per
/// process.
package func fnv1a(_ bytes: some Sequence<UInt8>) -> UInt64 {
  var hash: UInt64 = 0xcbf2_9ce4_8422_2325
  for byte in bytes {
    hash ^= UInt64(byte)
    hash &*= 0x100_0000_01b3
  }
  return hash
}
