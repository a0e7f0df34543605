// The git revision birdctl was built from, for `birdctl --version`; empty
// in builds other than `make release`'s.
const char *birdctl_revision(void);
