#include <stdlib.h>

// Swift Testing starts every test at once unless told otherwise: every
// test's fake BlueZ, dbus-daemon and birdctl at once crowded the test process
// with descriptors and threads and the machine with processes, and tests with
// a deadline (a connect deadline well under birdctl's default one) missed it
// under that load. The test support sets Swift Testing's bound as the test
// process starts, unless the environment already sets one, so that `swift
// test` alone runs as `make test-unit` does: 16 at a time, few enough for the
// suite's waits to hold on a small machine (docs/testing.md, "The test support").
// (The tests' fixtures start synchronously — `try await FakeBlueZ()` — so the
// support cannot make a test wait for a slot without blocking one of the
// cooperative pool's threads, which would deadlock the run.)
__attribute__((constructor)) static void test_support_bound_parallelism(void) {
    setenv("SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH", "16", 0);
}
