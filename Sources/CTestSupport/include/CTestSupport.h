// What the test support needs from the kernel that takes a sockaddr: kept
// in C so that no Swift above the C-facing layers handles a pointer.
#ifndef BIRDCTL_C_TEST_SUPPORT_H
#define BIRDCTL_C_TEST_SUPPORT_H

// A TCP port on 127.0.0.1 that nothing listened on a moment ago (the kernel's
// choice for a bind to port 0), or -errno if none could be had.
int test_support_free_loopback_port(void);

#endif
