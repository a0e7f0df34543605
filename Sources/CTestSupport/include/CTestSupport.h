// What the test support needs from the kernel that takes a sockaddr or an
// array of C strings: kept in C so that no Swift above the C-facing layers
// handles a pointer.
#ifndef BIRDCTL_C_TEST_SUPPORT_H
#define BIRDCTL_C_TEST_SUPPORT_H

#include <stddef.h>

// A TCP port on 127.0.0.1 that nothing listened on a moment ago (the kernel's
// choice for a bind to port 0), or -errno if none could be had.
int test_support_free_loopback_port(void);

// Starts `path` with posix_spawn (no fork of the test process, no listing of
// /proc/self/fd). `arguments` and `environment` are C strings one after the
// other, each ending with its NUL, `arguments_length` and `environment_length`
// bytes in all (argv[0] included). The child gets `stdin_fd`, `stdout_fd`
// and `stderr_fd` as 0, 1 and 2 (-1: /dev/null) and no other descriptor of
// ours, no signal blocked and every signal at its default action, and joins
// process group `group` (0: a new group it leads). Returns its pid, or -errno.
int test_support_spawn(const char *path, const char *arguments, size_t arguments_length,
                       const char *environment, size_t environment_length,
                       int stdin_fd, int stdout_fd, int stderr_fd, int group);

// A pipe whose two ends are closed on exec: fds[0] to read, fds[1] to write.
// 0, or -errno.
int test_support_pipe(int fds[2]);

// Waits for a child of ours in process group `group` to end and reaps it.
// Returns its pid and sets `status` to its exit code, or to the signal that
// ended it with `signaled` set; -errno if none is left to wait for.
int test_support_wait_group(int group, int *status, int *signaled);

#endif
