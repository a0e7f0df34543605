// Nothing to compile: BuildInfo.h carries the revision macro. SwiftPM needs a source file.
