/*
 * Test of libfz's logging, run by libfz_test.go:
 *   log DIR
 * DIR is a store with one readable snapshot (r1/a/0) and one blob without
 * its catalog sidecar (r1/a/1), which a listing skips with a warning. This
 * program only lists; libfz_test.go checks what reached stderr: nothing
 * unless FZ_LIBFZ_LOG asks for the warning.
 */
#include <stdio.h>
#include <string.h>

#include "fz.h"

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stdout, "usage: log DIR\n");
		return 2;
	}
	fz_store s = 0;
	if (fz_store_open(argv[1], &s) != FZ_OK) {
		fprintf(stdout, "FAIL open %s: %s\n", argv[1], fz_last_error());
		return 1;
	}
	char *json = NULL;
	fz_status st = fz_store_list_json(s, NULL, NULL, &json);
	/* The skipped blob is left out; the good one is listed. */
	if (st != FZ_OK || !strstr(json, "\"step\":0") || strstr(json, "\"step\":1")) {
		fprintf(stdout, "FAIL list: status %d, %s (%s)\n", st, json ? json : "NULL", fz_last_error());
		return 1;
	}
	fz_free(json);
	fz_store_close(s);
	printf("libfz log test: OK\n");
	return 0;
}
