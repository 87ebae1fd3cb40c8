/* auth.c — see auth.h. Format: UTF-8 text, one key=value per line, '#'
 * comments, unknown keys ignored. */
#define _GNU_SOURCE
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void trim(char *s) {
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = 0;
    size_t b = 0;
    while (s[b] == ' ' || s[b] == '\t')
        b++;
    if (b)
        memmove(s, s + b, n - b + 1);
}

static int set(char *dst, size_t cap, const char *v) {
    if (strlen(v) >= cap)
        return -1;
    strcpy(dst, v);
    return 0;
}

int fzp_auth_read(const char *shm_dir, fzp_auth *a, char *err, size_t errcap) {
    memset(a, 0, sizeof *a);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", shm_dir, FZP_AUTH_FILE) >= (int)sizeof path) {
        snprintf(err, errcap, "shm dir path too long");
        return -1;
    }
    /* Never through a symbolic link: someone could point it at their own file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        if (errno == ELOOP) {
            snprintf(err, errcap, "credentials file %s is a symbolic link: expected the regular file fzsidecar serve writes (docs/PROTOCOL.md section 1)", path);
            return -1;
        }
        snprintf(err, errcap, "credentials file %s cannot be read: %s (run the producer as the sidecar's user, or pass user/password)", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(err, errcap, "credentials file %s is not a regular file: expected the file fzsidecar serve writes", path);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        snprintf(err, errcap, "credentials file %s is owned by uid %u, not by this process's uid %u: refusing it (docs/PROTOCOL.md section 1)",
                 path, (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    if (st.st_mode & 077) {
        close(fd);
        snprintf(err, errcap, "credentials file %s has mode %04o: group/other permissions mean its password may have leaked; refusing it (expected 0600)",
                 path, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    if (st.st_size > 65536) {
        close(fd);
        snprintf(err, errcap, "credentials file %s is larger than 64 KiB", path);
        return -1;
    }
    char buf[65537];
    size_t n = 0;
    while (n < (size_t)st.st_size) {
        ssize_t k = read(fd, buf + n, sizeof buf - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = 0;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        trim(line);
        if (line[0] == 0 || line[0] == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = 0;
        char *k = line, *v = eq + 1;
        trim(k);
        trim(v);
        int r = 0;
        if (strcmp(k, "url") == 0)
            r = set(a->url, sizeof a->url, v);
        else if (strcmp(k, "user") == 0)
            r = set(a->user, sizeof a->user, v);
        else if (strcmp(k, "password") == 0)
            r = set(a->password, sizeof a->password, v);
        else if (strcmp(k, "prefix") == 0)
            r = set(a->prefix, sizeof a->prefix, v);
        else if (strcmp(k, "v") == 0 && strcmp(v, "1") != 0) {
            snprintf(err, errcap, "credentials file %s has version %s: this library reads version 1", path, v);
            return -1;
        }
        if (r != 0) {
            snprintf(err, errcap, "credentials file %s: value of %s is too long", path, k);
            return -1;
        }
    }
    return 1;
}
