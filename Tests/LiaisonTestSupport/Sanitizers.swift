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
