// The git revision birdctl was built from, for `birdctl --version`. `make
// release` writes it to birdctl_revision.h in a directory it puts on the
// include path (a header, not a -D: a flag that changes with every commit
// would rebuild every C target, BoringSSL's included); other builds say so.
#if __has_include("birdctl_revision.h")
#include "birdctl_revision.h"
#endif
#ifndef BIRDCTL_REVISION
#define BIRDCTL_REVISION ""
#endif
#define BIRDCTL_BUILD_REVISION BIRDCTL_REVISION
