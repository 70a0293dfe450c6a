// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  import CDarwinModel
  import Glibc

  // Data protection as Liaison's Apple code meets it: a file's protection class, set and read
  // through `fcntl(F_SETPROTECTIONCLASS / F_GETPROTECTIONCLASS)` on a descriptor and read by name
  // through `getattrlistat(ATTR_CMN_DATA_PROTECT_FLAGS)`; a file created in a folder takes the
  // folder's class; and, while the model's device is locked (`DarwinModelFiles.deviceLocked`),
  // an open of a file of class A or B, or a create in a folder of class A, fails with `EPERM`,
  // as XNU refuses them (`cp_handle_open`). Folders are never refused.
  //
  // A class is kept in the extended attribute `user.liaison-darwin-model.protection-class` of the
  // file (as text), so that it goes with the inode and every process of the model sees it. What it
  // leaves out: the keys themselves (nothing is encrypted); the files SQLite creates (it opens them
  // itself, not through the model, so they take no class here); the time the system takes to
  // discard a class's key after a lock; class C before the first unlock (the model's device has
  // always been unlocked once); and a process's other calls (`stat`, reads of an open descriptor),
  // which data protection does not refuse either.

  /// Darwin's `fcntl` command that reads the protection class of the file open on the descriptor
  /// (public in sys/fcntl.h).
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public let F_GETPROTECTIONCLASS: Int32 = 63
  /// Darwin's `fcntl` command that sets the protection class of the file open on the descriptor.
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public let F_SETPROTECTIONCLASS: Int32 = 64

  /// Darwin's `struct attrlist` (sys/attr.h): which attributes `getattrlistat` returns.
  // swift-format-ignore: TypeNamesShouldBeCapitalized
  public struct attrlist {
    public var bitmapcount: UInt16 = 0
    public var reserved: UInt16 = 0
    public var commonattr: attrgroup_t = 0
    public var volattr: attrgroup_t = 0
    public var dirattr: attrgroup_t = 0
    public var fileattr: attrgroup_t = 0
    public var forkattr: attrgroup_t = 0
    public init() {}
  }
  /// Darwin's `attrgroup_t`.
  // swift-format-ignore: TypeNamesShouldBeCapitalized
  public typealias attrgroup_t = UInt32
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public let ATTR_BIT_MAP_COUNT: Int32 = 5
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public let ATTR_CMN_DATA_PROTECT_FLAGS: Int32 = 0x4000_0000
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public let FSOPT_NOFOLLOW: Int32 = 1

  private let attribute = "user.liaison-darwin-model.protection-class"

  extension DarwinModelFiles {
    private static let lock = ModelMutex()
    nonisolated(unsafe) private static var locked = false

    /// Whether the model's device is locked (after its first unlock): opens of files of class A
    /// or B, and creates in folders of class A, fail with `EPERM`. In this process only.
    public static var deviceLocked: Bool {
      get { lock.locked { locked } }
      set { lock.locked { locked = newValue } }
    }

    /// The protection class of the file at `path` (not followed if a symbolic link), or `nil`
    /// when it has none. For tests.
    public static func protectionClass(ofFileAt path: String) -> Int32? {
      classOf { lgetxattr(path, attribute, $0, $1) }
    }

    /// Gives the file at `path` the protection class `value`, as a program that created it with
    /// that class would have. For tests.
    @discardableResult
    public static func setProtectionClass(_ value: Int32, ofFileAt path: String) -> Bool {
      let text = Array(String(value).utf8)
      return lsetxattr(path, attribute, text, text.count, 0) == 0
    }
  }

  private func classOf(_ read: (UnsafeMutableRawPointer, Int) -> Int) -> Int32? {
    var buffer = [UInt8](repeating: 0, count: 16)
    let count = buffer.withUnsafeMutableBytes { read($0.baseAddress!, $0.count) }
    guard count > 0 else { return nil }
    return Int32(String(decoding: buffer[..<count], as: UTF8.self))
  }

  private func setClass(_ fd: Int32, _ value: Int32) -> Int32 {
    let text = Array(String(value).utf8)
    return fsetxattr(fd, attribute, text, text.count, 0)
  }

  /// `fcntl(descriptor, F_GETPROTECTIONCLASS)` and `fcntl(descriptor, F_SETPROTECTIONCLASS, class)`,
  /// as Darwin answers them on a volume with data protection (a file with no class reads as
  /// class 0, a folder's "none"); other commands: `EINVAL`. (Not named `fcntl`: Glibc's
  /// `fcntl(_:_:_: Int32)` would then be ambiguous wherever the model is imported.)
  public func fcntlProtectionClass(_ descriptor: Int32, _ command: Int32, _ value: Int32) -> Int32 {
    switch command {
    case F_SETPROTECTIONCLASS:
      return setClass(descriptor, value) == 0 ? 0 : -1
    case F_GETPROTECTIONCLASS:
      var info = stat()
      guard fstat(descriptor, &info) == 0 else { return -1 }
      return classOf { fgetxattr(descriptor, attribute, $0, $1) } ?? 0
    default:
      errno = EINVAL
      return -1
    }
  }

  /// `getattrlistat(folder, name, attributes, buffer, size, options)` for the one attribute
  /// Liaison asks for, `ATTR_CMN_DATA_PROTECT_FLAGS`: the buffer gets its length (8) and the class
  /// (0 for none). `FSOPT_NOFOLLOW` is the only option (a link is not followed); other requests:
  /// `EINVAL`.
  public func getattrlistat(
    _ folder: Int32, _ name: UnsafePointer<CChar>, _ attributes: UnsafeMutableRawPointer,
    _ buffer: UnsafeMutableRawPointer, _ size: Int, _ options: UInt
  ) -> Int32 {
    let request = attributes.load(as: attrlist.self)
    guard request.bitmapcount == UInt16(ATTR_BIT_MAP_COUNT),
      request.commonattr == attrgroup_t(ATTR_CMN_DATA_PROTECT_FLAGS), size >= 8,
      options == UInt(FSOPT_NOFOLLOW)
    else {
      errno = EINVAL
      return -1
    }
    let path = String(cString: name)
    let resolved = path.hasPrefix("/") || folder == AT_FDCWD ? path : "/proc/self/fd/\(folder)/\(path)"
    var info = stat()
    guard lstat(resolved, &info) == 0 else { return -1 }
    buffer.storeBytes(of: UInt32(8), as: UInt32.self)
    let value = classOf { lgetxattr(resolved, attribute, $0, $1) } ?? 0
    buffer.storeBytes(of: UInt32(bitPattern: value), toByteOffset: 4, as: UInt32.self)
    return 0
  }

  /// `openat(2)`: a file created takes the class of its folder; while the device is locked, an
  /// open of a regular file of class A or B, or a create in a folder of class A, fails with
  /// `EPERM`.
  public func openat(_ folder: Int32, _ name: UnsafePointer<CChar>, _ flags: Int32, _ mode: mode_t) -> Int32 {
    var info = stat()
    let existed = fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0
    if DarwinModelFiles.deviceLocked {
      let path = String(cString: name)
      let resolved = path.hasPrefix("/") ? path : "/proc/self/fd/\(folder)/\(path)"
      let refused: Bool
      if existed {
        let value = classOf { lgetxattr(resolved, attribute, $0, $1) }
        refused = info.st_mode & S_IFMT == S_IFREG && (value == 1 || value == 2)
      } else {
        refused = flags & O_CREAT != 0 && classOf { fgetxattr(folder, attribute, $0, $1) } == 1
      }
      if refused {
        errno = EPERM
        return -1
      }
    }
    let fd = Glibc.openat(folder, name, flags, mode)
    if fd >= 0, !existed, flags & O_CREAT != 0, let inherited = classOf({ fgetxattr(folder, attribute, $0, $1) }) {
      _ = setClass(fd, inherited)
    }
    return fd
  }
#endif
