/* test_json.c — the JSON scanner on untrusted input: malformed text is
 * refused, never read past; protocol values decode. */
#include <math.h>

#include "json.h"
#include "testutil.h"

static int get(const char *s, const char *key, fzj_value *v) { return fzj_get(s, strlen(s), key, v); }

int main(void) {
    fzj_value v;
    char buf[64];
    double d;
    uint64_t u;
    const char *ok = " {\"v\":1,\"msg_id\":\"a-b\",\"ok\":true,\"ratio\":\"inf\",\"abs_eb\":1.5e-3,"
                     "\"error\":{\"code\":\"budget_full\",\"message\":\"x\\\"y\\u00e9\\n\"},\"dims\":[1,[2,{}]],\"n\":null} ";
    CHECK(get(ok, "msg_id", &v) == 1 && fzj_string(&v, buf, sizeof buf) == 0 && strcmp(buf, "a-b") == 0, "msg_id");
    CHECK(get(ok, "ok", &v) == 1 && fzj_bool(&v), "ok");
    CHECK(get(ok, "ratio", &v) == 1 && fzj_float(&v, &d) == 0 && isinf(d) && d > 0, "ratio inf");
    CHECK(get(ok, "abs_eb", &v) == 1 && fzj_float(&v, &d) == 0 && d == 1.5e-3, "abs_eb");
    CHECK(get(ok, "v", &v) == 1 && fzj_uint(&v, &u) == 0 && u == 1, "v");
    CHECK(get(ok, "missing", &v) == 0, "absent key");
    fzj_value e, f;
    CHECK(get(ok, "error", &e) == 1 && e.type == FZJ_OBJECT, "error object");
    CHECK(fzj_get(e.start, e.len, "message", &f) == 1 && fzj_string(&f, buf, sizeof buf) == 0 &&
              strcmp(buf, "x\"y\xc3\xa9\n") == 0, "escapes: %s", buf);
    /* cut, not overflowing */
    char small[4];
    CHECK(fzj_string(&f, small, sizeof small) == 0 && strlen(small) == 3, "cut string");
    const char *bad[] = {"", "{", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x", "{\"a\":tru}", "{\"a\":\"\\q\"}",
                         "{\"a\":\"\\u12\"}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":-}", "[1]", "{\"a\" 1}",
                         "{\"a\":\"x}", "{\"a\":[1,2}", "{\"a\":\"\x01\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(get(bad[i], "a", &v) == -1, "malformed accepted: %s", bad[i]);
    /* deep nesting is refused, not recursed into without limit */
    char deep[300];
    size_t o = 0;
    o += (size_t)sprintf(deep, "{\"a\":");
    for (int i = 0; i < 100; i++)
        deep[o++] = '[';
    for (int i = 0; i < 100; i++)
        deep[o++] = ']';
    deep[o++] = '}';
    deep[o] = 0;
    CHECK(get(deep, "a", &v) == -1, "deep nesting accepted");
    /* not NUL-terminated: n bounds the scan */
    const char trunc[] = "{\"a\":1}XXXX";
    CHECK(fzj_get(trunc, 7, "a", &v) == 1, "length bound");
    CHECK(fzj_get(trunc, 6, "a", &v) == -1, "length bound truncated");
    fzj_value big = {FZJ_NUMBER, "18446744073709551616", 20};
    CHECK(fzj_uint(&big, &u) == -1, "uint overflow");
    fzj_value neg = {FZJ_NUMBER, "-1", 2};
    CHECK(fzj_uint(&neg, &u) == -1, "negative uint");
    char out[128];
    o = 0;
    CHECK(fzj_put_float(out, sizeof out, &o, 0.1) == 0 && strcmp(out, "0.1") == 0, "0.1 -> %s", out);
    o = 0;
    CHECK(fzj_put_float(out, sizeof out, &o, NAN) == 0 && strcmp(out, "\"nan\"") == 0, "nan");
    o = 0;
    CHECK(fzj_put_string(out, sizeof out, &o, "a\"\\\n") == 0 && strcmp(out, "\"a\\\"\\\\\\u000a\"") == 0, "escape: %s", out);
    o = 0;
    CHECK(fzj_put_string(out, 4, &o, "abcdef") == -1, "overflow refused");
    return t_done("test_json");
}
