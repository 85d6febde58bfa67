/* One sandbox per campaign side, each measured run started fresh inside it (see run_sandbox.py).
 *
 * serve LISTEN_FD READY_FD CGROUP_FD GROUP UID GID AS NPROC CPU_SOFT CPU_HARD FSIZE [tmpfs MODE PATH | dir PATH]...
 *   Runs as root inside the side's bubblewrap sandbox (its mounts made once), in the side's own pids cgroup
 *   (GROUP under CGROUP_FD, entered once: NPROC for a run, one more for the runner), else each run under
 *   RLIMIT_NPROC. For every connection on LISTEN_FD, one run (one at a time): a child in new mount, PID and
 *   IPC namespaces, born in that cgroup, with an empty tmpfs on every `tmpfs` place (what was bound inside it
 *   bound again) and every writable `dir` made empty again, a fresh /proc, the other rlimits (0: not set), as
 *   UID/GID with no groups, no capabilities and no_new_privs. Its PID namespace ends with it (nothing it
 *   started outlives it, so the next run finds the cgroup holding the runner alone); a client that hangs up
 *   kills it.
 * ask SOCKET CWD FDS -- COMMAND...
 *   The client orchard starts per run: hands its stdin, stdout, stderr, FDS ("3,4" or "-") and environment
 *   to the runner on SOCKET, and exits as the run did (128+N for signal N). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#define MAX_FDS 16
#define MAX_BODY (4 << 20)
#define MAX_WORDS 8192
#define MAX_MOUNTS 1024

static int write_all(int fd, const char *data, size_t size) {
    while (size > 0) {
        ssize_t done = write(fd, data, size);
        if (done < 0 && errno == EINTR) continue;
        if (done <= 0) return -1;
        data += done;
        size -= (size_t)done;
    }
    return 0;
}

static int read_all(int fd, char *data, size_t size) {
    while (size > 0) {
        ssize_t done = read(fd, data, size);
        if (done < 0 && errno == EINTR) continue;
        if (done <= 0) return -1;
        data += done;
        size -= (size_t)done;
    }
    return 0;
}

/* ---- the client ---- */

static int ask(int argc, char **argv) {
    if (argc < 7 || strcmp(argv[5], "--") != 0) return 2;
    int fds[MAX_FDS] = {0, 1, 2}, count = 3;
    for (char *word = strtok(strcmp(argv[4], "-") ? argv[4] : "", ","); word && count < MAX_FDS;
         word = strtok(NULL, ","))
        fds[count++] = atoi(word);
    size_t size = strlen(argv[3]) + 32 + 16 * MAX_FDS;
    for (int i = 6; i < argc; i++) size += strlen(argv[i]) + 1;
    for (char **e = environ; *e; e++) size += strlen(*e) + 1;
    char *body = malloc(size + strlen(argv[3]) + 8), *at = body;
    at += sprintf(at, "%s%c%d%c", argv[3], 0, count, 0);
    for (int i = 0; i < count; i++) at += sprintf(at, "%d%c", fds[i], 0);
    at += sprintf(at, "%d%c", argc - 6, 0);
    for (int i = 6; i < argc; i++) at += sprintf(at, "%s%c", argv[i], 0);
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "PWD=", 4) != 0) at += sprintf(at, "%s%c", *e, 0);
    }
    at += sprintf(at, "PWD=%s%c", argv[3], 0); /* as bubblewrap's --chdir sets it */
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[2], sizeof address.sun_path - 1);
    if (sock < 0 || connect(sock, (struct sockaddr *)&address, sizeof address) != 0) {
        perror("orchard run sandbox: cannot reach its runner");
        return 125;
    }
    unsigned int length = (unsigned int)(at - body);
    char control[CMSG_SPACE(sizeof(int) * MAX_FDS)] = {0};
    struct iovec part = {.iov_base = &length, .iov_len = sizeof length};
    struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count)};
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
    memcpy(CMSG_DATA(header), fds, sizeof(int) * (size_t)count);
    int status;
    if (sendmsg(sock, &message, 0) != (ssize_t)sizeof length || write_all(sock, body, length) != 0 ||
        read_all(sock, (char *)&status, sizeof status) != 0) {
        fprintf(stderr, "orchard run sandbox: its runner ended before the run did\n");
        return 125;
    }
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* ---- the runner ---- */

struct setup {
    int cgroup_fd;
    const char *group;
    char note[400]; /* set when the side has no pids cgroup: why, and each run gets RLIMIT_NPROC */
    uid_t uid;
    gid_t gid;
    long long memory, processes, cpu_soft, cpu_hard, file_size;
    char **places; /* "tmpfs" MODE PATH | "dir" PATH, in order */
    int place_words;
    char *mounted[MAX_MOUNTS]; /* the sandbox's mount points, as bubblewrap left them, in order */
    int ids[MAX_MOUNTS], parents[MAX_MOUNTS], mounts;
};

struct request {
    char *words[MAX_WORDS];
    int fds[MAX_FDS], targets[MAX_FDS], nfds;
    char *cwd, **argv, **env;
};

static void fail(const char *what) {
    dprintf(2, "orchard run sandbox: %s: %s\n", what, strerror(errno));
    _exit(125);
}

static void make_dirs(char *path, mode_t mode) {
    for (char *slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = 0;
        mkdir(path, 0755);
        *slash = '/';
    }
    if (mkdir(path, mode) == 0) {
        if (chmod(path, mode) != 0) fail(path); /* its mode whatever the umask; one that was there keeps its own */
    } else if (errno != EEXIST) {
        fail(path);
    }
}

static void set_limit(int resource, long long soft, long long hard) {
    struct rlimit limit = {.rlim_cur = (rlim_t)soft, .rlim_max = (rlim_t)hard};
    if (soft > 0 && setrlimit(resource, &limit) != 0) fail("setrlimit");
}

/* Write `text` to FILE of GROUP under the directory `groups`; 0 when done, else errno. */
static int write_cgroup(int groups, const char *group, const char *file, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", group, file);
    int fd = openat(groups, path, O_WRONLY | O_CLOEXEC);
    int error = fd < 0 || write_all(fd, text, strlen(text)) != 0 ? errno : 0;
    if (fd >= 0) close(fd);
    return error;
}

/* The side's own pids cgroup, GROUP under CGROUP_FD, entered by the runner once: each run is born in it, so no
 * run pays a migration (a cgroup v1 migration waits for an RCU grace period: 10-15 ms a run when made per run).
 * Runs come one at a time and none outlives its PID namespace, so `processes` are each run's, plus the runner.
 * Where it cannot be made, each run gets the sandbox uid's RLIMIT_NPROC, which every sandbox shares: `note`
 * says why, for a run's failure to fork or exec. */
static void side_cgroup(struct setup *setup) {
    if (setup->processes <= 0) return;
    const char *step = "no pids hierarchy", *why = "";
    if (setup->cgroup_fd >= 0 && strcmp(setup->group, "-") != 0) {
        char number[32];
        snprintf(number, sizeof number, "%lld", setup->processes + 1);
        int error = mkdirat(setup->cgroup_fd, setup->group, 0755) == 0 ? 0 : errno;
        step = "mkdir";
        if (error == 0 && (error = write_cgroup(setup->cgroup_fd, setup->group, "pids.max", number)) != 0)
            step = "pids.max";
        if (error == 0 && (error = write_cgroup(setup->cgroup_fd, setup->group, "cgroup.procs", "0")) != 0)
            step = "cgroup.procs";
        if (error == 0) return;
        why = strerror(error);
    }
    snprintf(setup->note, sizeof setup->note, " (no pids cgroup of its own: %s %s %s; the sandbox uid's "
             "RLIMIT_NPROC of %lld, which every sandbox shares, applied)", step, setup->group, why, setup->processes);
}

static void drop_privileges(const struct setup *setup) {
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) fail("dropping capabilities");
    }
    if (setgroups(0, NULL) != 0 || setresgid(setup->gid, setup->gid, setup->gid) != 0 ||
        setresuid(setup->uid, setup->uid, setup->uid) != 0)
        fail("becoming the sandbox uid");
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct none[2] = {{0}};
    if (syscall(SYS_capset, &header, none) != 0 || prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        fail("dropping capabilities");
}

static int under(const char *path, const char *place) {
    size_t size = strlen(place);
    return strncmp(path, place, size) == 0 && path[size] == '/';
}

/* Every mount of the sandbox, read once: what is bound inside a place a run gets fresh comes back on it. */
static void read_mounts(struct setup *setup) {
    FILE *table = fopen("/proc/self/mountinfo", "r");
    char line[8192];
    while (table != NULL && setup->mounts < MAX_MOUNTS && fgets(line, sizeof line, table) != NULL) {
        int id = atoi(strtok(line, " ")), parent = atoi(strtok(NULL, " "));
        char *field = strtok(NULL, " ");
        for (int i = 0; field && i < 2; i++) field = strtok(NULL, " ");
        if (field == NULL) continue;
        char *out = field; /* mountinfo writes space, tab, newline and backslash as \ooo */
        for (char *in = field; *in; out++) {
            if (in[0] == '\\' && in[1] && in[2] && in[3]) {
                *out = (char)strtol((char[]){in[1], in[2], in[3], 0}, NULL, 8);
                in += 4;
            } else {
                *out = *in++;
            }
        }
        *out = 0;
        setup->ids[setup->mounts] = id;
        setup->parents[setup->mounts] = parent;
        setup->mounted[setup->mounts++] = strdup(field);
    }
    if (table != NULL) fclose(table);
}

/* An empty tmpfs on `place`, with what the sandbox mounted on the one there (the last mount at `place`; not what
 * that one covers) mounted again at the same paths, each with what is inside it: kept open before the tmpfs
 * covers them, bound again from their descriptors. */
static void fresh(const struct setup *setup, char *place, const char *mode) {
    int kept[MAX_MOUNTS], count = 0, top = -1;
    const char *paths[MAX_MOUNTS];
    for (int i = 0; i < setup->mounts; i++) top = strcmp(setup->mounted[i], place) == 0 ? setup->ids[i] : top;
    for (int i = 0; top >= 0 && i < setup->mounts; i++) {
        const char *path = setup->mounted[i];
        int again = setup->parents[i] == top && under(path, place);
        for (int j = 0; again && j < count; j++) again = strcmp(paths[j], path) != 0;
        if (!again) continue;
        paths[count] = path;
        kept[count] = open(path, O_PATH | O_CLOEXEC);
        if (kept[count++] < 0) fail(path);
    }
    char options[32], source[64];
    snprintf(options, sizeof options, "mode=%s", mode);
    make_dirs(place, (mode_t)strtol(mode, NULL, 8));
    if (mount("tmpfs", place, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) fail(place);
    for (int i = 0; i < count; i++) {
        struct stat info;
        char *path = strdup(paths[i]), *slash = strrchr(path, '/');
        if (fstat(kept[i], &info) != 0) fail(path);
        if (S_ISDIR(info.st_mode)) {
            make_dirs(path, 0755);
        } else {
            *slash = 0;
            make_dirs(path, 0755);
            *slash = '/';
            int file = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
            if (file < 0) fail(path);
            close(file);
        }
        snprintf(source, sizeof source, "/proc/self/fd/%d", kept[i]);
        if (mount(source, path, NULL, MS_BIND | MS_REC, NULL) != 0) fail(path);
        close(kept[i]);
        free(path);
    }
}

/* The run's own process: fresh places, limits, the sandbox uid, its descriptors; then the command. */
static void start_run(const struct setup *setup, struct request *run) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    setsid();
    /* every descriptor but the client's closes at exec (first, so
     * what fails below is said on the run's own stderr); theirs are moved above all, then to their numbers */
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) fail("descriptors");
    int high = 0, moved[MAX_FDS];
    for (int i = 0; i < run->nfds; i++) {
        high = run->targets[i] > high ? run->targets[i] : high;
        high = run->fds[i] > high ? run->fds[i] : high;
    }
    for (int i = 0; i < run->nfds; i++) moved[i] = fcntl(run->fds[i], F_DUPFD_CLOEXEC, high + 1);
    for (int i = 0; i < run->nfds; i++) {
        if (moved[i] < 0 || dup2(moved[i], run->targets[i]) < 0) fail("descriptors");
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) fail("mount namespace");
    /* a directory made on a place made fresh is made again; one elsewhere that the run could write (bubblewrap
     * made it 0777 inside a hidden place) gets a fresh tmpfs; one it could not write (it existed) stays so */
    const char *renewed[MAX_WORDS];
    int count = 0;
    for (int i = 0; i < setup->place_words;) {
        char **place = setup->places + i;
        int on_fresh = 0;
        for (int j = 0; j < count; j++) on_fresh |= under(place[strcmp(place[0], "tmpfs") ? 1 : 2], renewed[j]);
        struct stat info;
        if (strcmp(place[0], "tmpfs") == 0) {
            fresh(setup, place[2], place[1]);
            renewed[count++] = place[2];
            i += 3;
        } else if (on_fresh) {
            make_dirs(place[1], 0777);
            i += 2;
        } else {
            if (stat(place[1], &info) == 0 && (info.st_mode & S_IWOTH)) {
                fresh(setup, place[1], "0777");
                renewed[count++] = place[1];
            }
            i += 2;
        }
    }
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) fail("/proc");
    if (chdir(run->cwd) != 0) fail(run->cwd);
    if (setup->note[0]) set_limit(RLIMIT_NPROC, setup->processes, setup->processes);
    set_limit(RLIMIT_AS, setup->memory, setup->memory);
    set_limit(RLIMIT_CPU, setup->cpu_soft, setup->cpu_hard);
    set_limit(RLIMIT_FSIZE, setup->file_size, setup->file_size);
    drop_privileges(setup);
    execvpe(run->argv[0], run->argv, run->env);
    dprintf(2, "%s: cannot run: %s%s\n", run->argv[0], strerror(errno), setup->note);
    _exit(127);
}

/* One request from a client: its descriptors, its directory, cgroup, command and environment. */
static int receive(int conn, struct request *run, char **body) {
    unsigned int length;
    char control[CMSG_SPACE(sizeof(int) * MAX_FDS)];
    struct iovec part = {.iov_base = &length, .iov_len = sizeof length};
    struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof control};
    ssize_t got = recvmsg(conn, &message, MSG_CMSG_CLOEXEC);
    struct cmsghdr *header = got > 0 ? CMSG_FIRSTHDR(&message) : NULL;
    if (header && header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
        run->nfds = (int)((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        memcpy(run->fds, CMSG_DATA(header), sizeof(int) * (size_t)run->nfds);
    }
    if (got != (ssize_t)sizeof length || length > MAX_BODY) return -1;
    *body = malloc(length + 1);
    if (read_all(conn, *body, length) != 0) return -1;
    (*body)[length] = 0;
    int words = 0;
    for (char *at = *body; at < *body + length && words < MAX_WORDS - 1; at += strlen(at) + 1) run->words[words++] = at;
    run->words[words] = NULL;
    if (words < 3) return -1;
    run->cwd = run->words[0];
    int count = atoi(run->words[1]), at = 2;
    if (count != run->nfds || at + count >= words) return -1;
    for (int i = 0; i < count; i++) run->targets[i] = atoi(run->words[at++]);
    int argc = atoi(run->words[at++]);
    if (argc < 1 || at + argc > words) return -1;
    run->argv = run->words + at;
    run->env = run->words + at + argc;
    /* argv ends where the environment starts: the environment's words follow, NULL-terminated */
    static char *argv_copy[MAX_WORDS];
    memcpy(argv_copy, run->argv, sizeof(char *) * (size_t)argc);
    argv_copy[argc] = NULL;
    run->argv = argv_copy;
    return 0;
}

/* Start the run, wait for it (killing it if the client hangs up) and send the client its wait status. */
static void serve_one(const struct setup *setup, int conn) {
    struct request run;
    char *body = NULL;
    run.nfds = 0;
    if (receive(conn, &run, &body) != 0) {
        for (int i = 0; i < run.nfds; i++) close(run.fds[i]);
    } else {
        pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0) start_run(setup, &run);
        for (int i = 0; pid < 0 && i < run.nfds; i++) {
            if (run.targets[i] == 2) dprintf(run.fds[i], "orchard run sandbox: cannot start a run: %s\n", strerror(errno));
        }
        for (int i = 0; i < run.nfds; i++) close(run.fds[i]);
        int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
        int status = 125 << 8;
        struct pollfd watch[2] = {{.fd = conn, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
        while (pidfd >= 0 && poll(watch, 2, -1) >= 0 && !(watch[1].revents & POLLIN)) {
            if (watch[0].revents) {
                kill(pid, SIGKILL);
                watch[0].fd = -1;
            }
        }
        if (pid > 0) waitpid(pid, &status, 0);
        if (pidfd >= 0) close(pidfd);
        write_all(conn, (char *)&status, sizeof status);
    }
    free(body);
    close(conn);
}

static int serve(int argc, char **argv) {
    if (argc < 13) return 2;
    struct setup setup = {.cgroup_fd = atoi(argv[4]), .group = argv[5], .uid = (uid_t)atoi(argv[6]),
                          .gid = (gid_t)atoi(argv[7]), .memory = atoll(argv[8]), .processes = atoll(argv[9]),
                          .cpu_soft = atoll(argv[10]), .cpu_hard = atoll(argv[11]), .file_size = atoll(argv[12]),
                          .places = argv + 13, .place_words = argc - 13};
    int listener = atoi(argv[2]), ready = atoi(argv[3]);
    fcntl(listener, F_SETFD, FD_CLOEXEC);
    side_cgroup(&setup);
    if (setup.cgroup_fd >= 0) close(setup.cgroup_fd); /* no run needs it */
    signal(SIGPIPE, SIG_IGN);
    read_mounts(&setup);
    /* what every run needs of the kernel (5.11 or later); without it orchard gives each run a sandbox of its own */
    int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (self < 0 || syscall(SYS_close_range, ~0U - 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0) return 2;
    close(self);
    if (write_all(ready, "R", 1) != 0) return 2;
    close(ready);
    for (;;) {
        int conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (conn >= 0) serve_one(&setup, conn);
        else if (errno != EINTR && errno != ECONNABORTED) return 2;
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "serve") == 0) return serve(argc, argv);
    if (argc > 1 && strcmp(argv[1], "ask") == 0) return ask(argc, argv);
    fprintf(stderr, "usage: run-sandbox serve ... | ask SOCKET CWD FDS -- COMMAND...\n");
    return 2;
}
