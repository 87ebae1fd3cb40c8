// The per-thread error message behind fz_last_error. A cgo export runs on
// the calling C thread, so a buffer found through a pthread key during the
// call is the caller's. Not a __thread array: a Go c-shared library is marked
// STATIC_TLS, and glibc refuses to dlopen it (Python ctypes, HDF5 plugins)
// when its TLS does not fit the small static-TLS surplus ("cannot allocate
// memory in static TLS block"); a 2 KiB __thread buffer did not.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fz.h"

#define FZ_ERRBUF_SIZE 2048

static pthread_key_t fz_errkey;
static pthread_once_t fz_erronce = PTHREAD_ONCE_INIT;
static int fz_errkey_ok;

static void fz_errkey_make(void) { fz_errkey_ok = pthread_key_create(&fz_errkey, free) == 0; }

// The calling thread's buffer; allocated on its first error (NULL if none yet or out of memory).
static char *fz_errbuf(int create) {
	pthread_once(&fz_erronce, fz_errkey_make);
	if (!fz_errkey_ok) {
		return NULL;
	}
	char *b = pthread_getspecific(fz_errkey);
	if (b == NULL && create) {
		b = calloc(1, FZ_ERRBUF_SIZE);
		if (b != NULL && pthread_setspecific(fz_errkey, b) != 0) {
			free(b);
			b = NULL;
		}
	}
	return b;
}

void fzgo_set_error(const char *msg, size_t n) {
	char *b = fz_errbuf(n > 0);
	if (b == NULL) {
		return;
	}
	if (n >= FZ_ERRBUF_SIZE) {
		n = FZ_ERRBUF_SIZE - 1;
	}
	if (n > 0) {
		memcpy(b, msg, n);
	}
	b[n] = 0;
}

const char *fz_last_error(void) {
	char *b = fz_errbuf(0);
	return b != NULL ? b : "";
}

int fz_abi_version(void) { return FZ_ABI_VERSION; }

void fz_free(void *p) { free(p); }
