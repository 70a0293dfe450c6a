/// Whether the tests run on Linux, where `/proc` lists a process's descriptors, threads and
/// file locks: the tests that read it are enabled only there (macOS has no `/proc`).
public let readsProc: Bool = {
  #if os(Linux)
    true
  #else
    false
  #endif
}()
