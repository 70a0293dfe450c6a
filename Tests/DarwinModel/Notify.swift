// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  import Dispatch
  import Glibc

  // notify(3), as Liaison's Apple code calls it: a name that any process posts and every
  // registration of it, in any process, receives on its queue. Modelled with one file per name in
  // the model's folder, which a post appends a byte to; a registration watches the file.

  /// notify(3)'s status of a call that worked.
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public let NOTIFY_STATUS_OK: UInt32 = 0
  /// notify(3)'s status of a failure the model reports (the name's file could not be watched).
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public let NOTIFY_STATUS_FAILED: UInt32 = 1_000_000

  private let registrations = ModelMutex()
  nonisolated(unsafe) private var registered: [Int32: Registration] = [:]
  nonisolated(unsafe) private var nextToken: Int32 = 1

  /// One registration: its loop subscription and whether a delivery is queued (posts made before
  /// it runs coalesce into it).
  private final class Registration: @unchecked Sendable {
    var subscription: UInt64?
    var queued = false
    var cancelled = false
  }

  private func nameFile(_ name: String) -> String { DarwinModelFiles.folder + "/notify.\(modelHash(name))" }

  /// Registers `handler` to run on `queue` after posts of `name`. The corresponding Darwin call
  /// is `notify_register_dispatch`.
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public func notify_register_dispatch(
    _ name: UnsafePointer<CChar>, _ token: UnsafeMutablePointer<Int32>, _ queue: DispatchQueue,
    _ handler: @escaping @Sendable (Int32) -> Void
  ) -> UInt32 {
    let path = nameFile(String(cString: name))
    let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return NOTIFY_STATUS_FAILED }
    Glibc.close(fd)
    let registration = Registration()
    let number = registrations.locked { () -> Int32 in
      defer { nextToken += 1 }
      registered[nextToken] = registration
      return nextToken
    }
    let subscription = ModelLoop.shared.watch(path, mask: UInt32(IN_MODIFY)) { _, _ in
      let deliver = registrations.locked { () -> Bool in
        guard !registration.cancelled, !registration.queued else { return false }
        registration.queued = true
        return true
      }
      guard deliver else { return }
      queue.async {
        let live = registrations.locked { () -> Bool in
          registration.queued = false
          return !registration.cancelled
        }
        if live { handler(number) }
      }
    }
    guard let subscription else {
      registrations.locked { registered[number] = nil }
      return NOTIFY_STATUS_FAILED
    }
    registrations.locked { registration.subscription = subscription }
    token.pointee = number
    return NOTIFY_STATUS_OK
  }

  /// Posts `name` to every registration of it. The corresponding Darwin call is `notify_post`.
  // swift-format-ignore: AlwaysUseLowerCamelCase
  @discardableResult
  public func notify_post(_ name: UnsafePointer<CChar>) -> UInt32 {
    let fd = open(nameFile(String(cString: name)), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return NOTIFY_STATUS_FAILED }
    var byte: UInt8 = 1
    _ = write(fd, &byte, 1)
    Glibc.close(fd)
    return NOTIFY_STATUS_OK
  }

  /// Ends a registration: its handler does not run for later posts. The corresponding Darwin call
  /// is `notify_cancel`.
  // swift-format-ignore: AlwaysUseLowerCamelCase
  @discardableResult
  public func notify_cancel(_ token: Int32) -> UInt32 {
    let subscription = registrations.locked { () -> UInt64? in
      guard let registration = registered.removeValue(forKey: token) else { return nil }
      registration.cancelled = true
      return registration.subscription
    }
    if let subscription { ModelLoop.shared.cancel(subscription) }
    return NOTIFY_STATUS_OK
  }
#endif
