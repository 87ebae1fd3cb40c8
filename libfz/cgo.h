// Types that let cgo's generated prototypes match fz.h exactly: cgo has no
// const, but it spells a parameter by its C type name, so a const typedef
// produces the same declaration as fz.h and the compiler checks the two agree.
#ifndef FZ_CGO_H
#define FZ_CGO_H
#include <stdlib.h>
#include "fz.h"
typedef const void fzgo_cvoid;
typedef const char fzgo_cchar;
typedef const uint64_t fzgo_cu64;
typedef const double fzgo_cdouble;
typedef const fz_options fzgo_copts;
void fzgo_set_error(const char *msg, size_t n);
#endif
