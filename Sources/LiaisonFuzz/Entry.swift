#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

#if LIAISON_FUZZING
  // Built with `-sanitize=fuzzer` (see .ci/fuzz): libFuzzer provides `main`, calls
  // `LLVMFuzzerInitialize` once with the arguments, then `LLVMFuzzerTestOneInput` for each input.
  // libFuzzer ignores arguments that start with `--`, such as `--target=NAME`.

  /// The target chosen by `--target=NAME`: set once, before libFuzzer runs any input.
  nonisolated(unsafe) private var chosenTarget: FuzzTarget?

  @_cdecl("LLVMFuzzerInitialize")
  public func fuzzerInitialize(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
  ) -> CInt {
    let arguments = (0..<Int(argc.pointee)).compactMap { index in argv.pointee?[index].map { String(cString: $0) } }
    chosenTarget = FuzzTarget.chosen(by: arguments)
    return 0
  }

  @_cdecl("LLVMFuzzerTestOneInput")
  public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    chosenTarget!.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
  }
#else
  /// Without libFuzzer (an ordinary `swift build`): runs a target once on each input file given,
  /// to reproduce a crash the fuzzer found, or to check the seed corpus.
  ///
  ///     LiaisonFuzz --target=NAME FILE|FOLDER…
  ///     LiaisonFuzz --list
  @main
  enum ReplayInputs {
    static func main() {
      let arguments = Array(CommandLine.arguments.dropFirst())
      let target = FuzzTarget.chosen(by: arguments)
      var count = 0
      for path in arguments where !path.hasPrefix("--") {
        for file in files(at: path) {
          guard let bytes = contents(of: file) else {
            printError("LiaisonFuzz: cannot read \(file)")
            exit(66)
          }
          target.run(bytes)
          count += 1
        }
      }
      print("\(target.name): \(count) inputs, every invariant held")
    }

    /// `path` itself, or the files directly inside it when it is a folder.
    private static func files(at path: String) -> [String] {
      guard let directory = opendir(path) else { return [path] }
      defer { closedir(directory) }
      var files: [String] = []
      while let entry = readdir(directory) {
        // Up to its NUL only: the whole of `d_name` may reach past the end of what `readdir` read.
        let start = UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        let length = strlen(start.assumingMemoryBound(to: CChar.self))
        let name = String(decoding: UnsafeRawBufferPointer(start: start, count: length), as: UTF8.self)
        if !name.hasPrefix(".") { files.append(path + "/" + name) }
      }
      return files.sorted()
    }

    private static func contents(of path: String) -> [UInt8]? {
      guard let file = fopen(path, "rb") else { return nil }
      defer { fclose(file) }
      var bytes: [UInt8] = []
      var buffer = [UInt8](repeating: 0, count: 65536)
      while true {
        let count = fread(&buffer, 1, buffer.count, file)
        bytes += buffer[0..<count]
        if count < buffer.count { return ferror(file) == 0 ? bytes : nil }
      }
    }
  }
#endif
