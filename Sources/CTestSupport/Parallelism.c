#include <stdlib.h>

// Swift Testing starts every test at once unless told otherwise: on two
// cores, ~130 fake BlueZes, dbus-daemons and birdctls at once held ~1,200
// descriptors in the test process, and tests with a deadline (a connect
// deadline well under birdctl's default one) missed it under that load. The
// test support sets Swift Testing's bound as the test process starts, unless
// the environment already sets one, so that `swift test` alone runs as
// `make test-unit` does: 16 at a time (32 until the suite grew past ~500
// tests and waits of 20–120 s were missed under it), and faster.
// (The tests' fixtures start synchronously — `try await FakeBlueZ()` — so the
// support cannot make a test wait for a slot without blocking one of the
// cooperative pool's threads, which would deadlock the run.)
__attribute__((constructor)) static void test_support_bound_parallelism(void) {
    setenv("SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH", "16", 0);
}
