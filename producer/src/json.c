/* json.c — see json.h. A small validating scanner rather than a tree: the
 * protocol's replies are flat objects with one nested "error" object. */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZJ_MAX_DEPTH 32

typedef struct {
    const char *s;
    size_t n, i;
} scan;

static void skip_ws(scan *c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

static int is_hex(char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* At an opening quote: moves past the closing quote, setting the body span. */
static int scan_string(scan *c, const char **start, size_t *len) {
    if (c->i >= c->n || c->s[c->i] != '"')
        return -1;
    c->i++;
    size_t b = c->i;
    while (c->i < c->n) {
        unsigned char ch = (unsigned char)c->s[c->i];
        if (ch == '"') {
            *start = c->s + b;
            *len = c->i - b;
            c->i++;
            return 0;
        }
        if (ch < 0x20)
            return -1;
        if (ch == '\\') {
            if (c->i + 1 >= c->n)
                return -1;
            char e = c->s[c->i + 1];
            if (e == 'u') {
                if (c->i + 5 >= c->n)
                    return -1;
                for (int k = 2; k <= 5; k++)
                    if (!is_hex(c->s[c->i + k]))
                        return -1;
                c->i += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e))
                return -1;
            c->i += 2;
            continue;
        }
        c->i++;
    }
    return -1;
}

static int scan_value(scan *c, fzj_value *v, int depth);

static int scan_container(scan *c, int depth, char close, int object) {
    if (depth > FZJ_MAX_DEPTH)
        return -1;
    c->i++; /* opening bracket */
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == close) {
        c->i++;
        return 0;
    }
    for (;;) {
        skip_ws(c);
        if (object) {
            const char *ks;
            size_t kl;
            if (scan_string(c, &ks, &kl) != 0)
                return -1;
            skip_ws(c);
            if (c->i >= c->n || c->s[c->i] != ':')
                return -1;
            c->i++;
        }
        fzj_value v;
        if (scan_value(c, &v, depth + 1) != 0)
            return -1;
        skip_ws(c);
        if (c->i >= c->n)
            return -1;
        if (c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->s[c->i] == close) {
            c->i++;
            return 0;
        }
        return -1;
    }
}

static int scan_number(scan *c) {
    size_t b = c->i;
    if (c->i < c->n && c->s[c->i] == '-')
        c->i++;
    if (c->i >= c->n)
        return -1;
    if (c->s[c->i] == '0')
        c->i++;
    else if (c->s[c->i] >= '1' && c->s[c->i] <= '9')
        while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9')
            c->i++;
    else
        return -1;
    if (c->i < c->n && c->s[c->i] == '.') {
        c->i++;
        size_t d = c->i;
        while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9')
            c->i++;
        if (c->i == d)
            return -1;
    }
    if (c->i < c->n && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        c->i++;
        if (c->i < c->n && (c->s[c->i] == '+' || c->s[c->i] == '-'))
            c->i++;
        size_t d = c->i;
        while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9')
            c->i++;
        if (c->i == d)
            return -1;
    }
    return c->i > b ? 0 : -1;
}

static int scan_lit(scan *c, const char *lit) {
    size_t l = strlen(lit);
    if (c->n - c->i < l || memcmp(c->s + c->i, lit, l) != 0)
        return -1;
    c->i += l;
    return 0;
}

static int scan_value(scan *c, fzj_value *v, int depth) {
    skip_ws(c);
    if (c->i >= c->n)
        return -1;
    size_t b = c->i;
    v->start = c->s + b;
    switch (c->s[c->i]) {
    case '"':
        v->type = FZJ_STRING;
        return scan_string(c, &v->start, &v->len);
    case '{':
        v->type = FZJ_OBJECT;
        if (scan_container(c, depth, '}', 1) != 0)
            return -1;
        break;
    case '[':
        v->type = FZJ_ARRAY;
        if (scan_container(c, depth, ']', 0) != 0)
            return -1;
        break;
    case 't':
        v->type = FZJ_TRUE;
        if (scan_lit(c, "true") != 0)
            return -1;
        break;
    case 'f':
        v->type = FZJ_FALSE;
        if (scan_lit(c, "false") != 0)
            return -1;
        break;
    case 'n':
        v->type = FZJ_NULL;
        if (scan_lit(c, "null") != 0)
            return -1;
        break;
    default:
        v->type = FZJ_NUMBER;
        if (scan_number(c) != 0)
            return -1;
    }
    v->len = c->i - b;
    return 0;
}

int fzj_get(const char *s, size_t n, const char *key, fzj_value *out) {
    if (!s || !key)
        return -1;
    scan c = {s, n, 0};
    skip_ws(&c);
    if (c.i >= c.n || c.s[c.i] != '{')
        return -1;
    c.i++;
    int found = 0;
    size_t klen = strlen(key);
    skip_ws(&c);
    if (c.i < c.n && c.s[c.i] == '}') {
        c.i++;
    } else {
        for (;;) {
            skip_ws(&c);
            const char *ks;
            size_t kl;
            if (scan_string(&c, &ks, &kl) != 0)
                return -1;
            skip_ws(&c);
            if (c.i >= c.n || c.s[c.i] != ':')
                return -1;
            c.i++;
            fzj_value v;
            if (scan_value(&c, &v, 1) != 0)
                return -1;
            /* Keys the protocol uses are plain ASCII: compare the raw text. */
            if (!found && kl == klen && memcmp(ks, key, kl) == 0) {
                *out = v;
                found = 1;
            }
            skip_ws(&c);
            if (c.i >= c.n)
                return -1;
            if (c.s[c.i] == ',') {
                c.i++;
                continue;
            }
            if (c.s[c.i] == '}') {
                c.i++;
                break;
            }
            return -1;
        }
    }
    skip_ws(&c);
    if (c.i != c.n)
        return -1;
    return found;
}

static int put_utf8(char *buf, size_t cap, size_t *o, unsigned cp) {
    char tmp[4];
    size_t l;
    if (cp < 0x80) {
        tmp[0] = (char)cp;
        l = 1;
    } else if (cp < 0x800) {
        tmp[0] = (char)(0xC0 | (cp >> 6));
        tmp[1] = (char)(0x80 | (cp & 0x3F));
        l = 2;
    } else if (cp < 0x10000) {
        tmp[0] = (char)(0xE0 | (cp >> 12));
        tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[2] = (char)(0x80 | (cp & 0x3F));
        l = 3;
    } else {
        tmp[0] = (char)(0xF0 | (cp >> 18));
        tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[3] = (char)(0x80 | (cp & 0x3F));
        l = 4;
    }
    if (*o + l >= cap)
        return -1;
    memcpy(buf + *o, tmp, l);
    *o += l;
    return 0;
}

static unsigned hex4(const char *p) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char ch = p[k];
        v <<= 4;
        if (ch >= '0' && ch <= '9')
            v |= (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            v |= (unsigned)(ch - 'a' + 10);
        else
            v |= (unsigned)(ch - 'A' + 10);
    }
    return v;
}

int fzj_string(const fzj_value *v, char *buf, size_t cap) {
    if (!v || v->type != FZJ_STRING || !buf || cap == 0)
        return -1;
    size_t o = 0;
    const char *p = v->start, *e = v->start + v->len;
    while (p < e) {
        if (*p != '\\') {
            if (o + 1 >= cap)
                break; /* cut */
            buf[o++] = *p++;
            continue;
        }
        if (p + 1 >= e)
            return -1;
        char esc = p[1];
        unsigned cp = 0;
        switch (esc) {
        case 'n': cp = '\n'; break;
        case 't': cp = '\t'; break;
        case 'r': cp = '\r'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'u':
            if (e - p < 6)
                return -1;
            cp = hex4(p + 2);
            if (cp >= 0xD800 && cp < 0xDC00 && e - p >= 12 && p[6] == '\\' && p[7] == 'u') {
                unsigned lo = hex4(p + 8);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000)
                cp = 0xFFFD; /* lone surrogate */
            p += 4;
            break;
        default:
            return -1;
        }
        p += 2;
        if (put_utf8(buf, cap, &o, cp) != 0)
            break;
    }
    buf[o] = 0;
    return 0;
}

int fzj_float(const fzj_value *v, double *d) {
    if (!v || !d)
        return -1;
    if (v->type == FZJ_STRING) {
        char tmp[8];
        if (v->len >= sizeof tmp || fzj_string(v, tmp, sizeof tmp) != 0)
            return -1;
        if (strcmp(tmp, "nan") == 0)
            *d = NAN;
        else if (strcmp(tmp, "inf") == 0 || strcmp(tmp, "+inf") == 0)
            *d = INFINITY;
        else if (strcmp(tmp, "-inf") == 0)
            *d = -INFINITY;
        else
            return -1;
        return 0;
    }
    if (v->type != FZJ_NUMBER || v->len >= 64)
        return -1;
    char tmp[64];
    memcpy(tmp, v->start, v->len);
    tmp[v->len] = 0;
    char *end;
    *d = strtod(tmp, &end);
    return *end == 0 ? 0 : -1;
}

int fzj_uint(const fzj_value *v, uint64_t *u) {
    if (!v || !u || v->type != FZJ_NUMBER || v->len == 0 || v->len > 20)
        return -1;
    uint64_t x = 0;
    for (size_t k = 0; k < v->len; k++) {
        char ch = v->start[k];
        if (ch < '0' || ch > '9')
            return -1;
        unsigned dgt = (unsigned)(ch - '0');
        if (x > (UINT64_MAX - dgt) / 10)
            return -1;
        x = x * 10 + dgt;
    }
    *u = x;
    return 0;
}

int fzj_bool(const fzj_value *v) { return v && v->type == FZJ_TRUE; }

int fzj_putf(char *buf, size_t cap, size_t *pos, const char *fmt, ...) {
    if (*pos >= cap)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *pos, cap - *pos, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= cap - *pos)
        return -1;
    *pos += (size_t)k;
    return 0;
}

int fzj_put_string(char *buf, size_t cap, size_t *pos, const char *s) {
    if (fzj_putf(buf, cap, pos, "\"") != 0)
        return -1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int r;
        if (*p == '"' || *p == '\\')
            r = fzj_putf(buf, cap, pos, "\\%c", *p);
        else if (*p < 0x20)
            r = fzj_putf(buf, cap, pos, "\\u%04x", *p);
        else
            r = fzj_putf(buf, cap, pos, "%c", *p);
        if (r != 0)
            return -1;
    }
    return fzj_putf(buf, cap, pos, "\"");
}

int fzj_put_float(char *buf, size_t cap, size_t *pos, double d) {
    if (isnan(d))
        return fzj_putf(buf, cap, pos, "\"nan\"");
    if (isinf(d))
        return fzj_putf(buf, cap, pos, d > 0 ? "\"inf\"" : "\"-inf\"");
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    /* A process may have set a locale whose decimal point is ','. */
    for (char *q = tmp; *q; q++)
        if (*q == ',')
            *q = '.';
    return fzj_putf(buf, cap, pos, "%s", tmp);
}
