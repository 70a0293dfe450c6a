#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Whether this build runs under Thread or Address Sanitizer (their runtimes define these): its
/// processes' memory and times are the sanitizer's as much as their own.
public func runsUnderASanitizer() -> Bool {
  dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil
    || dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_init") != nil
}

/// The environment of a child whose LeakSanitizer could not run: one under `strace` (ptrace),
/// or one out of descriptors. LeakSanitizer's check at exit stops the process's threads with
/// ptrace, and needs descriptors of its own: under ptrace it fails the process (exit 1, and a
/// report); out of descriptors it waits for ever. So it is off for that child; the rest of
/// AddressSanitizer runs as usual.
public func environmentWithoutLeakCheck(_ environment: [String: String]) -> [String: String] {
  let options = getenv("ASAN_OPTIONS").map { String(cString: $0) + ":" } ?? ""
  return environment.merging(["ASAN_OPTIONS": options + "detect_leaks=0"]) { $1 }
}
