// The per-thread error message behind fz_last_error. A cgo export runs on
// the calling C thread, so a __thread buffer written during the call is the
// caller's.
#include <stdlib.h>
#include <string.h>

#include "fz.h"

static __thread char fz_errbuf[2048];

void fzgo_set_error(const char *msg, size_t n) {
	if (n >= sizeof fz_errbuf) {
		n = sizeof fz_errbuf - 1;
	}
	if (n > 0) {
		memcpy(fz_errbuf, msg, n);
	}
	fz_errbuf[n] = 0;
}

const char *fz_last_error(void) { return fz_errbuf; }

int fz_abi_version(void) { return FZ_ABI_VERSION; }

void fz_free(void *p) { free(p); }
