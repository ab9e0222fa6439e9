/*
 * util.c — small shared helpers: checked allocation, growable strings, whole-file reads,
 * monotonic time and peak RSS.
 */
#include "internal.h"

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
