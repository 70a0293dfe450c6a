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

/// The environment of a child that runs under `strace` (ptrace): LeakSanitizer, which stops the
/// process's threads with ptrace itself at exit, cannot run there and fails the process (exit 1,
/// and a report), so it is off for that child. The rest of AddressSanitizer runs as usual.
public func environmentUnderPtrace(_ environment: [String: String]) -> [String: String] {
  let options = getenv("ASAN_OPTIONS").map { String(cString: $0) + ":" } ?? ""
  return environment.merging(["ASAN_OPTIONS": options + "detect_leaks=0"]) { $1 }
}
