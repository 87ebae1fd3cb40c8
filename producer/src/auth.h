/* auth.h — the local-trust credentials file <shm dir>/.fzsidecar-auth that
 * a zero-config `fzsidecar serve` writes (docs/PROTOCOL.md section 1). */
#ifndef FZP_AUTH_H
#define FZP_AUTH_H

#include <stddef.h>

#define FZP_AUTH_FILE ".fzsidecar-auth"

typedef struct fzp_auth {
    char url[1024];
    char user[256];
    char password[256];
    char prefix[160];
} fzp_auth;

/* Reads <shm_dir>/.fzsidecar-auth. Returns 1 when read (fields set; absent
 * keys left ""), 0 when the file does not exist, -1 on an unreadable or
 * malformed file (message in err). */
int fzp_auth_read(const char *shm_dir, fzp_auth *a, char *err, size_t errcap);

#endif
