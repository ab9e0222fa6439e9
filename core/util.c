/*
 * util.c — small shared helpers: checked allocation, growable strings, whole-file reads,
 * monotonic time and peak RSS.
 */
#include "internal.h"

#include <cJSON.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

void *sr_malloc(size_t n, const char *what)
{
    void *p = malloc(n ? n : 1);
    if (!p) sr_error(SR_ERR_NOMEM, "out of memory allocating %zu bytes for %s", n, what);
    return p;
}

int sr_grow(void **p, size_t *cap, size_t need, size_t es, size_t first)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : first;
    while (c < need) {
        if (c > SIZE_MAX / 2 / es) return 1;
        c *= 2;
    }
    void *q = realloc(*p, c * es);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

void *sr_calloc(size_t count, size_t size, const char *what)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) sr_error(SR_ERR_NOMEM, "out of memory allocating %zu x %zu bytes for %s", count, size, what);
    return p;
}

char *sr_strdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = sr_malloc(n, "string");
    if (p) memcpy(p, s, n);
    return p;
}

int64_t sr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static sr_status strbuf_reserve(sr_strbuf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return SR_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return sr_error(SR_ERR_NOMEM, "out of memory growing a string to %zu bytes", cap);
    b->data = p;
    b->cap = cap;
    return SR_OK;
}

sr_status sr_strbuf_append(sr_strbuf *b, const char *s, size_t n)
{
    sr_status st = strbuf_reserve(b, n);
    if (st) return st;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return SR_OK;
}

/* Length of the well-formed UTF-8 character at p[0 .. n) (n >= 1), or minus the length of the
 * maximal subpart of an ill-formed one (1 .. 3): Unicode's table 3-7 of well-formed byte
 * sequences, the second byte's range set by the first. Written here because libunistring's
 * u8_mbtouc (linked for the normalizer) cuts ill-formed sequences otherwise: replacing by it
 * differs from CPython on 353 of tests/fixtures/utf8_replace.txt's 4,457 strings (e.g. C0 E0 80
 * BF 41: two U+FFFD, E0 80 BF taken as one, where CPython gives four). */
static int utf8_char(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int need;
    unsigned lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c >= 0xe0 && c <= 0xef) need = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) need = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return -1; /* 80-C1, F5-FF: never a first byte */
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n || p[i] < lo || p[i] > hi) return -i;
        lo = 0x80, hi = 0xbf;
    }
    return need + 1;
}

size_t sr_utf8_valid_prefix(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    for (int k; i < n && (k = utf8_char(p + i, n - i)) > 0;) i += (size_t)k;
    return i < n ? i : n;
}

sr_status sr_strbuf_utf8_repair(sr_strbuf *b, size_t from)
{
    if (!b->data || from >= b->len) return SR_OK;
    const unsigned char *p = (const unsigned char *)b->data + from;
    size_t n = b->len - from, i = 0;
    for (int k; i < n && (k = utf8_char(p + i, n - i)) > 0;) i += (size_t)k;
    if (i == n) return SR_OK; /* well-formed: nothing to do */
    size_t tail = n - i;      /* rebuild from the first ill-formed byte on */
    char *copy = malloc(tail);
    if (!copy) return sr_error(SR_ERR_NOMEM, "out of memory repairing %zu bytes of text", tail);
    memcpy(copy, b->data + from + i, tail);
    b->len = from + i;
    b->data[b->len] = '\0';
    sr_status st = SR_OK;
    for (size_t j = 0; j < tail && !st;) {
        int k = utf8_char((const unsigned char *)copy + j, tail - j);
        if (k > 0) st = sr_strbuf_append(b, copy + j, (size_t)k);
        else st = sr_strbuf_append(b, "\xef\xbf\xbd", 3); /* U+FFFD */
        j += (size_t)(k > 0 ? k : -k);
    }
    free(copy);
    return st;
}

char *sr_json_print(const struct cJSON *j, int pretty)
{
    char *txt = pretty ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    if (!txt) {
        sr_error(SR_ERR_NOMEM, "out of memory printing JSON");
        return NULL;
    }
    sr_strbuf b = {0};
    sr_status st = sr_strbuf_append(&b, txt, strlen(txt));
    cJSON_free(txt);
    if (!st) st = sr_strbuf_utf8_repair(&b, 0);
    if (st) {
        sr_strbuf_free(&b);
        return NULL;
    }
    return b.data ? b.data : sr_strdup("");
}

sr_status sr_strbuf_printf(sr_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return sr_error(SR_ERR_ARG, "bad format string");
    sr_status st = strbuf_reserve(b, (size_t)n);
    if (st) return st;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return SR_OK;
}

void sr_strbuf_clear(sr_strbuf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

void sr_strbuf_free(sr_strbuf *b)
{
    if (!b) return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

sr_status sr_read_file(const char *path, char **data, size_t *len)
{
    *data = NULL;
    if (len) *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return sr_error(SR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    sr_strbuf b = {0};
    char chunk[65536];
    size_t n;
    sr_status st = SR_OK;
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0)
        if ((st = sr_strbuf_append(&b, chunk, n))) break;
    if (!st && ferror(fp)) st = sr_error(SR_ERR_IO, "%s: read error", path);
    fclose(fp);
    if (st) { sr_strbuf_free(&b); return st; }
    if (!b.data && (st = sr_strbuf_append(&b, "", 0))) return st;
    *data = b.data;
    if (len) *len = b.len;
    return SR_OK;
}

size_t sr_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

int sr_whole_int(double d, int *out)
{
    if (!(d >= (double)INT_MIN && d <= (double)INT_MAX) || d != floor(d)) return 0;
    *out = (int)d;
    return 1;
}
