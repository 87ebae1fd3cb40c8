// Command libfz is the C ABI of fzsidecar's codec and store, built with
// `go build -buildmode=c-shared -o libfz.so ./libfz` (or `make libfz`). The
// contract is fz.h, which every file here includes: the C compiler checks
// each export against its declaration there when cgo builds the package.
//
// Every export runs through call: it turns a panic into FZ_EINTERNAL and an
// error into a status code plus a per-thread message, so nothing a caller
// passes can abort the host process.
package main

func main() {}
