/// Whether the tests run on Linux, where `/proc` lists a process's descriptors, threads and
/// file locks: the tests that read it are enabled only there (macOS has no `/proc`).
public let readsProc: Bool = isLinux

/// Whether Liaison runs its Linux code: on Linux, but not in the Darwin model (the package trait
/// `DarwinModel`), where it runs its Apple code instead. That code reads no kernel lock table, marks
/// no claim with an open-file-description lock, and waits on a Dispatch queue, not on a thread of
/// its own: the tests of what only the Linux code does are enabled only here.
public let runsLinuxCode: Bool = {
  #if os(Linux) && !DarwinModel
    true
  #else
    false
  #endif
}()

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
