/*
 * compare.c — the regression gate: metric deltas between two results.json, run by run (matched
 * by name), with the WER increase (percentage points) and the RTF ratio as the tolerances.
 */
#include "run.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const cJSON *find_run(const cJSON *results, const char *name)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(results, "runs")) {
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(r, "name"));
        if (n && !strcmp(n, name)) return r;
    }
    return NULL;
}

/* Value at a "a.b" path of the run's aggregate; NAN when absent or null. */
static double agg_value(const cJSON *run, const char *path)
{
    const cJSON *o = cJSON_GetObjectItem(run, "aggregate");
    char key[64];
    const char *p = path;
    while (o && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof key) return NAN;
        memcpy(key, p, n);
        key[n] = '\0';
        o = cJSON_GetObjectItem(o, key);
        p = dot ? dot + 1 : p + n;
    }
    return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

static void add_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static const char *const metrics[] = {
    "wer", "cer", "rwer", "rwer_stable", "arwer", "arwer_stable", "rtf",
    "latency.chunk_compute_ms.p50", "latency.chunk_compute_ms.p90", "latency.first_hyp_ms.mean",
    "latency.emission_delay_ms.mean", "latency.revisions_per_word", "memory.stream_bytes",
};

sr_status sr_compare_results(const cJSON *base_results, const cJSON *new_results,
                             const sr_compare_limits *lim, cJSON **report, int *failed)
{
    *report = NULL;
    *failed = 0;
    cJSON *rep = cJSON_CreateObject(), *runs = cJSON_AddArrayToObject(rep, "runs");
    const cJSON *nr;
    cJSON_ArrayForEach(nr, cJSON_GetObjectItem(new_results, "runs")) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(nr, "name"));
        const cJSON *br = name ? find_run(base_results, name) : NULL;
        if (!br) {
            cJSON_Delete(rep);
            return sr_error(SR_ERR_ARG, "compare: run \"%s\" has no counterpart in the baseline", name ? name : "(unnamed)");
        }
        cJSON *o = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(o, "metrics");
        cJSON *fails = cJSON_CreateArray();
        cJSON_AddStringToObject(o, "name", name);
        for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++) {
            double b = agg_value(br, metrics[i]), n = agg_value(nr, metrics[i]);
            cJSON *x = cJSON_AddObjectToObject(m, metrics[i]);
            add_num(x, "base", b);
            add_num(x, "new", n);
            add_num(x, "delta", n - b);
        }
        double wb = agg_value(br, "wer"), wn = agg_value(nr, "wer");
        if (lim->max_wer_increase >= 0 && isfinite(wb) && isfinite(wn) &&
            (wn - wb) * 100.0 > lim->max_wer_increase + 1e-9) {
            char msg[160];
            snprintf(msg, sizeof msg, "WER rose %.2f points (%.2f%% -> %.2f%%), limit %.2f", (wn - wb) * 100, wb * 100, wn * 100,
                     lim->max_wer_increase);
            cJSON_AddItemToArray(fails, cJSON_CreateString(msg));
        }
        if (isfinite(wb) != isfinite(wn)) cJSON_AddItemToArray(fails, cJSON_CreateString("WER is defined in only one of the two"));
        double rb = agg_value(br, "rtf"), rn = agg_value(nr, "rtf");
        if (lim->max_rtf_ratio > 0 && isfinite(rb) && isfinite(rn) && rb > 0 && rn / rb > lim->max_rtf_ratio) {
            char msg[160];
            snprintf(msg, sizeof msg, "RTF ratio %.3f (%.4f -> %.4f), limit %.3f", rn / rb, rb, rn, lim->max_rtf_ratio);
            cJSON_AddItemToArray(fails, cJSON_CreateString(msg));
        }
        if (cJSON_GetArraySize(fails)) *failed = 1;
        cJSON_AddItemToObject(o, "failures", fails);
        cJSON_AddItemToArray(runs, o);
    }
    cJSON_AddBoolToObject(rep, "failed", *failed);
    *report = rep;
    return SR_OK;
}
