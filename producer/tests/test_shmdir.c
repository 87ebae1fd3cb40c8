/* test_shmdir.c — the shm-dir trust rule (docs/PROTOCOL.md section 2): a
 * directory other users could change is refused, with a message naming it,
 * its owner and mode, and what is expected; segment creation goes through
 * the same check. Cases giving a directory to another user need root
 * (chown); as anyone else they are left out with a note. */
#define _GNU_SOURCE
#include <sys/stat.h>
#include <unistd.h>

#include "segment.h"
#include "testutil.h"

enum { OTHER = 1002 }; /* not us, not root (qa2 on the QA machine; any uid works) */

static char base[512];

static const char *mk(const char *name, mode_t mode, int uid) {
    static char path[8][600];
    static int i;
    char *p = path[i++ % 8];
    snprintf(p, 600, "%s/%s", base, name);
    if (mkdir(p, 0700) != 0) {
        perror(p);
        exit(1);
    }
    if (uid >= 0 && chown(p, (uid_t)uid, (gid_t)uid) != 0) {
        perror(p);
        exit(1);
    }
    if (chmod(p, mode) != 0) {
        perror(p);
        exit(1);
    }
    return p;
}

/* dir must be refused by fzp_shm_dir_open and fzp_segment_create, the
 * message naming dir and containing each of want (NULL-terminated). */
static void refused(const char *dir, const char *want1, const char *want2) {
    char err[1024] = "";
    int fd = fzp_shm_dir_open(dir, err, sizeof err);
    CHECK(fd < 0, "%s accepted", dir);
    if (fd >= 0)
        close(fd);
    CHECK(strstr(err, dir) != NULL, "message \"%s\" lacks the dir", err);
    CHECK(!want1 || strstr(err, want1), "message \"%s\" lacks \"%s\"", err, want1);
    CHECK(!want2 || strstr(err, want2), "message \"%s\" lacks \"%s\"", err, want2);
    err[0] = 0;
    fzp_segment *s = fzp_segment_create(dir, "p", 16, err, sizeof err);
    CHECK(s == NULL, "segment created in %s", dir);
    fzp_segment_remove(s);
    CHECK(!want1 || strstr(err, want1), "segment message \"%s\" lacks \"%s\"", err, want1);
}

static void accepted(const char *dir) {
    char err[1024] = "";
    int fd = fzp_shm_dir_open(dir, err, sizeof err);
    CHECK(fd >= 0, "%s refused: %s", dir, err);
    if (fd >= 0)
        close(fd);
    fzp_segment *s = fzp_segment_create(dir, "p", 16, err, sizeof err);
    CHECK(s != NULL, "segment in %s: %s", dir, err);
    fzp_segment_remove(s);
}

int main(void) {
    snprintf(base, sizeof base, "/tmp/fzp-shmdir-XXXXXX");
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    /* QA (#27.4): another user's mkdir -m 777 before the sidecar started. */
    refused(mk("o777", 0777, -1), "writable by every user", "mode 0777");
    refused(mk("o1777", 01777, -1), "writable by every user", "2770");
    accepted(mk("own", 0700, -1));
    /* above: o+w without sticky refused, sticky (like /dev/shm) fine */
    mk("open", 0777, -1);
    refused(mk("open/fzd", 0700, -1), "above it", "not sticky");
    mk("sticky", 01777, -1);
    accepted(mk("sticky/fzd", 0700, -1));
    if (geteuid() != 0) {
        printf("NOTE: not root: the cases of another user's directory and link are left out\n");
    } else {
        refused(mk("theirs", 0700, OTHER), "uid 1002", "belongs to another user");
        refused(mk("theirs770", 0770, OTHER), "belongs to another user", "2770");
        accepted(mk("shared", 02770, OTHER)); /* the documented shared-group setup */
        refused(mk("shared777", 02777, OTHER), "writable by every user", NULL);
        accepted(mk("rootdir", 0755, 0));
        char link[600];
        snprintf(link, sizeof link, "%s/sticky/theirlink", base);
        CHECK(symlink(mk("good", 0700, -1), link) == 0 && lchown(link, OTHER, OTHER) == 0, "link");
        refused(link, "symbolic link owned by uid 1002", NULL);
        mk("theirabove", 0755, OTHER);
        refused(mk("theirabove/fzd", 0700, -1), "above it", "belongs to another user");
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", base);
    return t_done("test_shmdir");
}
