/* measure RESULT COMMAND...: runs COMMAND and writes its own resource use to
 * RESULT: "pid PID" at once, then "exit STATUS cpu SECONDS maxrss KIB wall SECONDS
 * sleeps N" (N: voluntary context switches, the times it blocked to wait).
 * Python cannot measure peak RSS itself: a child forked (or vforked) from
 * Python inherits Python's peak at exec, so the tool is forked from here.
 * Nor its wall time to a millisecond: Popen.wait(timeout) polls with sleeps
 * doubling from 0.5 ms, so an exit at 8 ms was seen at ~15. The wall time is
 * from just before the fork to wait4's return. */
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: measure RESULT COMMAND...\n");
        return 2;
    }
    FILE *result = fopen(argv[1], "w");
    if (!result) {
        perror(argv[1]);
        return 2;
    }
    struct timespec started, ended;
    clock_gettime(CLOCK_MONOTONIC, &started);
    pid_t child = fork();
    if (child == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    fprintf(result, "pid %d\n", (int)child);
    fflush(result);
    /* A SIGTERM for us is passed on, so the caller can stop the tool. */
    signal(SIGTERM, SIG_IGN);
    int status;
    struct rusage usage;
    while (wait4(child, &status, 0, &usage) < 0) {}
    clock_gettime(CLOCK_MONOTONIC, &ended);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    fprintf(result, "exit %d cpu %.6f maxrss %ld wall %.6f sleeps %ld\n", code,
            usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6,
            usage.ru_maxrss, (ended.tv_sec - started.tv_sec) + (ended.tv_nsec - started.tv_nsec) / 1e9,
            usage.ru_nvcsw);
    fclose(result);
    return 0;
}
