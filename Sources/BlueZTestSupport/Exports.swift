// The tests' support in one import: children started and cleaned up
// (TestProcesses), the private bus and the fake BlueZ (FakeBlueZSupport),
// mosquitto (MosquittoSupport).
@_exported import FakeBlueZSupport
@_exported import MosquittoSupport
@_exported import TestProcesses
