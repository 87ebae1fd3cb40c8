/* GPU-resident snapshots: the CUDA driver parts of fzp_publish_device
 * (device.c). The driver is loaded at run time. */
#ifndef FZP_DEVICE_H
#define FZP_DEVICE_H
#include <stddef.h>
#include <stdint.h>

struct fzp_dev_state; /* per producer: the pool of interprocess events */

/* FZP_OK when the CUDA driver loads, else FZP_ESYS with the reason. */
int fzp_dev_available(char *err, size_t cap);

/* For the nbytes at device pointer dptr: writes the notification's
 * "device":{...} member into json, the field's offset in its allocation
 * into *offset, and records a pooled interprocess event on stream (NULL:
 * the legacy default stream) into *ev. *state is created on first use.
 * Returns FZP_OK, FZP_EINVAL (not device memory, not exportable, past its
 * allocation), FZP_ENOMEM or FZP_ESYS (driver), with a message in err. */
int fzp_dev_prepare(struct fzp_dev_state **state, const void *dptr, uint64_t nbytes, void *stream, char *json,
                    size_t cap, uint64_t *offset, void **ev, char *err, size_t errcap);

/* Gives an event back: to the pool (reuse: the sidecar is done with the
 * snapshot) or destroyed. */
void fzp_dev_release(struct fzp_dev_state *state, void *ev, int reuse);

void fzp_dev_state_free(struct fzp_dev_state *state);
#endif
