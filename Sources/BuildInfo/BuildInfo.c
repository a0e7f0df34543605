#include "BuildInfo.h"

// `make release` writes the revision to birdctl_revision.h in a directory it
// puts on the include path: a header, not a -D, since a flag that changes
// with every commit would rebuild every C target (BoringSSL's included),
// while a header rebuilds only the files that include it (this one).
#if __has_include("birdctl_revision.h")
#include "birdctl_revision.h"
#endif
#ifndef BIRDCTL_REVISION
#define BIRDCTL_REVISION ""
#endif

const char *birdctl_revision(void) { return BIRDCTL_REVISION; }
