// Linux only: the model is built with the trait DarwinModel, on Linux.
#if os(Linux)
  import Glibc

  /// Darwin's `fcntl` command that writes the path of the file open on the descriptor
  /// (`MAXPATHLEN` bytes at most) into its third argument.
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public let F_GETPATH: Int32 = 50

  /// `fcntl(descriptor, F_GETPATH, path)`, as Darwin answers it, from `/proc/self/fd` (other
  /// commands: `EINVAL`).
  public func fcntl(_ descriptor: Int32, _ command: Int32, _ pointer: UnsafeMutableRawPointer) -> Int32 {
    guard command == F_GETPATH else {
      errno = EINVAL
      return -1
    }
    let path = pointer.assumingMemoryBound(to: CChar.self)
    let count = readlink("/proc/self/fd/\(descriptor)", path, Int(PATH_MAX))
    guard count > 0 else { return -1 }
    path[count] = 0
    return 0
  }
#endif
