#define _GNU_SOURCE
#include "CTestSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

// A NULL-terminated array pointing into `strings` (NUL-terminated strings
// back to back, `length` bytes); NULL if out of memory.
static char **string_array(const char *strings, size_t length) {
    size_t count = 0;
    for (size_t i = 0; i < length; i++) count += strings[i] == '\0';
    char **array = calloc(count + 1, sizeof *array);
    if (array == NULL) return NULL;
    size_t n = 0;
    for (size_t start = 0; start < length && n < count; n++) {
        array[n] = (char *)strings + start;
        while (strings[start] != '\0') start++;
        start++;
    }
    return array;
}

// One of the child's standard descriptors: ours dup'ed, or /dev/null.
static int standard(posix_spawn_file_actions_t *actions, int fd, int target) {
    if (fd < 0) return posix_spawn_file_actions_addopen(actions, target, "/dev/null", O_RDWR, 0);
    return posix_spawn_file_actions_adddup2(actions, fd, target);
}

int test_support_spawn(const char *path, const char *arguments, size_t arguments_length,
                       const char *environment, size_t environment_length,
                       int stdin_fd, int stdout_fd, int stderr_fd, int group) {
    char **argv = string_array(arguments, arguments_length);
    char **envp = string_array(environment, environment_length);
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    int result = argv == NULL || envp == NULL ? ENOMEM : 0;
    // The test process blocks signals its event loops take through a
    // signalfd (and children inherit a mask); mosquitto needs SIGTERM,
    // mosquitto_sub -W SIGALRM, a test sends birdctl SIGINT.
    if (result == 0) result = posix_spawnattr_setsigmask(&attributes, &none);
    if (result == 0) result = posix_spawnattr_setsigdefault(&attributes, &all);
    if (result == 0) result = posix_spawnattr_setpgroup(&attributes, group);
    if (result == 0)
        result = posix_spawnattr_setflags(
            &attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    if (result == 0) result = standard(&actions, stdin_fd, 0);
    if (result == 0) result = standard(&actions, stdout_fd, 1);
    if (result == 0) result = standard(&actions, stderr_fd, 2);
    // Nothing else of ours: a pipe end a child holds keeps its reader from
    // seeing the end, and the run's watchdog from seeing the test process go.
    if (result == 0) result = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    pid_t pid = 0;
    if (result == 0) result = posix_spawn(&pid, path, &actions, &attributes, argv, envp);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    free(argv);
    free(envp);
    return result == 0 ? pid : -result;
}

int test_support_pipe(int fds[2]) {
    return pipe2(fds, O_CLOEXEC) == 0 ? 0 : -errno;
}

int test_support_wait_group(int group, int *status, int *signaled) {
    int raw = 0;
    pid_t pid;
    do {
        pid = waitpid(-group, &raw, 0);
    } while (pid < 0 && errno == EINTR);
    if (pid < 0) return -errno;
    *signaled = WIFSIGNALED(raw);
    *status = WIFSIGNALED(raw) ? WTERMSIG(raw) : WEXITSTATUS(raw);
    return pid;
}
