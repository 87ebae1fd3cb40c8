/* segment.c — see segment.h. */
#define _GNU_SOURCE
#include "segment.h"

#include <errno.h>
#include <fcntl.h>
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
    fzp_segment *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errcap, "out of memory");
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
        s->fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
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
    return s;
fail_unlink:
    unlink(s->path);
fail:
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
