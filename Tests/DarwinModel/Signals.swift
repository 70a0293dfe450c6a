// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  import Glibc

  /// The union of Darwin's `struct sigaction`, of which Liaison sets the handler.
  public struct DarwinSigactionUnion {
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public var __sa_handler: (@convention(c) (Int32) -> Void)?
  }

  extension sigaction {
    /// Darwin's spelling of the handler's field (`__sigaction_u.__sa_handler`), over glibc's.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public var __sigaction_u: DarwinSigactionUnion {
      get { DarwinSigactionUnion(__sa_handler: __sigaction_handler.sa_handler) }
      set { __sigaction_handler.sa_handler = newValue.__sa_handler }
    }
  }

  private final class ThreadStart {
    let body: @convention(c) (UnsafeMutableRawPointer) -> UnsafeMutableRawPointer?
    let argument: UnsafeMutableRawPointer
    init(
      _ body: @convention(c) (UnsafeMutableRawPointer) -> UnsafeMutableRawPointer?, _ argument: UnsafeMutableRawPointer
    ) {
      self.body = body
      self.argument = argument
    }
  }

  /// `pthread_create` with Darwin's signature (the thread an optional, the body's argument not),
  /// over glibc's.
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public func pthread_create(
    _ thread: UnsafeMutablePointer<pthread_t?>, _ attributes: UnsafePointer<pthread_attr_t>?,
    _ body: @convention(c) (UnsafeMutableRawPointer) -> UnsafeMutableRawPointer?, _ argument: UnsafeMutableRawPointer?
  ) -> Int32 {
    let start = Unmanaged.passRetained(ThreadStart(body, argument!)).toOpaque()
    var created = pthread_t()
    let result = Glibc.pthread_create(
      &created, attributes,
      { context in
        let start = Unmanaged<ThreadStart>.fromOpaque(context!).takeRetainedValue()
        return start.body(start.argument)
      }, start)
    if result == 0 {
      thread.pointee = created
    } else {
      Unmanaged<ThreadStart>.fromOpaque(start).release()
    }
    return result
  }
#endif
