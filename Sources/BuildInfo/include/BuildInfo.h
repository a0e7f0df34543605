// The git revision birdctl was built from, for `birdctl --version`. `make
// release` passes it as -Xcc -DBIRDCTL_REVISION='"…"'; other builds say so.
#ifndef BIRDCTL_REVISION
#define BIRDCTL_REVISION ""
#endif
#define BIRDCTL_BUILD_REVISION BIRDCTL_REVISION
