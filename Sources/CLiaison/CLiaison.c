// The declarations are in include/CLiaison.h; SwiftPM needs one source file per C target.
