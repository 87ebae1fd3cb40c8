/* producer.c — protocol v1 producer on the NATS C client (docs/PROTOCOL.md;
 * mirrors ingest/producer.go). */
#define _GNU_SOURCE
#include "fzproducer.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "auth.h"
#include "json.h"
#include "segment.h"
#include "device.h"

#define DEFAULT_URL "nats://127.0.0.1:4222"
#define DEFAULT_SHM_DIR "/dev/shm/fzsidecar"
#define DEFAULT_PREFIX "fz"
#define MAX_STEP 999999999999ULL
#define MAX_ELEMENTS (1ULL << 59)
#define NOTE_CAP 65536 /* the stream refuses larger notifications */

enum snap_state { SNAP_BEGUN, SNAP_PUBLISHING, SNAP_PUBLISHED, SNAP_DONE, SNAP_FAILED };

struct fzp_snapshot {
    fzp_producer *p;
    struct fzp_snapshot *prev, *next; /* every live snapshot of p */
    int state;
    char msg_id[160];
    char run[160], var[160];
    uint64_t step;
    int dtype, mode, ndims, has_fill;
    uint64_t dims[FZP_MAX_DIMS];
    double bound, fill;
    uint64_t nbytes;
    fzp_segment *seg;
    int reused;
    /* GPU-resident snapshots (device.c): the "device" member, the field's
     * offset in its allocation and the pooled event; seg is NULL */
    char *dev_json;
    uint64_t dev_offset;
    void *dev_ev;
    int64_t sent_ms, checked_ms; /* published at; last result-stream look-up */
    int admitted;                /* holds an admission lease (fzp_begin) */
    int64_t leased_ms;           /* when it was granted or last renewed */
    fzp_result res;
    double gpu_seconds; /* the result's gpu_seconds (GPU-resident snapshots), else 0;
                         * apart from res, whose layout bindings mirror */
};

struct fzp_producer {
    /* options */
    char *url, *token, *user, *password, *creds, *tls_ca, *tls_cert, *tls_key;
    char *prefix, *shm_dir, *id;
    int policy_fail;
    int64_t block_timeout_ms, connect_timeout_ms, publish_timeout_ms, poll_interval_ms, request_timeout_ms;
    int reuse_segments;
    int ignore_live_results; /* testing only: exercise the result-stream look-up */
    /* derived */
    char *subj_snap, *subj_results, *subj_admit, *subj_release, *subj_status, *result_stream;
    char msg_base[130]; /* msg ids: <msg_base>-<counter> */
    uint64_t msg_seq;
    /* connection */
    natsConnection *nc;
    jsCtx *js;
    natsSubscription *sub;
    int sub_done;
    /* shared with the NATS threads, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    fzp_snapshot *snaps;
    fzp_segment **spare;
    int nspare;
    int connected, closed;
    int64_t lease_ms;          /* the sidecar's admission lease (from its grants; 0: none) */
    pthread_t renewer;         /* renews the leases of begun snapshots */
    int renewer_started;
    char *renew_inbox;         /* where the sidecar's answers to renewals go (unread) */
    struct fzp_dev_state *dev; /* device.c: interprocess events */
    int dev_feature;           /* the sidecar listed "cuda_ipc" (checked once) */
    /* last error of a call on this producer */
    char errmsg[2048];
    char errcode[64];
};

static const char *no_producer_msg = "no producer: the fzp_producer pointer is NULL (fzp_new returns NULL only when out of memory)";

/* ---------- small helpers ---------- */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms) {
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int fail(fzp_producer *p, int status, const char *code, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int fail(fzp_producer *p, int status, const char *code, const char *fmt, ...) {
    if (!p)
        return status;
    snprintf(p->errcode, sizeof p->errcode, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->errmsg, sizeof p->errmsg, fmt, ap);
    va_end(ap);
    return status;
}

static int ok(fzp_producer *p) {
    p->errmsg[0] = 0;
    p->errcode[0] = 0;
    return FZP_OK;
}

static void nats_err(char *buf, size_t cap, natsStatus s) {
    natsStatus ls;
    const char *t = nats_GetLastError(&ls);
    if (t && *t && ls == s)
        snprintf(buf, cap, "%s", t);
    else
        snprintf(buf, cap, "%s", natsStatus_GetText(s));
}

static int valid_token(const char *s) {
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return n >= 1 && n <= 128;
}

static int valid_name(const char *s) {
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        int alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (n == 0 || !(c == '.' || c == '_' || c == '-')))
            return 0;
        if (n >= 128)
            return 0;
    }
    return n >= 1;
}

static int set_str(char **dst, const char *v) {
    char *c = v ? strdup(v) : NULL;
    if (v && !c)
        return -1;
    free(*dst);
    *dst = c;
    return 0;
}

static int parse_ms(const char *v, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < 0 || x > 365LL * 24 * 3600 * 1000)
        return -1;
    *out = x;
    return 0;
}

static const char *dtype_name(int d) { return d == FZP_F32 ? "f32" : "f64"; }
static unsigned dtype_size(int d) { return d == FZP_F32 ? 4 : 8; }

static void format_dims(char *buf, size_t cap, int ndims, const uint64_t *dims) {
    size_t o = 0;
    buf[0] = 0;
    if (fzj_putf(buf, cap, &o, "[") != 0)
        return;
    for (int i = 0; i < ndims; i++)
        if (fzj_putf(buf, cap, &o, i ? ",%llu" : "%llu", (unsigned long long)dims[i]) != 0)
            return;
    fzj_putf(buf, cap, &o, "]");
}

/* url for messages: a password in it ("nats://user:pass@host") is hidden,
 * in each comma-separated server. */
static void redact_url(char *out, size_t cap, const char *url) {
    size_t o = 0;
    const char *p = url;
    while (*p && o + 1 < cap) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *scheme = strstr(p, "://"), *at = memchr(p, '@', n);
        if (scheme && at && scheme < at && scheme < p + n) {
            size_t head = (size_t)(scheme + 3 - p);
            o += (size_t)snprintf(out + o, cap - o, "%.*s***%.*s", (int)head, p, (int)(p + n - at), at);
        } else
            o += (size_t)snprintf(out + o, cap - o, "%.*s", (int)n, p);
        if (o >= cap)
            o = cap - 1;
        if (!end)
            break;
        if (o + 1 < cap)
            out[o++] = ',';
        p = end + 1;
    }
    out[o < cap ? o : cap - 1] = 0;
}

/* ---------- life cycle ---------- */

const char *fzp_version(void) {
    return "1.0 (protocol 1, nats.c " NATS_VERSION_STRING ")";
}

fzp_producer *fzp_new(void) {
    fzp_producer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->block_timeout_ms = 60000;
    p->connect_timeout_ms = 10000;
    p->publish_timeout_ms = 60000;
    p->poll_interval_ms = 2000;
    p->request_timeout_ms = 5000;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    return p;
}

const char *fzp_errmsg(const fzp_producer *p) { return p ? p->errmsg : no_producer_msg; }
const char *fzp_errcode(const fzp_producer *p) { return p ? p->errcode : "invalid"; }

const char *fzp_id(const fzp_producer *p) { return p && p->id ? p->id : ""; }

int fzp_set(fzp_producer *p, const char *key, const char *value) {
    if (!p)
        return FZP_EINVAL;
    if (!key || !value)
        return fail(p, FZP_EINVAL, "invalid", "fzp_set: key and value must not be NULL");
    if (p->connected || p->closed)
        return fail(p, FZP_ESTATE, "state", "fzp_set(%s): options must be set before fzp_connect", key);
    struct {
        const char *k;
        char **dst;
    } strs[] = {{"url", &p->url},         {"token", &p->token},       {"user", &p->user},
                {"password", &p->password}, {"creds", &p->creds},     {"tls_ca", &p->tls_ca},
                {"tls_cert", &p->tls_cert}, {"tls_key", &p->tls_key}, {"shm_dir", &p->shm_dir}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        if (strcmp(key, strs[i].k) != 0)
            continue;
        if (strcmp(key, "shm_dir") == 0 && value[0] == 0)
            return fail(p, FZP_EINVAL, "invalid", "shm_dir is empty: expected a directory path (default %s)", DEFAULT_SHM_DIR);
        if (set_str(strs[i].dst, value[0] ? value : NULL) != 0)
            return fail(p, FZP_ENOMEM, "system", "out of memory");
        return ok(p);
    }
    if (strcmp(key, "prefix") == 0 || strcmp(key, "id") == 0) {
        if (!valid_token(value))
            return fail(p, FZP_EINVAL, "invalid", "%s \"%.200s\": expected 1-128 characters of A-Z a-z 0-9 _ -", key, value);
        if (set_str(strcmp(key, "id") == 0 ? &p->id : &p->prefix, value) != 0)
            return fail(p, FZP_ENOMEM, "system", "out of memory");
        return ok(p);
    }
    if (strcmp(key, "policy") == 0) {
        if (strcmp(value, "block") == 0)
            p->policy_fail = 0;
        else if (strcmp(value, "fail") == 0)
            p->policy_fail = 1;
        else
            return fail(p, FZP_EINVAL, "invalid", "policy \"%.200s\": expected block or fail", value);
        return ok(p);
    }
    struct {
        const char *k;
        int64_t *dst;
    } times[] = {{"block_timeout_ms", &p->block_timeout_ms},     {"connect_timeout_ms", &p->connect_timeout_ms},
                 {"publish_timeout_ms", &p->publish_timeout_ms}, {"poll_interval_ms", &p->poll_interval_ms},
                 {"request_timeout_ms", &p->request_timeout_ms}};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        if (strcmp(key, times[i].k) != 0)
            continue;
        int64_t v;
        if (parse_ms(value, &v) != 0)
            return fail(p, FZP_EINVAL, "invalid", "%s \"%.200s\": expected milliseconds, an integer >= 0", key, value);
        if (v == 0 && (times[i].dst == &p->poll_interval_ms || times[i].dst == &p->request_timeout_ms))
            return fail(p, FZP_EINVAL, "invalid", "%s must be > 0", key);
        *times[i].dst = v;
        return ok(p);
    }
    if (strcmp(key, "reuse_segments") == 0) {
        int64_t v;
        if (parse_ms(value, &v) != 0 || v > 1024)
            return fail(p, FZP_EINVAL, "invalid", "reuse_segments \"%.200s\": expected an integer 0..1024", value);
        p->reuse_segments = (int)v;
        return ok(p);
    }
    if (strcmp(key, "test_ignore_live_results") == 0) {
        p->ignore_live_results = strcmp(value, "1") == 0;
        return ok(p);
    }
    if (strcmp(key, "nkey") == 0)
        return fail(p, FZP_EINVAL, "invalid", "nkey seed files are not supported by libfzproducer: use a creds file (creds) or user/password");
    return fail(p, FZP_EINVAL, "invalid",
                "unknown option \"%.100s\": expected one of url, token, user, password, creds, tls_ca, tls_cert, tls_key, "
                "prefix, shm_dir, id, policy, block_timeout_ms, reuse_segments, connect_timeout_ms, publish_timeout_ms, "
                "poll_interval_ms, request_timeout_ms",
                key);
}

static void default_id(fzp_producer *p, char *buf, size_t cap) {
    char host[256] = "host";
    if (gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "host");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'))
            *c = '_';
    host[100] = 0;
    /* Two producers of one process must not share an id (results' subjects,
     * segment names): from the second default on, a per-process counter. */
    static long defaults;
    long n = __atomic_add_fetch(&defaults, 1, __ATOMIC_SEQ_CST);
    if (n > 1)
        snprintf(buf, cap, "%s-%ld-%ld", host[0] ? host : "host", (long)getpid(), n);
    else
        snprintf(buf, cap, "%s-%ld", host[0] ? host : "host", (long)getpid());
    (void)p;
}

static void on_result(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure);
static void on_sub_complete(void *closure);

static char *upper_stream(const char *prefix, const char *suffix) {
    char *s;
    if (asprintf(&s, "%s%s", prefix, suffix) < 0)
        return NULL;
    for (char *c = s; *c; c++) {
        if (*c == '-')
            *c = '_';
        else if (*c >= 'a' && *c <= 'z')
            *c = (char)(*c - 'a' + 'A');
    }
    return s;
}

/* Lease renewal (docs/PROTOCOL.md section 3). An admission is a lease of
 * lease_ms: a fill that takes longer would see the sidecar give the bytes,
 * which the segment still occupies, to other producers, and the budget run
 * over when the notification is counted. So while a snapshot is begun and
 * not published, this thread repeats its admission (same msg_id, policy
 * fail, "renew": true: extended if still held, never granted anew, so a
 * renewal the sidecar reads late cannot take budget again) every half
 * lease. The
 * request is fire and forget: the answer goes to an inbox nobody reads
 * (a refused renewal changes nothing the producer could act on; the
 * notification is counted regardless). It runs under p->mu, so a snapshot
 * whose state left SNAP_BEGUN is never renewed again. */
static void send_renewal(fzp_producer *p, const fzp_snapshot *s) {
    char req[512];
    size_t o = 0;
    if (fzj_putf(req, sizeof req, &o, "{\"v\":1,\"msg_id\":\"%s\",\"producer\":\"%s\",\"bytes\":%llu,\"policy\":\"fail\",\"timeout_ms\":0,\"renew\":true}",
                 s->msg_id, p->id, (unsigned long long)s->nbytes) == 0)
        natsConnection_PublishRequest(p->nc, p->subj_admit, p->renew_inbox, req, (int)o);
}

static void *renew_leases(void *arg) {
    fzp_producer *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->closed) {
        int64_t now = now_ms(), next = now + 1000, half = p->lease_ms / 2;
        for (fzp_snapshot *s = half > 0 ? p->snaps : NULL; s; s = s->next) {
            if (!s->admitted || s->state != SNAP_BEGUN)
                continue;
            if (now - s->leased_ms >= half) {
                send_renewal(p, s);
                s->leased_ms = now;
            }
            if (s->leased_ms + half < next)
                next = s->leased_ms + half;
        }
        struct timespec ts = {next / 1000, (next % 1000) * 1000000};
        pthread_cond_timedwait(&p->cond, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int fzp_connect(fzp_producer *p) {
    if (!p)
        return FZP_EINVAL;
    if (p->closed)
        return fail(p, FZP_ECLOSED, "closed", "producer is closed");
    if (p->connected)
        return fail(p, FZP_ESTATE, "state", "already connected");
    if (!p->shm_dir && set_str(&p->shm_dir, DEFAULT_SHM_DIR) != 0)
        return fail(p, FZP_ENOMEM, "system", "out of memory");
    if (!p->id) {
        char id[160];
        default_id(p, id, sizeof id);
        if (set_str(&p->id, id) != 0)
            return fail(p, FZP_ENOMEM, "system", "out of memory");
    }
    if (!p->prefix && set_str(&p->prefix, DEFAULT_PREFIX) != 0)
        return fail(p, FZP_ENOMEM, "system", "out of memory");
    if ((!p->tls_cert) != (!p->tls_key))
        return fail(p, FZP_EINVAL, "invalid", "a TLS client certificate needs both tls_cert and tls_key");

    free(p->subj_snap), free(p->subj_results), free(p->subj_admit), free(p->subj_release), free(p->subj_status),
        free(p->result_stream);
    p->subj_snap = p->subj_results = p->subj_admit = p->subj_release = p->subj_status = p->result_stream = NULL;
    if (asprintf(&p->subj_snap, "%s.snap.%s", p->prefix, p->id) < 0 ||
        asprintf(&p->subj_results, "%s.result.%s.*", p->prefix, p->id) < 0 ||
        asprintf(&p->subj_admit, "%s.admit", p->prefix) < 0 || asprintf(&p->subj_release, "%s.release", p->prefix) < 0 ||
        asprintf(&p->subj_status, "%s.status", p->prefix) < 0 || !(p->result_stream = upper_stream(p->prefix, "_RESULTS")))
        return fail(p, FZP_ENOMEM, "system", "out of memory");
    /* Message ids: <id (at most 94 chars)>-<12 random hex>-<counter (at
     * most 20 digits)>, within the protocol's 128 characters. */
    unsigned char rnd[6];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return fail(p, FZP_ESYS, "system", "getrandom: %s", strerror(errno));
    snprintf(p->msg_base, sizeof p->msg_base, "%.94s-%02x%02x%02x%02x%02x%02x", p->id, rnd[0], rnd[1], rnd[2], rnd[3],
             rnd[4], rnd[5]);

    int own_creds = p->token || p->user || p->password || p->creds;
    int64_t deadline = now_ms() + p->connect_timeout_ms, delay = 100;
    char ebuf[512], aerr[512], authpath[4200];
    snprintf(authpath, sizeof authpath, "%s/%s", p->shm_dir, FZP_AUTH_FILE);
    for (;;) {
        /* Local trust: with no credentials of its own the producer logs in
         * with the sidecar's credentials file, re-read on every attempt so
         * that a sidecar starting after the producer is found too. */
        fzp_auth auth;
        int from_file = 0;
        if (!own_creds) {
            int r = fzp_auth_read(p->shm_dir, &auth, aerr, sizeof aerr);
            if (r < 0)
                return fail(p, FZP_ECONNECT, "refused", "%s", aerr);
            from_file = r > 0;
        }
        const char *url = p->url ? p->url : (from_file && auth.url[0] ? auth.url : DEFAULT_URL);
        const char *user = from_file ? auth.user : p->user, *password = from_file ? auth.password : p->password;
        char shown[1024];
        redact_url(shown, sizeof shown, url);
        natsOptions *o = NULL;
        natsStatus s = natsOptions_Create(&o);
        char name[200];
        snprintf(name, sizeof name, "fzproducer %s", p->id);
        if (s == NATS_OK) s = natsOptions_SetURL(o, url);
        if (s == NATS_OK) s = natsOptions_SetName(o, name);
        /* A sidecar (and its embedded server) restart must not end the
         * session: reconnect forever; every wait here has its own limit. */
        if (s == NATS_OK) s = natsOptions_SetMaxReconnect(o, -1);
        if (s == NATS_OK) s = natsOptions_SetReconnectWait(o, 250);
        if (s == NATS_OK) s = natsOptions_SetReconnectJitter(o, 100, 1000);
        if (s == NATS_OK) s = natsOptions_SetTimeout(o, 2000);
        if (s == NATS_OK && p->token) s = natsOptions_SetToken(o, p->token);
        if (s == NATS_OK && ((user && user[0]) || (password && password[0])))
            s = natsOptions_SetUserInfo(o, user ? user : "", password ? password : "");
        if (s == NATS_OK && p->creds) s = natsOptions_SetUserCredentialsFromFiles(o, p->creds, NULL);
        if (s == NATS_OK && p->tls_ca) {
            s = natsOptions_SetSecure(o, true);
            if (s == NATS_OK) s = natsOptions_LoadCATrustedCertificates(o, p->tls_ca);
        }
        if (s == NATS_OK && p->tls_cert) s = natsOptions_LoadCertificatesChain(o, p->tls_cert, p->tls_key);
        if (from_file)
            explicit_bzero(auth.password, sizeof auth.password);
        if (s != NATS_OK) {
            nats_err(ebuf, sizeof ebuf, s);
            natsOptions_Destroy(o);
            return fail(p, FZP_EINVAL, "invalid", "NATS options (url %s, TLS or credential files): %s", shown, ebuf);
        }
        s = natsConnection_Connect(&p->nc, o);
        natsOptions_Destroy(o);
        if (s == NATS_OK)
            break;
        p->nc = NULL;
        nats_err(ebuf, sizeof ebuf, s);
        /* Wrong credentials or TLS setup will not fix themselves. */
        if (s == NATS_CONNECTION_AUTH_FAILED || s == NATS_NOT_PERMITTED || s == NATS_SSL_ERROR) {
            if (from_file)
                return fail(p, FZP_ECONNECT, "refused",
                            "connect to %s with the credentials in %s: %s (is that file from the sidecar at this address? a "
                            "sidecar writes it at start; other servers need explicit credentials)",
                            shown, authpath, ebuf);
            if (!own_creds)
                return fail(p, FZP_ECONNECT, "refused",
                            "connect to %s: %s (no credentials given and no credentials file %s: is the sidecar's --shm-dir "
                            "the same as this producer's?)",
                            shown, ebuf, authpath);
            return fail(p, FZP_ECONNECT, "refused", "connect to %s: %s", shown, ebuf);
        }
        if (now_ms() >= deadline)
            return fail(p, FZP_ECONNECT, "unavailable",
                        "connect to %s: %s (gave up after %lld ms; is `fzsidecar serve` running, with the same NATS URL?)", shown,
                        ebuf, (long long)p->connect_timeout_ms);
        int64_t left = deadline - now_ms();
        sleep_ms(delay < left ? delay : left);
        delay = delay * 2 > 2000 ? 2000 : delay * 2;
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    natsStatus s = natsConnection_JetStream(&p->js, p->nc, &jo);
    if (s == NATS_OK)
        s = natsConnection_Subscribe(&p->sub, p->nc, p->subj_results, on_result, p);
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(p->sub, -1, -1);
    if (s == NATS_OK)
        s = natsSubscription_SetOnCompleteCB(p->sub, on_sub_complete, p);
    if (s == NATS_OK)
        s = natsConnection_FlushTimeout(p->nc, p->request_timeout_ms);
    free(p->renew_inbox);
    p->renew_inbox = NULL;
    if (s == NATS_OK) {
        natsInbox *inbox = NULL;
        s = natsInbox_Create(&inbox);
        if (s == NATS_OK && !(p->renew_inbox = strdup(inbox)))
            s = NATS_NO_MEMORY;
        natsInbox_Destroy(inbox);
    }
    if (s == NATS_OK) {
        int e = pthread_create(&p->renewer, NULL, renew_leases, p);
        if (e != 0)
            s = NATS_SYS_ERROR;
        p->renewer_started = e == 0;
    }
    if (s != NATS_OK) {
        nats_err(ebuf, sizeof ebuf, s);
        if (p->sub)
            natsSubscription_Destroy(p->sub);
        if (p->js)
            jsCtx_Destroy(p->js);
        natsConnection_Destroy(p->nc);
        p->sub = NULL, p->js = NULL, p->nc = NULL;
        return fail(p, FZP_ECONNECT, "unavailable", "subscribe to results on %s: %s", p->subj_results, ebuf);
    }
    pthread_mutex_lock(&p->mu);
    p->connected = 1;
    pthread_mutex_unlock(&p->mu);
    return ok(p);
}

static void on_sub_complete(void *closure) {
    fzp_producer *p = closure;
    pthread_mutex_lock(&p->mu);
    p->sub_done = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

/* link_snap puts s at the head of p's snapshots; the caller holds p->mu. */
static void link_snap(fzp_producer *p, fzp_snapshot *s) {
    s->next = p->snaps;
    if (p->snaps)
        p->snaps->prev = s;
    p->snaps = s;
}

static void unlink_snap(fzp_snapshot *s) {
    fzp_producer *p = s->p;
    if (s->prev)
        s->prev->next = s->next;
    else if (p->snaps == s)
        p->snaps = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static void release_lease(fzp_producer *p, const char *msg_id) {
    char buf[256];
    size_t o = 0;
    if (fzj_putf(buf, sizeof buf, &o, "{\"v\":1,\"msg_id\":") == 0 && fzj_put_string(buf, sizeof buf, &o, msg_id) == 0 &&
        fzj_putf(buf, sizeof buf, &o, "}") == 0)
        natsConnection_Publish(p->nc, p->subj_release, buf, (int)o); /* fire and forget */
}

void fzp_close(fzp_producer *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->closed = 1;
    int connected = p->connected;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
    if (p->renewer_started)
        pthread_join(p->renewer, NULL);
    if (connected && p->sub) {
        natsSubscription_Unsubscribe(p->sub);
        /* Wait (bounded) until no result callback runs any more. */
        pthread_mutex_lock(&p->mu);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 5;
        while (!p->sub_done)
            if (pthread_cond_timedwait(&p->cond, &p->mu, &ts) == ETIMEDOUT)
                break;
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_lock(&p->mu);
    while (p->snaps) {
        fzp_snapshot *s = p->snaps;
        if (s->state == SNAP_BEGUN && connected)
            release_lease(p, s->msg_id);
        /* Removal is always safe for the sidecar (it keeps a mapping it
         * already has); rewriting would not be. */
        fzp_segment_remove(s->seg);
        fzp_dev_release(p->dev, s->dev_ev, 0);
        free(s->dev_json);
        unlink_snap(s);
        free(s);
    }
    fzp_dev_state_free(p->dev);
    p->dev = NULL;
    for (int i = 0; i < p->nspare; i++)
        fzp_segment_remove(p->spare[i]);
    free(p->spare);
    pthread_mutex_unlock(&p->mu);
    if (p->nc) {
        natsConnection_FlushTimeout(p->nc, 1000);
        natsConnection_Close(p->nc);
    }
    if (p->sub)
        natsSubscription_Destroy(p->sub);
    if (p->js)
        jsCtx_Destroy(p->js);
    if (p->nc)
        natsConnection_Destroy(p->nc);
    if (p->password)
        explicit_bzero(p->password, strlen(p->password));
    char **strs[] = {&p->url,    &p->token,       &p->user,         &p->password,    &p->creds,        &p->tls_ca,
                     &p->tls_cert, &p->tls_key,   &p->prefix,       &p->shm_dir,     &p->id,           &p->subj_snap,
                     &p->subj_results, &p->subj_admit, &p->subj_release, &p->subj_status, &p->result_stream};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        free(*strs[i]);
    free(p->renew_inbox);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* ---------- results ---------- */

/* Parses a result message, and its gpu_seconds into *gpu (0 if absent).
 * 0 on success. */
static int parse_result(const char *data, size_t n, fzp_result *r, double *gpu) {
    memset(r, 0, sizeof *r);
    *gpu = 0;
    fzj_value v;
    if (fzj_get(data, n, "msg_id", &v) != 1 || fzj_string(&v, r->msg_id, sizeof r->msg_id) != 0)
        return -1;
    if (fzj_get(data, n, "ok", &v) == 1)
        r->ok = fzj_bool(&v);
    if (fzj_get(data, n, "step", &v) == 1)
        fzj_uint(&v, &r->step);
    if (fzj_get(data, n, "key", &v) == 1)
        fzj_string(&v, r->key, sizeof r->key);
    if (fzj_get(data, n, "raw_bytes", &v) == 1)
        fzj_uint(&v, &r->raw_bytes);
    if (fzj_get(data, n, "compressed_bytes", &v) == 1)
        fzj_uint(&v, &r->compressed_bytes);
    if (fzj_get(data, n, "ratio", &v) == 1)
        fzj_float(&v, &r->ratio);
    if (fzj_get(data, n, "abs_eb", &v) == 1)
        fzj_float(&v, &r->abs_eb);
    if (fzj_get(data, n, "max_abs_err", &v) == 1)
        fzj_float(&v, &r->max_abs_err);
    if (fzj_get(data, n, "seconds", &v) == 1)
        fzj_float(&v, &r->seconds);
    if (fzj_get(data, n, "gpu_seconds", &v) == 1)
        fzj_float(&v, gpu);
    if (!r->ok) {
        fzj_value e, f;
        if (fzj_get(data, n, "error", &e) == 1 && e.type == FZJ_OBJECT) {
            if (fzj_get(e.start, e.len, "code", &f) == 1)
                fzj_string(&f, r->error_code, sizeof r->error_code);
            if (fzj_get(e.start, e.len, "message", &f) == 1)
                fzj_string(&f, r->error_message, sizeof r->error_message);
        }
        if (!r->error_code[0]) {
            snprintf(r->error_code, sizeof r->error_code, "internal");
            if (!r->error_message[0])
                snprintf(r->error_message, sizeof r->error_message, "result without ok and without error");
        }
    }
    return 0;
}

/* Returns a finished segment to the spare pool or removes it. Under mu. */
static void recycle_locked(fzp_producer *p, fzp_segment *seg) {
    if (!seg)
        return;
    if (!seg)
        return;
    if (p->reuse_segments <= 0 || p->closed || seg->size == 0) {
        fzp_segment_remove(seg);
        return;
    }
    fzp_segment **ns = realloc(p->spare, (size_t)(p->nspare + 1) * sizeof *ns);
    if (!ns) {
        fzp_segment_remove(seg);
        return;
    }
    p->spare = ns;
    p->spare[p->nspare++] = seg;
    if (p->nspare > p->reuse_segments) { /* the oldest goes first */
        fzp_segment_remove(p->spare[0]);
        memmove(p->spare, p->spare + 1, (size_t)(p->nspare - 1) * sizeof *p->spare);
        p->nspare--;
    }
}

/* Resolves the pending snapshot the result belongs to; repeats (after a
 * sidecar restart) and results for other processes with our id are ignored. */
static void deliver(fzp_producer *p, const char *data, size_t n) {
    fzp_result r;
    double gpu;
    if (parse_result(data, n, &r, &gpu) != 0)
        return;
    pthread_mutex_lock(&p->mu);
    for (fzp_snapshot *s = p->snaps; s; s = s->next) {
        if ((s->state != SNAP_PUBLISHED && s->state != SNAP_PUBLISHING) || strcmp(s->msg_id, r.msg_id) != 0)
            continue;
        /* A result means the sidecar will never read these bytes again;
         * the segment is reused or removed when the caller frees the
         * snapshot, so memory it may still look at stays mapped. */
        s->res = r;
        s->gpu_seconds = gpu;
        s->state = SNAP_DONE;
        pthread_cond_broadcast(&p->cond);
        break;
    }
    pthread_mutex_unlock(&p->mu);
}

static void on_result(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure) {
    (void)nc, (void)sub;
    fzp_producer *p = closure;
    int n = natsMsg_GetDataLength(msg);
    if (n > 0 && !p->ignore_live_results)
        deliver(p, natsMsg_GetData(msg), (size_t)n);
    natsMsg_Destroy(msg);
}

/* Looks a result up in the result stream (direct get of the last message
 * on its subject): it may have been published while we were disconnected. */
static void lookup_result(fzp_producer *p, const char *msg_id, int64_t timeout_ms) {
    char subj[600];
    if (snprintf(subj, sizeof subj, "$JS.API.DIRECT.GET.%s.%s.result.%s.%s", p->result_stream, p->prefix, p->id, msg_id) >=
        (int)sizeof subj)
        return;
    natsMsg *m = NULL;
    natsStatus s = natsConnection_Request(&m, p->nc, subj, NULL, 0, timeout_ms);
    if (s != NATS_OK)
        return;
    const char *st = NULL;
    if (natsMsgHeader_Get(m, "Status", &st) == NATS_OK && st && strcmp(st, "200") != 0) {
        natsMsg_Destroy(m); /* 404: not yet */
        return;
    }
    int n = natsMsg_GetDataLength(m);
    if (n > 0)
        deliver(p, natsMsg_GetData(m), (size_t)n);
    natsMsg_Destroy(m);
}

/* ---------- begin / publish / wait ---------- */

static int check_snap(fzp_producer *p, const fzp_snapshot *s, const char *fn) {
    if (!p)
        return FZP_EINVAL;
    if (!s)
        return fail(p, FZP_EINVAL, "invalid", "%s: snapshot is NULL", fn);
    if (s->p != p)
        return fail(p, FZP_EINVAL, "invalid", "%s: the snapshot belongs to another producer", fn);
    return FZP_OK;
}

/* Admission request/reply (docs/PROTOCOL.md section 3). */
static int admit(fzp_producer *p, const char *msg_id, uint64_t nbytes) {
    int64_t deadline = now_ms() + (p->policy_fail ? 0 : p->block_timeout_ms);
    char ebuf[512];
    for (;;) {
        int64_t wait = p->policy_fail ? 0 : deadline - now_ms();
        if (wait < 0)
            wait = 0;
        /* Long waits go in slices so that a sidecar dying meanwhile is noticed. */
        int64_t slice = wait < 10000 ? wait : 10000;
        char req[512];
        size_t o = 0;
        if (fzj_putf(req, sizeof req, &o, "{\"v\":1,\"msg_id\":\"%s\",\"producer\":\"%s\",\"bytes\":%llu,\"policy\":\"%s\",\"timeout_ms\":%lld}",
                     msg_id, p->id, (unsigned long long)nbytes, p->policy_fail ? "fail" : "block", (long long)slice) != 0)
            return fail(p, FZP_EINVAL, "invalid", "admission request too long");
        /* The sidecar answers a blocking request after at most `slice`; a
         * second more is the reply's way back, so that a vanished sidecar
         * costs at most block_timeout_ms + 1 s in all (a late reply only
         * means asking again with the same msg_id, granted only once). */
        int64_t rt = p->policy_fail ? p->request_timeout_ms : slice + 1000;
        natsMsg *rep = NULL;
        natsStatus s = natsConnection_Request(&rep, p->nc, p->subj_admit, req, (int)o, rt);
        if (s != NATS_OK) {
            nats_err(ebuf, sizeof ebuf, s);
            if (p->policy_fail || now_ms() >= deadline)
                return fail(p, FZP_EUNAVAILABLE, "unavailable",
                            "no sidecar answered the admission request on %s: %s (is `fzsidecar serve` running with prefix %s?)",
                            p->subj_admit, ebuf, p->prefix);
            sleep_ms(250);
            continue;
        }
        const char *d = natsMsg_GetData(rep);
        int n = natsMsg_GetDataLength(rep);
        fzj_value v, e, f;
        if (n <= 0 || fzj_get(d, (size_t)n, "granted", &v) < 0) {
            natsMsg_Destroy(rep);
            return fail(p, FZP_ESIDECAR, "malformed", "admission reply is not valid JSON");
        }
        if (fzj_get(d, (size_t)n, "granted", &v) == 1 && fzj_bool(&v)) {
            fzj_value l;
            uint64_t lease = 0;
            if (fzj_get(d, (size_t)n, "lease_ms", &l) != 1 || fzj_uint(&l, &lease) != 0 || lease > INT64_MAX / 2)
                lease = 0; /* none named: nothing to renew */
            pthread_mutex_lock(&p->mu);
            p->lease_ms = (int64_t)lease;
            pthread_mutex_unlock(&p->mu);
            natsMsg_Destroy(rep);
            return FZP_OK;
        }
        char code[64] = "internal", msg[1024] = "admission refused without a reason";
        if (fzj_get(d, (size_t)n, "error", &e) == 1 && e.type == FZJ_OBJECT) {
            if (fzj_get(e.start, e.len, "code", &f) == 1)
                fzj_string(&f, code, sizeof code);
            if (fzj_get(e.start, e.len, "message", &f) == 1)
                fzj_string(&f, msg, sizeof msg);
        }
        natsMsg_Destroy(rep);
        int full = strcmp(code, "budget_full") == 0;
        if (!full || p->policy_fail || now_ms() >= deadline)
            return fail(p, full ? FZP_EBUDGET : FZP_ESIDECAR, code, "admission refused (%s): %s", code, msg);
        sleep_ms(250);
    }
}

static int validate_spec(fzp_producer *p, const char *run, const char *var, uint64_t step, int dtype, int ndims,
                         const uint64_t *dims, int mode, double bound, const double *fill, uint64_t *nbytes) {
    if (!run || !var)
        return fail(p, FZP_EINVAL, "invalid", "run and var must not be NULL");
    if (!valid_name(run))
        return fail(p, FZP_EINVAL, "invalid", "run \"%.200s\": expected 1-128 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit", run);
    if (!valid_name(var))
        return fail(p, FZP_EINVAL, "invalid", "var \"%.200s\": expected 1-128 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit", var);
    if (step > MAX_STEP)
        return fail(p, FZP_EINVAL, "invalid", "step %llu: expected 0 .. 999999999999", (unsigned long long)step);
    if (dtype != FZP_F32 && dtype != FZP_F64)
        return fail(p, FZP_EINVAL, "invalid", "dtype %d: expected FZP_F32 (%d) or FZP_F64 (%d)", dtype, FZP_F32, FZP_F64);
    if (mode != FZP_ABS && mode != FZP_REL)
        return fail(p, FZP_EINVAL, "invalid", "mode %d: expected FZP_ABS (%d) or FZP_REL (%d)", mode, FZP_ABS, FZP_REL);
    if (!(bound > 0) || isinf(bound))
        return fail(p, FZP_EINVAL, "invalid", "error bound %g: expected a finite number > 0", bound);
    if (ndims < 1 || ndims > FZP_MAX_DIMS)
        return fail(p, FZP_EINVAL, "invalid", "ndims %d: expected 1..%d", ndims, FZP_MAX_DIMS);
    if (!dims)
        return fail(p, FZP_EINVAL, "invalid", "dims is NULL: expected %d extents, slowest to fastest", ndims);
    uint64_t elems = 1;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] == 0) {
            elems = 0;
            break;
        }
        if (elems > MAX_ELEMENTS / dims[i]) {
            char db[400];
            format_dims(db, sizeof db, ndims, dims);
            return fail(p, FZP_EINVAL, "invalid", "dims %s hold more than 2^59 elements", db);
        }
        elems *= dims[i];
    }
    if (fill && dtype == FZP_F32 && isfinite(*fill) && isinf((float)*fill))
        return fail(p, FZP_EINVAL, "invalid", "fill value %g is outside the float32 range", *fill);
    *nbytes = elems * dtype_size(dtype);
    return FZP_OK;
}

/* A spare segment of exactly size bytes, or NULL. */
/* describe_snap makes s a snapshot of p: the producer's next message id and
 * the field it carries (arguments checked by validate_spec). */
static void describe_snap(fzp_producer *p, fzp_snapshot *s, const char *run, const char *var, uint64_t step, int dtype,
                          int ndims, const uint64_t *dims, int mode, double bound, const double *fill, uint64_t nbytes) {
    s->p = p;
    pthread_mutex_lock(&p->mu);
    unsigned long long seq = ++p->msg_seq;
    pthread_mutex_unlock(&p->mu);
    snprintf(s->msg_id, sizeof s->msg_id, "%s-%llu", p->msg_base, seq);
    snprintf(s->run, sizeof s->run, "%s", run);
    snprintf(s->var, sizeof s->var, "%s", var);
    s->step = step, s->dtype = dtype, s->mode = mode, s->ndims = ndims, s->bound = bound, s->nbytes = nbytes;
    memcpy(s->dims, dims, (size_t)ndims * sizeof *dims);
    if (fill)
        s->has_fill = 1, s->fill = *fill;
}

static fzp_segment *take_spare(fzp_producer *p, uint64_t size) {
    fzp_segment *seg = NULL;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->nspare; i++) {
        if (p->spare[i]->size == size) {
            seg = p->spare[i];
            memmove(p->spare + i, p->spare + i + 1, (size_t)(p->nspare - i - 1) * sizeof *p->spare);
            p->nspare--;
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return seg;
}

int fzp_begin(fzp_producer *p, const char *run, const char *var, uint64_t step, int dtype, int ndims,
              const uint64_t *dims, int mode, double bound, const double *fill, fzp_snapshot **snap, void **data) {
    if (!p)
        return FZP_EINVAL;
    if (!snap)
        return fail(p, FZP_EINVAL, "invalid", "fzp_begin: snap (where the snapshot handle goes) is NULL");
    *snap = NULL;
    if (data)
        *data = NULL;
    if (p->closed)
        return fail(p, FZP_ECLOSED, "closed", "producer is closed");
    if (!p->connected)
        return fail(p, FZP_ESTATE, "state", "fzp_begin before fzp_connect");
    uint64_t nbytes;
    int rc = validate_spec(p, run, var, step, dtype, ndims, dims, mode, bound, fill, &nbytes);
    if (rc != FZP_OK)
        return rc;
    fzp_snapshot *s = calloc(1, sizeof *s);
    if (!s)
        return fail(p, FZP_ENOMEM, "system", "out of memory");
    describe_snap(p, s, run, var, step, dtype, ndims, dims, mode, bound, fill, nbytes);
    rc = admit(p, s->msg_id, nbytes);
    if (rc != FZP_OK) {
        free(s);
        return rc;
    }
    s->seg = take_spare(p, nbytes);
    if (s->seg) {
        s->reused = 1;
    } else {
        char err[1024];
        s->seg = fzp_segment_create(p->shm_dir, p->id, nbytes, err, sizeof err);
        if (!s->seg) {
            release_lease(p, s->msg_id);
            free(s);
            return fail(p, FZP_ESYS, "system", "%s", err);
        }
    }
    s->state = SNAP_BEGUN;
    pthread_mutex_lock(&p->mu);
    s->admitted = 1;
    s->leased_ms = now_ms();
    link_snap(p, s);
    pthread_cond_broadcast(&p->cond); /* the renewer plans its next round */
    pthread_mutex_unlock(&p->mu);
    *snap = s;
    if (data)
        *data = s->seg->data;
    return ok(p);
}

int fzp_publish_copy(fzp_producer *p, const char *run, const char *var, uint64_t step, int dtype, int ndims,
                     const uint64_t *dims, int mode, double bound, const double *fill, const void *src, uint64_t src_bytes,
                     fzp_snapshot **snap) {
    if (!p)
        return FZP_EINVAL;
    if (!snap)
        return fail(p, FZP_EINVAL, "invalid", "fzp_publish_copy: snap (where the snapshot handle goes) is NULL");
    *snap = NULL;
    uint64_t nbytes;
    int rc = validate_spec(p, run, var, step, dtype, ndims, dims, mode, bound, fill, &nbytes);
    if (rc != FZP_OK)
        return rc;
    if (!src && src_bytes > 0)
        return fail(p, FZP_EINVAL, "invalid", "fzp_publish_copy: src is NULL");
    if (src_bytes != nbytes) {
        char db[400];
        format_dims(db, sizeof db, ndims, dims);
        return fail(p, FZP_EINVAL, "invalid", "buffer is %llu bytes but dims %s of %s need %llu bytes (%llu elements x %u)",
                    (unsigned long long)src_bytes, db, dtype_name(dtype), (unsigned long long)nbytes,
                    (unsigned long long)(nbytes / dtype_size(dtype)), dtype_size(dtype));
    }
    void *data;
    rc = fzp_begin(p, run, var, step, dtype, ndims, dims, mode, bound, fill, snap, &data);
    if (rc != FZP_OK)
        return rc;
    if (nbytes)
        memcpy(data, src, (size_t)nbytes);
    rc = fzp_publish(p, *snap);
    if (rc != FZP_OK) {
        /* keep the message of the failed publish */
        char msg[2048], code[64];
        snprintf(msg, sizeof msg, "%s", p->errmsg);
        snprintf(code, sizeof code, "%s", p->errcode);
        fzp_snapshot_free(p, *snap);
        *snap = NULL;
        return fail(p, rc, code, "%s", msg);
    }
    return FZP_OK;
}

int fzp_snapshot_data(const fzp_snapshot *s, void **data, uint64_t *nbytes) {
    if (!s)
        return FZP_EINVAL;
    if (data)
        *data = s->state == SNAP_BEGUN && s->seg ? s->seg->data : NULL;
    if (nbytes)
        *nbytes = s->nbytes;
    return FZP_OK;
}

const char *fzp_snapshot_msg_id(const fzp_snapshot *s) { return s ? s->msg_id : ""; }
int fzp_snapshot_reused(const fzp_snapshot *s) { return s ? s->reused : 0; }

double fzp_snapshot_gpu_seconds(const fzp_snapshot *s) {
    if (!s)
        return 0;
    pthread_mutex_lock(&s->p->mu); /* set by the NATS thread that delivers the result */
    double g = s->state == SNAP_DONE ? s->gpu_seconds : 0;
    pthread_mutex_unlock(&s->p->mu);
    return g;
}

static int build_note(const fzp_snapshot *s, char *buf, size_t cap, size_t *len) {
    fzp_producer *p = s->p;
    size_t o = 0;
    int e = 0;
    e |= fzj_putf(buf, cap, &o, "{\"v\":1,\"msg_id\":");
    e |= fzj_put_string(buf, cap, &o, s->msg_id);
    e |= fzj_putf(buf, cap, &o, ",\"producer\":");
    e |= fzj_put_string(buf, cap, &o, p->id);
    e |= fzj_putf(buf, cap, &o, ",\"run\":");
    e |= fzj_put_string(buf, cap, &o, s->run);
    e |= fzj_putf(buf, cap, &o, ",\"var\":");
    e |= fzj_put_string(buf, cap, &o, s->var);
    e |= fzj_putf(buf, cap, &o, ",\"step\":%llu,\"dtype\":\"%s\",\"dims\":[", (unsigned long long)s->step, dtype_name(s->dtype));
    for (int i = 0; i < s->ndims; i++)
        e |= fzj_putf(buf, cap, &o, i ? ",%llu" : "%llu", (unsigned long long)s->dims[i]);
    e |= fzj_putf(buf, cap, &o, "],\"mode\":\"%s\",\"bound\":", s->mode == FZP_ABS ? "abs" : "rel");
    e |= fzj_put_float(buf, cap, &o, s->bound);
    if (s->has_fill) {
        e |= fzj_putf(buf, cap, &o, ",\"fill\":");
        e |= fzj_put_float(buf, cap, &o, s->fill);
    }
    if (s->dev_json) {
        e |= fzj_putf(buf, cap, &o, ",%s,\"offset\":%llu,\"length\":%llu}", s->dev_json, (unsigned long long)s->dev_offset,
                      (unsigned long long)s->nbytes);
        *len = o;
        return e ? -1 : 0;
    }
    e |= fzj_putf(buf, cap, &o, ",\"segment\":");
    e |= fzj_put_string(buf, cap, &o, s->seg->name);
    e |= fzj_putf(buf, cap, &o, ",\"offset\":0,\"length\":%llu}", (unsigned long long)s->nbytes);
    *len = o;
    return e ? -1 : 0;
}

int fzp_publish(fzp_producer *p, fzp_snapshot *s) {
    int rc = check_snap(p, s, "fzp_publish");
    if (rc != FZP_OK)
        return rc;
    if (p->closed)
        return fail(p, FZP_ECLOSED, "closed", "producer is closed");
    if (s->state != SNAP_BEGUN)
        return fail(p, FZP_ESTATE, "state", "snapshot %s was already published or has failed", s->msg_id);
    char note[4096];
    size_t len;
    if (build_note(s, note, sizeof note, &len) != 0)
        return fail(p, FZP_EINVAL, "invalid", "notification longer than %zu bytes", sizeof note);
    /* Registered before publishing: the result can arrive before js_Publish returns. */
    pthread_mutex_lock(&p->mu);
    s->state = SNAP_PUBLISHING;
    pthread_mutex_unlock(&p->mu);
    int64_t start = now_ms(), deadline = start + p->publish_timeout_ms, delay = 100;
    char ebuf[512];
    for (;;) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MsgId = s->msg_id;
        int64_t left = deadline - now_ms();
        po.MaxWait = left < 5000 ? (left < 100 ? 100 : left) : 5000;
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        natsStatus st = js_Publish(&pa, p->js, p->subj_snap, note, (int)len, &po, &jerr);
        if (st == NATS_OK) {
            jsPubAck_Destroy(pa);
            pthread_mutex_lock(&p->mu);
            if (s->state == SNAP_PUBLISHING)
                s->state = SNAP_PUBLISHED;
            s->sent_ms = s->checked_ms = now_ms();
            pthread_mutex_unlock(&p->mu);
            return ok(p);
        }
        nats_err(ebuf, sizeof ebuf, st);
        int final = 0;
        const char *code = "unavailable";
        /* The stream answered and refused (full, too large): repeating the
         * same message will not help. */
        if (jerr != 0)
            final = 1, code = "refused";
        else if (st == NATS_CONNECTION_CLOSED)
            final = 1, code = "closed";
        else if (now_ms() >= deadline)
            final = 1;
        if (final) {
            pthread_mutex_lock(&p->mu);
            int resolved = s->state == SNAP_DONE;
            if (!resolved) {
                s->state = SNAP_FAILED;
                fzp_segment_remove(s->seg);
                s->seg = NULL;
            }
            pthread_mutex_unlock(&p->mu);
            if (resolved) /* a result came after all (the stream had it) */
                return ok(p);
            release_lease(p, s->msg_id);
            if (jerr != 0)
                return fail(p, FZP_EPUBLISH, code, "the snapshot stream refused %s (JetStream error %d): %s", s->msg_id, (int)jerr, ebuf);
            return fail(p, FZP_EPUBLISH, code, "publish snapshot %s on %s: no acknowledgement within %lld ms (last error: %s)",
                        s->msg_id, p->subj_snap, (long long)p->publish_timeout_ms, ebuf);
        }
        left = deadline - now_ms();
        sleep_ms(delay < left ? delay : left);
        delay = delay * 2 > 2000 ? 2000 : delay * 2;
    }
}

static int finish_wait(fzp_producer *p, fzp_snapshot *s, fzp_result *res) {
    if (res)
        *res = s->res;
    if (s->res.ok)
        return ok(p);
    return fail(p, FZP_ESIDECAR, s->res.error_code, "%s/%s step %llu: %s: %s", s->run, s->var, (unsigned long long)s->step,
                s->res.error_code, s->res.error_message);
}

int fzp_wait(fzp_producer *p, fzp_snapshot *s, int64_t timeout_ms, fzp_result *res) {
    int rc = check_snap(p, s, "fzp_wait");
    if (rc != FZP_OK)
        return rc;
    if (res)
        memset(res, 0, sizeof *res);
    int64_t start = now_ms();
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : start + timeout_ms;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (s->state == SNAP_DONE) {
            pthread_mutex_unlock(&p->mu);
            return finish_wait(p, s, res);
        }
        if (p->closed) {
            pthread_mutex_unlock(&p->mu);
            return fail(p, FZP_ECLOSED, "closed", "producer is closed");
        }
        if (s->state != SNAP_PUBLISHED) {
            int st = s->state;
            pthread_mutex_unlock(&p->mu);
            return fail(p, FZP_ESTATE, "state", "snapshot %s %s", s->msg_id,
                        st == SNAP_BEGUN ? "was not published: call fzp_publish first" : "failed to publish: there is no result to wait for");
        }
        int64_t now = now_ms();
        if (now - s->checked_ms >= p->poll_interval_ms) {
            s->checked_ms = now;
            char id[160];
            snprintf(id, sizeof id, "%s", s->msg_id);
            pthread_mutex_unlock(&p->mu);
            int64_t left = deadline - now;
            int64_t t = left < 250 ? 250 : (left > 2000 ? 2000 : left);
            lookup_result(p, id, t);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        if (now >= deadline) {
            pthread_mutex_unlock(&p->mu);
            return fail(p, FZP_ETIMEOUT, "timeout", "no result for %s/%s step %llu (%s) within %lld ms; it is still pending", s->run,
                        s->var, (unsigned long long)s->step, s->msg_id, (long long)timeout_ms);
        }
        int64_t until = s->checked_ms + p->poll_interval_ms;
        if (deadline < until)
            until = deadline;
        struct timespec ts = {until / 1000, (until % 1000) * 1000000};
        pthread_cond_timedwait(&p->cond, &p->mu, &ts);
    }
}

int fzp_poll(fzp_producer *p, fzp_snapshot *s, fzp_result *res) { return fzp_wait(p, s, 0, res); }

int fzp_abort(fzp_producer *p, fzp_snapshot *s) {
    int rc = check_snap(p, s, "fzp_abort");
    if (rc != FZP_OK)
        return rc;
    if (s->state != SNAP_BEGUN)
        return fail(p, FZP_ESTATE, "state", "snapshot %s was already published: free it with fzp_snapshot_free", s->msg_id);
    fzp_snapshot_free(p, s);
    /* The release is fire and forget; flushing makes the room visible to
     * the next admission sooner. */
    if (p->nc)
        natsConnection_FlushTimeout(p->nc, 1000);
    return ok(p);
}

void fzp_snapshot_free(fzp_producer *p, fzp_snapshot *s) {
    if (!p || !s || s->p != p)
        return;
    pthread_mutex_lock(&p->mu);
    if (s->state == SNAP_BEGUN && p->connected && !p->closed)
        release_lease(p, s->msg_id);
    /* With a result the sidecar is done with the bytes: reuse them.
     * Published without a result: unlinking is safe (the sidecar keeps a
     * mapping it has; one it has not made yet reports missing_segment),
     * rewriting would not be. */
    if (s->state == SNAP_DONE)
        recycle_locked(p, s->seg);
    else
        fzp_segment_remove(s->seg);
    s->seg = NULL;
    /* Published without a result, the sidecar may still wait on the
     * event: it is destroyed (CUDA keeps it until then), not reused. */
    fzp_dev_release(p->dev, s->dev_ev, s->state == SNAP_DONE);
    s->dev_ev = NULL;
    free(s->dev_json);
    unlink_snap(s);
    pthread_mutex_unlock(&p->mu);
    free(s);
}

int fzp_status(fzp_producer *p, int64_t timeout_ms, int64_t *budget, int64_t *used, int64_t *holds, int64_t *in_flight) {
    if (!p)
        return FZP_EINVAL;
    if (p->closed)
        return fail(p, FZP_ECLOSED, "closed", "producer is closed");
    if (!p->connected)
        return fail(p, FZP_ESTATE, "state", "fzp_status before fzp_connect");
    natsMsg *m = NULL;
    natsStatus s = natsConnection_Request(&m, p->nc, p->subj_status, "{}", 2, timeout_ms > 0 ? timeout_ms : p->request_timeout_ms);
    if (s != NATS_OK) {
        char ebuf[512];
        nats_err(ebuf, sizeof ebuf, s);
        return fail(p, FZP_EUNAVAILABLE, "unavailable", "sidecar status on %s: %s", p->subj_status, ebuf);
    }
    const char *d = natsMsg_GetData(m);
    int n = natsMsg_GetDataLength(m);
    struct {
        const char *k;
        int64_t *dst;
    } f[] = {{"budget_bytes", budget}, {"used_bytes", used}, {"holds", holds}, {"in_flight", in_flight}};
    for (size_t i = 0; i < 4; i++) {
        fzj_value v;
        uint64_t u = 0;
        if (n <= 0 || fzj_get(d, (size_t)n, f[i].k, &v) != 1 || fzj_uint(&v, &u) != 0) {
            natsMsg_Destroy(m);
            return fail(p, FZP_ESIDECAR, "malformed", "sidecar status reply lacks %s", f[i].k);
        }
        if (f[i].dst)
            *f[i].dst = (int64_t)u;
    }
    natsMsg_Destroy(m);
    return ok(p);
}

/* ---------- GPU-resident snapshots (device.c) ---------- */

/* Whether the sidecar's status reply lists the "cuda_ipc" feature; asked
 * until it does (a sidecar may be restarted with another backend). */
static int check_device_feature(fzp_producer *p) {
    if (p->dev_feature)
        return FZP_OK;
    natsMsg *m = NULL;
    natsStatus s = natsConnection_Request(&m, p->nc, p->subj_status, "{}", 2, p->request_timeout_ms);
    if (s != NATS_OK) {
        char ebuf[512];
        nats_err(ebuf, sizeof ebuf, s);
        return fail(p, FZP_EUNAVAILABLE, "unavailable", "sidecar status on %s (to see whether it reads GPU memory): %s", p->subj_status,
                    ebuf);
    }
    const char *d = natsMsg_GetData(m);
    int n = natsMsg_GetDataLength(m);
    fzj_value v;
    int has = 0;
    if (n > 0 && fzj_get(d, (size_t)n, "features", &v) == 1 && v.type == FZJ_ARRAY)
        has = memmem(v.start, v.len, "\"cuda_ipc\"", 10) != NULL;
    natsMsg_Destroy(m);
    if (!has)
        return fail(p, FZP_ESIDECAR, "device_unsupported",
                    "the sidecar does not read GPU memory (its status lists no \"cuda_ipc\" feature): run `fzsidecar serve --backend gpu` "
                    "on this node, or copy the field to the host and use fzp_publish_copy");
    p->dev_feature = 1;
    return FZP_OK;
}

int fzp_publish_device(fzp_producer *p, const char *run, const char *var, uint64_t step, int dtype, int ndims,
                       const uint64_t *dims, int mode, double bound, const double *fill, const void *dptr, uint64_t nbytes,
                       void *stream, fzp_snapshot **snap) {
    if (!p)
        return FZP_EINVAL;
    if (!snap)
        return fail(p, FZP_EINVAL, "invalid", "fzp_publish_device: snap (where the snapshot handle goes) is NULL");
    *snap = NULL;
    if (p->closed)
        return fail(p, FZP_ECLOSED, "closed", "producer is closed");
    if (!p->connected)
        return fail(p, FZP_ESTATE, "state", "fzp_publish_device before fzp_connect");
    uint64_t need;
    int rc = validate_spec(p, run, var, step, dtype, ndims, dims, mode, bound, fill, &need);
    if (rc != FZP_OK)
        return rc;
    if (nbytes != need) {
        char db[400];
        format_dims(db, sizeof db, ndims, dims);
        return fail(p, FZP_EINVAL, "invalid", "device buffer is %llu bytes but dims %s of %s need %llu bytes", (unsigned long long)nbytes,
                    db, dtype_name(dtype), (unsigned long long)need);
    }
    if (!dptr || nbytes == 0)
        return fail(p, FZP_EINVAL, "invalid", "fzp_publish_device: %s", dptr ? "an empty field has no device memory: use fzp_publish_copy" : "dptr is NULL");
    if ((uintptr_t)dptr % dtype_size(dtype) != 0)
        return fail(p, FZP_EINVAL, "invalid", "device pointer %p is not aligned to the %u-byte element size", dptr, dtype_size(dtype));
    char err[1024];
    if ((rc = fzp_dev_available(err, sizeof err)) != FZP_OK)
        return fail(p, rc, "system", "%s", err);
    if ((rc = check_device_feature(p)) != FZP_OK)
        return rc;
    fzp_snapshot *s = calloc(1, sizeof *s);
    char *json = malloc(1024);
    if (!s || !json) {
        free(s);
        free(json);
        return fail(p, FZP_ENOMEM, "system", "out of memory");
    }
    rc = fzp_dev_prepare(&p->dev, dptr, nbytes, stream, json, 1024, &s->dev_offset, &s->dev_ev, err, sizeof err);
    if (rc != FZP_OK) {
        free(s);
        free(json);
        return fail(p, rc, rc == FZP_EINVAL ? "invalid" : "system", "%s", err);
    }
    s->dev_json = json;
    describe_snap(p, s, run, var, step, dtype, ndims, dims, mode, bound, fill, nbytes);
    /* No admission: device bytes hold none of the node's shared memory
     * (the sidecar charges them no budget). */
    s->state = SNAP_BEGUN;
    pthread_mutex_lock(&p->mu);
    link_snap(p, s);
    pthread_mutex_unlock(&p->mu);
    rc = fzp_publish(p, s);
    if (rc != FZP_OK) {
        char msg[2048], code[64];
        snprintf(msg, sizeof msg, "%s", p->errmsg);
        snprintf(code, sizeof code, "%s", p->errcode);
        fzp_snapshot_free(p, s);
        return fail(p, rc, code, "%s", msg);
    }
    *snap = s;
    return FZP_OK;
}
