/* The timer inside a measured run's sandbox, in C: what inside_timer.py does, without Python's start-up.
 * Usage: inside-timer FD COMMAND...  (see inside_timer.py for the report line and the exit code). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Its own peak RSS (KiB): the peak of its own memory (VmHWM), not getrusage's, which carries the peak of
 * whatever exec'd it (a large Python that started it unconfined) and would hide the program's peak below it. */
static long own_peak_kib(void) {
    long kib = -1;
    char line[256];
    FILE *status = fopen("/proc/self/status", "r");
    while (status != NULL && kib < 0 && fgets(line, sizeof line, status) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) kib = atol(line + 6);
    }
    if (status != NULL) fclose(status);
    if (kib < 0) {
        struct rusage own;
        getrusage(RUSAGE_SELF, &own);
        kib = own.ru_maxrss;
    }
    return kib;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int report = atoi(argv[1]);
    if (fcntl(report, F_SETFD, FD_CLOEXEC) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        perror("orchard timer");
        return 2;
    }
    struct rusage usage;
    long own_kib = own_peak_kib();
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t pid;
    int error = posix_spawnp(&pid, argv[2], NULL, NULL, &argv[2], environ);
    if (error != 0) {
        fprintf(stderr, "%s: cannot run: %s\n", argv[2], strerror(error));
        return 127;
    }
    int status;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    long long wall = (end.tv_sec - start.tv_sec) * 1000000000LL + (end.tv_nsec - start.tv_nsec);
    dprintf(report, "%lld %lld %lld %ld %ld\n", wall,
            (long long)usage.ru_utime.tv_sec * 1000000 + usage.ru_utime.tv_usec,
            (long long)usage.ru_stime.tv_sec * 1000000 + usage.ru_stime.tv_usec, usage.ru_maxrss, own_kib);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}
