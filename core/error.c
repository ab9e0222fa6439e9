/*
 * error.c — status texts and the per-thread detail message behind sr_last_error().
 * A thread-local buffer keeps error reporting lock-free and lets concurrent streams fail
 * independently.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *sr_strerror(sr_status s)
{
    switch (s) {
    case SR_OK: return "ok";
    case SR_ERR_NOMEM: return "out of memory";
    case SR_ERR_IO: return "I/O error";
    case SR_ERR_FORMAT: return "bad format";
    case SR_ERR_ARG: return "invalid argument";
    case SR_ERR_UNSUPPORTED: return "unsupported";
    case SR_ERR_DEVICE: return "device error";
    }
    return "unknown status";
}

const char *sr_last_error(void) { return last_error; }

void sr_error_clear(void) { last_error[0] = '\0'; }

sr_status sr_error(sr_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

sr_status sr_error_prefix(sr_status s, const char *fmt, ...)
{
    char prev[sizeof last_error];
    memcpy(prev, last_error, sizeof prev);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    /* append ": previous", truncated to fit */
    size_t at = n < 0 ? 0 : SR_MIN((size_t)n, sizeof last_error - 1);
    const char *parts[2] = {": ", prev};
    for (int i = 0; i < 2; i++) {
        size_t len = SR_MIN(strlen(parts[i]), sizeof last_error - 1 - at);
        memcpy(last_error + at, parts[i], len);
        at += len;
    }
    last_error[at] = '\0';
    return s;
}

sr_status sr_error_unknown(const char *kind, const char *name, const char *(*name_at)(size_t))
{
    char known[512] = "";
    const char *n;
    for (size_t i = 0; (n = name_at(i)); i++) {
        if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
        strncat(known, n, sizeof known - strlen(known) - 1);
    }
    return sr_error(SR_ERR_ARG, "unknown %s \"%s\" (known: %s)", kind, name ? name : "(null)", known);
}
