/* segment.h — shared-memory segment files (docs/PROTOCOL.md section 2). */
#ifndef FZP_SEGMENT_H
#define FZP_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fzp_segment {
    char *path;  /* full path */
    char *name;  /* name relative to the shm dir (what the notification carries) */
    int fd;
    void *data;  /* MAP_SHARED read-write mapping, NULL for size 0 */
    uint64_t size;
} fzp_segment;

/* Creates the directory (mode 0700) when missing, checks it
 * (fzp_shm_dir_open), then a new file
 * <dir>/<prefix>-<random>.seg of exactly size bytes, reserved with fallocate
 * (so a full tmpfs fails here with ENOSPC instead of SIGBUS later) and
 * mapped. On failure returns NULL and writes a message into err. */
fzp_segment *fzp_segment_create(const char *dir, const char *prefix, uint64_t size, char *err, size_t errcap);

/* Opens the shm dir (O_DIRECTORY), refusing one other users could change:
 * writable by others, owned by another non-root user and not group-shared
 * (setgid and group-writable, mode 2770), under a directory others may
 * rename entries of, or reached through another user's symbolic link
 * (docs/PROTOCOL.md section 2). Returns the fd, or -1 with a message. */
int fzp_shm_dir_open(const char *dir, char *err, size_t errcap);

/* Unmaps, closes and unlinks the file, and frees seg (NULL is fine). */
void fzp_segment_remove(fzp_segment *seg);

/* Creates dir and its parents with mode 0700 where missing. 0 or errno. */
int fzp_mkdir_all(const char *dir);

#endif
