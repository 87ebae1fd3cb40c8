/* json.h — the little JSON the protocol needs: look up keys of an object
 * received from the network (untrusted: every input is bounds-checked and
 * malformed text is reported, never read past), and write escaped strings. */
#ifndef FZP_JSON_H
#define FZP_JSON_H

#include <stddef.h>
#include <stdint.h>

enum { FZJ_STRING = 1, FZJ_NUMBER, FZJ_TRUE, FZJ_FALSE, FZJ_NULL, FZJ_OBJECT, FZJ_ARRAY };

typedef struct fzj_value {
    int type;
    const char *start; /* the value's text (strings: without the quotes) */
    size_t len;
} fzj_value;

/* Finds key in the JSON object text s[0..n): 1 found (*out set), 0 absent,
 * -1 not a well-formed object. Surrounding whitespace is allowed, trailing
 * data is not. */
int fzj_get(const char *s, size_t n, const char *key, fzj_value *out);

/* Copies a string value, unescaped, into buf (cap bytes, NUL-terminated,
 * cut if longer). 0 on success, -1 if v is not a string or is malformed. */
int fzj_string(const fzj_value *v, char *buf, size_t cap);

/* A number, or one of the strings "nan", "inf", "-inf" (the protocol's
 * spelling of floats JSON cannot carry). 0 on success. */
int fzj_float(const fzj_value *v, double *d);

/* A non-negative integer that fits in 64 bits. 0 on success. */
int fzj_uint(const fzj_value *v, uint64_t *u);

/* 1 for true, 0 for false or absent/other types. */
int fzj_bool(const fzj_value *v);

/* Appends s as a JSON string (with quotes) to buf at *pos; -1 if cap is too small. */
int fzj_put_string(char *buf, size_t cap, size_t *pos, const char *s);

/* Appends formatted text; -1 if cap is too small. */
int fzj_putf(char *buf, size_t cap, size_t *pos, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Appends a double the way the protocol wants it: shortest round-trip
 * decimal, or "nan", "inf", "-inf" as strings. */
int fzj_put_float(char *buf, size_t cap, size_t *pos, double d);

#endif
