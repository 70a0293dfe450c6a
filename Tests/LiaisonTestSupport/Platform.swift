/// Whether the tests run on Linux, where `/proc` lists a process's descriptors, threads and
/// file locks: the tests that read it are enabled only there (macOS has no `/proc`).
public let readsProc: Bool = isLinux

/// Whether the tests run on Linux: the tests that run a Linux-only tool (util-linux's `flock`
/// and `script -c`, GNU coreutils' `timeout`, `setsid`, `stdbuf`) are enabled only there, with
/// the reason: `@Test(.enabled(if: isLinux, "runs GNU timeout (not on stock macOS)"))`.
/// `.ci/apple-check` refuses such a call, or a `/proc` path, in a test not enabled by `isLinux`,
/// ``readsProc`` or `NetworkNamespace.mustRun` (false where there are none: everywhere but Linux).
public let isLinux: Bool = {
  #if os(Linux)
    true
  #else
    false
  #endif
}()
