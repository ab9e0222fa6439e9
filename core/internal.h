/*
 * internal.h — library-internal helpers shared by core/, models/, decoders/, eval/:
 * error reporting, growable buffers, timing. Not installed.
 */
#ifndef SR_INTERNAL_H
#define SR_INTERNAL_H

#include "sr.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define SR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SR_PRINTF(a, b)
#endif

#define SR_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SR_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Record the detail message for sr_last_error() on this thread and return s, so that error
 * paths read `return sr_error(SR_ERR_ARG, "%s: field x: ...", path);`. */
sr_status sr_error(sr_status s, const char *fmt, ...) SR_PRINTF(2, 3);

/* Prefix the current detail message: "ctx: <previous message>". Returns s. */
sr_status sr_error_prefix(sr_status s, const char *fmt, ...) SR_PRINTF(2, 3);

/* SR_ERR_ARG for an unknown registry name: 'unknown <kind> "name" (known: a, b, c)', listing
 * name_at(0), name_at(1), ... until it returns NULL. */
sr_status sr_error_unknown(const char *kind, const char *name, const char *(*name_at)(size_t));

/* Clear the detail message (successful calls that want a clean slate). */
void sr_error_clear(void);

/* Ranges of the numeric stream settings (sr_stream_config), the same for experiment configs
 * (core/config.c) and API callers (checked when an engine or stream opens; docs/config.md):
 * sizes derived from them (chunk samples = ms x 16) fit an int, and no loop runs unbounded. A
 * backend narrows them further (Whisper: chunk_ms 40..1000). */
#define SR_CHUNK_MS_MAX 600000      /* chunk_ms, first_chunk_ms: 0 (default) .. 10 minutes */
#define SR_STABILITY_N_MAX 1000
#define SR_BEAM_MAX 64
#define SR_MAX_SYMBOLS_MAX 100      /* transducer symbols per frame (also a model config's) */
#define SR_ATT_CONTEXT_MAX 100000
#define SR_DELAY_TOKENS_MAX 10000
#define SR_MAX_SECONDS_MAX 86400    /* max_seconds: 0 (unbounded) .. a day */
#define SR_FINAL_STEPS_MAX 100000   /* final_steps: 0 (all at once) .. */

/* SR_ERR_ARG naming the field (stream.chunk_ms, ...) when a value of c is outside its range. */
sr_status sr_stream_config_check(const sr_stream_config *c);

/* Checked allocation helpers: return NULL after recording SR_ERR_NOMEM with what. */
void *sr_malloc(size_t n, const char *what);
void *sr_calloc(size_t count, size_t size, const char *what);
char *sr_strdup(const char *s);
/* *p (an array of *cap elements of es bytes; *cap 0 with *p NULL when empty) grown by doubling,
 * from `first` elements, to hold at least need: 0; 1 when the size would overflow, -1 when
 * realloc fails, both with *p and *cap unchanged. Sets no error (callers name what grew). */
int sr_grow(void **p, size_t *cap, size_t need, size_t es, size_t first);
/* 1 and *out = d when d is a whole number inside int's range, else 0 (never a cast of an
 * out-of-range or NaN double, which C leaves undefined). */
int sr_whole_int(double d, int *out);

/* Monotonic clock in nanoseconds. */
int64_t sr_now_ns(void);

/* Growable byte string. */
typedef struct sr_strbuf {
    char *data; /* NUL-terminated; NULL while empty and never grown */
    size_t len;
    size_t cap;
} sr_strbuf;

sr_status sr_strbuf_append(sr_strbuf *b, const char *s, size_t n);
/* Make b's bytes from `from` on well-formed UTF-8: each maximal subpart of an ill-formed
 * sequence (Unicode 15, section 3.9, "U+FFFD substitution of maximal subparts") becomes
 * U+FFFD, as Python's bytes.decode("utf-8", "replace") does. Valid text is left as it is. */
sr_status sr_strbuf_utf8_repair(sr_strbuf *b, size_t from);
/* Bytes of s[0 .. n) that are well-formed UTF-8 before the first ill-formed sequence: n when s
 * is valid UTF-8 all through. */
size_t sr_utf8_valid_prefix(const char *s, size_t n);
sr_status sr_strbuf_printf(sr_strbuf *b, const char *fmt, ...) SR_PRINTF(2, 3);
/* The JSON text of j (pretty: cJSON_Print's indented form, else one line), every ill-formed
 * UTF-8 sequence in its strings made U+FFFD as sr_strbuf_utf8_repair does: cJSON copies a
 * string's bytes as they are, and a file name or an id that is not UTF-8 (Linux allows any
 * bytes but '/' and NUL) would make text no JSON parser reads. Outside strings the text is
 * ASCII, so repairing the whole text repairs just the strings. malloc'd (free); NULL when out
 * of memory (message set). */
struct cJSON;
char *sr_json_print(const struct cJSON *j, int pretty);
void sr_strbuf_clear(sr_strbuf *b); /* keeps the allocation */
void sr_strbuf_free(sr_strbuf *b);

/* Read a whole file into a NUL-terminated malloc'ed buffer. */
sr_status sr_read_file(const char *path, char **data, size_t *len);

/* Peak resident set size of this process in bytes (getrusage). */
size_t sr_peak_rss_bytes(void);

#endif /* SR_INTERNAL_H */
