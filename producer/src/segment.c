/* segment.c — see segment.h. */
#define _GNU_SOURCE
#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

int fzp_mkdir_all(const char *dir) {
    size_t n = strlen(dir);
    if (n == 0)
        return EINVAL;
    char *p = strdup(dir);
    if (!p)
        return ENOMEM;
    int rc = 0;
    for (size_t i = 1; i <= n && rc == 0; i++) {
        if (p[i] != '/' && p[i] != 0)
            continue;
        char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            rc = errno;
        p[i] = c;
    }
    free(p);
    if (rc == 0) {
        struct stat st;
        if (stat(dir, &st) != 0)
            rc = errno;
        else if (!S_ISDIR(st.st_mode))
            rc = ENOTDIR;
    }
    return rc;
}

/* Shm-dir trust, the rule of docs/PROTOCOL.md section 2 (the Go library's
 * ingest/shmdirsafe.go applies the same): in a directory other users may
 * change, they could swap a published segment for their own file before
 * the sidecar maps it. */

static void user_desc(uid_t uid, char *out, size_t cap) {
    struct passwd pw, *res = NULL;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res && res->pw_name && res->pw_name[0])
        snprintf(out, cap, "uid %u (%s)", (unsigned)uid, res->pw_name);
    else
        snprintf(out, cap, "uid %u", (unsigned)uid);
}

/* The ownership and mode rule for one directory; above: it lies above the
 * shm dir, where a sticky o+w directory (/dev/shm, /tmp) is fine. */
static int check_dir_mode(const char *path, const struct stat *st, int above, char *err, size_t errcap) {
    char who[160];
    uid_t euid = geteuid();
    if (!S_ISDIR(st->st_mode)) {
        snprintf(err, errcap, "shm dir %s is not a directory: expected a directory", path);
        return -1;
    }
    user_desc(st->st_uid, who, sizeof who);
    unsigned mode = (unsigned)st->st_mode & 07777;
    if ((mode & S_IWOTH) && !(above && (mode & S_ISVTX))) {
        if (above)
            snprintf(err, errcap, "%s (owner %s, mode %04o) is writable by every user and not sticky: anyone could move "
                     "the shm dir away and put their own in its place; expected a path whose directories only you or root can change",
                     path, who, mode);
        else
            snprintf(err, errcap, "shm dir %s (owner %s, mode %04o) is writable by every user: another user could replace a "
                     "published segment (forging its data) or the credentials file; expected mode 0700 owned by you, or a shared "
                     "group's directory with mode 2770 (chmod o-w, or choose another shm dir)", path, who, mode);
        return -1;
    }
    int group_shared = (mode & S_ISGID) && (mode & S_IWGRP);
    if (st->st_uid != euid && st->st_uid != 0 && !group_shared) {
        snprintf(err, errcap, "%s%s (owner %s, mode %04o) belongs to another user, who could replace what is in it, and is not a "
                 "group-shared directory: expected a directory owned by you (uid %u) or root, or one created for a shared group "
                 "with mode 2770 (group-writable, setgid)", above ? "" : "shm dir ", path, who, mode, (unsigned)euid);
        return -1;
    }
    return 0;
}

int fzp_shm_dir_open(const char *dir, char *err, size_t errcap) {
    char abs[PATH_MAX], real[PATH_MAX], above[PATH_MAX], who[160];
    if (dir[0] == '/')
        snprintf(abs, sizeof abs, "%s", dir);
    else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) {
            snprintf(err, errcap, "shm dir %s: %s", dir, strerror(errno));
            return -1;
        }
        if ((size_t)snprintf(abs, sizeof abs, "%s/%s", cwd, dir) >= sizeof abs) {
            snprintf(err, errcap, "shm dir %s: path too long", dir);
            return -1;
        }
    }
    /* Symbolic links on the path as given: another user's could be pointed
     * elsewhere later. */
    for (size_t i = 1, n = strlen(abs); i <= n; i++) {
        if (abs[i] != '/' && abs[i] != 0)
            continue;
        char c = abs[i];
        abs[i] = 0;
        struct stat st;
        int bad = lstat(abs, &st) == 0 && S_ISLNK(st.st_mode) && st.st_uid != geteuid() && st.st_uid != 0;
        if (bad) {
            user_desc(st.st_uid, who, sizeof who);
            snprintf(err, errcap, "shm dir %s: %s is a symbolic link owned by %s, who could point it elsewhere: expected a "
                     "path of links owned by you or root (use the directory the link points at)", dir, abs, who);
        }
        abs[i] = c;
        if (bad)
            return -1;
    }
    if (!realpath(abs, real)) {
        snprintf(err, errcap, "shm dir %s: %s", dir, strerror(errno));
        return -1;
    }
    /* Directories above: nobody else may rename the shm dir away. */
    snprintf(above, sizeof above, "%s", real);
    for (;;) {
        char *slash = strrchr(above, '/');
        if (!slash)
            break;
        if (slash == above)
            slash[1] = 0; /* "/" */
        else
            *slash = 0;
        struct stat st;
        if (lstat(above, &st) != 0) {
            snprintf(err, errcap, "shm dir %s: %s: %s", dir, above, strerror(errno));
            return -1;
        }
        char why[768];
        if (check_dir_mode(above, &st, 1, why, sizeof why) != 0) {
            snprintf(err, errcap, "shm dir %s: the directory above it: %s", dir, why);
            return -1;
        }
        if (strcmp(above, "/") == 0)
            break;
    }
    struct stat before, st;
    if (stat(real, &before) != 0) {
        snprintf(err, errcap, "shm dir %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errcap, "open shm dir %s: %s", dir, strerror(errno));
        return -1;
    }
    /* What was opened is what is checked and used. */
    if (fstat(fd, &st) != 0) {
        snprintf(err, errcap, "shm dir %s: %s", dir, strerror(errno));
        close(fd);
        return -1;
    }
    if (st.st_dev != before.st_dev || st.st_ino != before.st_ino) {
        snprintf(err, errcap, "shm dir %s was replaced while it was being checked: someone is changing the path; expected a "
                 "directory only you control", dir);
        close(fd);
        return -1;
    }
    if (check_dir_mode(dir, &st, 0, err, errcap) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int random_hex(char *out, size_t nbytes) {
    unsigned char b[16];
    if (nbytes > sizeof b)
        return -1;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t k = getrandom(b + got, nbytes - got, 0);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)k;
    }
    for (size_t i = 0; i < nbytes; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
    return 0;
}

fzp_segment *fzp_segment_create(const char *dir, const char *prefix, uint64_t size, char *err, size_t errcap) {
    if (size > (uint64_t)INT64_MAX || (uint64_t)(size_t)size != size) {
        snprintf(err, errcap, "segment of %llu bytes cannot be mapped on this platform", (unsigned long long)size);
        return NULL;
    }
    int e = fzp_mkdir_all(dir);
    if (e != 0) {
        snprintf(err, errcap, "shm dir %s cannot be created: %s (the sidecar's --shm-dir must be a writable directory)", dir, strerror(e));
        return NULL;
    }
    int dfd = fzp_shm_dir_open(dir, err, errcap);
    if (dfd < 0)
        return NULL;
    fzp_segment *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errcap, "out of memory");
        close(dfd);
        return NULL;
    }
    s->fd = -1;
    char rnd[13];
    for (int attempt = 0; attempt < 8; attempt++) {
        if (random_hex(rnd, 6) != 0) {
            snprintf(err, errcap, "getrandom: %s", strerror(errno));
            goto fail;
        }
        free(s->name);
        free(s->path);
        s->name = s->path = NULL;
        if (asprintf(&s->name, "%s-%s.seg", prefix, rnd) < 0 || asprintf(&s->path, "%s/%s", dir, s->name) < 0) {
            s->name = s->path = NULL;
            snprintf(err, errcap, "out of memory");
            goto fail;
        }
        s->fd = openat(dfd, s->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (s->fd >= 0 || errno != EEXIST)
            break;
    }
    if (s->fd < 0) {
        snprintf(err, errcap, "create segment %s: %s (is the shm dir writable by this user?)", s->path ? s->path : dir, strerror(errno));
        goto fail;
    }
    s->size = size;
    if (size > 0) {
        int r;
        do
            r = fallocate(s->fd, 0, 0, (off_t)size);
        while (r != 0 && errno == EINTR);
        if (r != 0) {
            if (errno != EOPNOTSUPP) {
                snprintf(err, errcap, "reserve %llu bytes for segment %s: %s%s", (unsigned long long)size, s->path,
                         strerror(errno), errno == ENOSPC ? " (the shared-memory filesystem is full)" : "");
                goto fail_unlink;
            }
            /* A filesystem without fallocate: fall back to a sparse file. */
            if (ftruncate(s->fd, (off_t)size) != 0) {
                snprintf(err, errcap, "size segment %s: %s", s->path, strerror(errno));
                goto fail_unlink;
            }
        }
        s->data = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
        if (s->data == MAP_FAILED) {
            s->data = NULL;
            snprintf(err, errcap, "map segment %s (%llu bytes): %s", s->path, (unsigned long long)size, strerror(errno));
            goto fail_unlink;
        }
    }
    close(dfd);
    return s;
fail_unlink:
    unlinkat(dfd, s->name, 0);
fail:
    close(dfd);
    if (s->fd >= 0)
        close(s->fd);
    free(s->name);
    free(s->path);
    free(s);
    return NULL;
}

void fzp_segment_remove(fzp_segment *s) {
    if (!s)
        return;
    if (s->data)
        munmap(s->data, (size_t)s->size);
    if (s->fd >= 0)
        close(s->fd);
    if (s->path)
        unlink(s->path);
    free(s->name);
    free(s->path);
    free(s);
}
