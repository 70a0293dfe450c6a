// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  import CDarwinModel
  import Glibc

  /// `pthread_kill(3)`, refused with `ENOTSUP` for a thread of Dispatch's pool, as XNU refuses it to
  /// every workqueue thread (`bsd/kern/kern_sig.c`, `__pthread_kill`: the `THREAD_TAG_WORKQUEUE`
  /// check, before the signal number is even looked at, so a `pthread_kill(thread, 0)` probe is
  /// refused too). Every Dispatch queue's work and Swift's cooperative pool run on such threads,
  /// on Apple platforms and, through swift-corelibs-libdispatch, here, where they carry the name of
  /// their root queue (`com.apple.root.default-qos`, truncated to its end).
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public func pthread_kill(_ thread: pthread_t, _ signal: Int32) -> Int32 {
    isWorkqueueThread(thread) ? ENOTSUP : Glibc.pthread_kill(thread, signal)
  }

  /// Whether `thread` is one of Dispatch's worker threads.
  public func isWorkqueueThread(_ thread: pthread_t) -> Bool {
    var buffer = [CChar](repeating: 0, count: 32)
    guard darwin_model_thread_name(thread, &buffer, buffer.count) == 0 else { return false }
    let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return name.hasSuffix("-qos") || name.hasSuffix("-qos.overcommit") || name.hasPrefix("com.apple.root.")
  }
#endif
