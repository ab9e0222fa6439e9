/*
 * latency.c — latency figures of streaming timelines: nearest-rank percentiles and summaries,
 * per-word emission delay and retracted words (flicker).
 *
 * Percentile (nearest rank): of n ascending values, the p-th is sorted[ceil(p/100 * n) - 1], the
 * smallest value with at least p % of the values at or below it; it is always a value that
 * occurred, so p50 of {1, 2, 3, 4} is 2.
 * Emission delay of a final word j (aligned as correct to reference word i): walking back from
 * the last entry while entries still hold the same word at word position j, the earliest such
 * entry k gives t_k - end_i (negative when a word is guessed before its audio ends).
 * Retracted words between consecutive hypotheses: the words of h_{k-1} after their longest common
 * word prefix with h_k (a word that changes takes everything after it with it).
 */
#include "metrics.h"

#include <math.h>
#include <string.h>

#include "../core/internal.h"

double sr_percentile_sorted(const double *sorted, size_t n, double p)
{
    if (!sorted || n == 0 || isnan(p)) return NAN;
    if (p <= 0) return sorted[0];
    if (p >= 100) return sorted[n - 1];
    double r = ceil(p / 100.0 * (double)n);
    size_t k = r < 1 ? 1 : (size_t)r;
    if (k > n) k = n;
    return sorted[k - 1];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

sr_status sr_stat_compute(const double *x, size_t n, sr_stat *out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_stat_compute: out is NULL");
    out->n = n;
    out->mean = out->p50 = out->p90 = out->p99 = out->max = NAN;
    if (n == 0) return SR_OK;
    if (!x) return sr_error(SR_ERR_ARG, "sr_stat_compute: values are NULL with a count of %zu", n);
    double *s = sr_malloc(n * sizeof *s, "percentile buffer");
    if (!s) return SR_ERR_NOMEM;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) {
            free(s);
            return sr_error(SR_ERR_ARG, "sr_stat_compute: value %zu is NaN", i);
        }
        s[i] = x[i];
        sum += x[i];
    }
    qsort(s, n, sizeof *s, cmp_double);
    out->mean = sum / (double)n;
    out->p50 = sr_percentile_sorted(s, n, 50);
    out->p90 = sr_percentile_sorted(s, n, 90);
    out->p99 = sr_percentile_sorted(s, n, 99);
    out->max = s[n - 1];
    free(s);
    return SR_OK;
}

/* Every entry's words; *hyps has n_entries elements (free with free_hyps). */
static sr_status split_entries(const sr_tl_entry *e, size_t n, sr_words **hyps)
{
    *hyps = NULL;
    if (n == 0) return SR_OK;
    sr_words *h = sr_calloc(n, sizeof *h, "timeline word lists");
    if (!h) return SR_ERR_NOMEM;
    for (size_t k = 0; k < n; k++) {
        sr_status st = sr_words_split(e[k].text, &h[k]);
        if (st) {
            for (size_t i = 0; i < k; i++) sr_words_free(&h[i]);
            free(h);
            return st;
        }
    }
    *hyps = h;
    return SR_OK;
}

static void free_hyps(sr_words *h, size_t n)
{
    if (!h) return;
    for (size_t k = 0; k < n; k++) sr_words_free(&h[k]);
    free(h);
}

sr_status sr_emission_delays(const sr_words *final_hyp, const sr_align_step *path, size_t n_path,
                             const sr_word_times *times, const sr_tl_entry *e, size_t n_entries,
                             double **delays_ms, size_t *n_delays)
{
    if (!delays_ms || !n_delays) return sr_error(SR_ERR_ARG, "sr_emission_delays: output is NULL");
    *delays_ms = NULL;
    *n_delays = 0;
    if (!final_hyp) return sr_error(SR_ERR_ARG, "sr_emission_delays: final hypothesis is NULL");
    if (n_path > 0 && !path)
        return sr_error(SR_ERR_ARG, "sr_emission_delays: path is NULL with %zu steps", n_path);
    if (n_entries > 0 && !e)
        return sr_error(SR_ERR_ARG, "sr_emission_delays: entries are NULL with a count of %zu", n_entries);
    if (!times || n_entries == 0) return SR_OK; /* nothing to measure against */

    size_t n_cor = 0;
    for (size_t s = 0; s < n_path; s++) {
        if (path[s].op != SR_EDIT_COR) continue;
        if (path[s].ref < 0 || (uint64_t)path[s].ref >= times->n || !times->end_ms)
            return sr_error(SR_ERR_ARG, "sr_emission_delays: path step %zu: reference word %lld has "
                            "no end time (%zu word times)", s, (long long)path[s].ref, times->n);
        if (path[s].hyp < 0 || (uint64_t)path[s].hyp >= final_hyp->n)
            return sr_error(SR_ERR_ARG, "sr_emission_delays: path step %zu: hypothesis word %lld is "
                            "outside the final hypothesis (%zu words)", s, (long long)path[s].hyp,
                            final_hyp->n);
        n_cor++;
    }
    if (n_cor == 0) return SR_OK;

    sr_words *h = NULL;
    sr_status st = split_entries(e, n_entries, &h);
    if (st) return st;
    double *d = sr_malloc(n_cor * sizeof *d, "emission delays");
    if (!d) {
        free_hyps(h, n_entries);
        return SR_ERR_NOMEM;
    }
    size_t nd = 0;
    for (size_t s = 0; s < n_path; s++) {
        if (path[s].op != SR_EDIT_COR) continue;
        size_t j = (size_t)path[s].hyp;
        const char *word = final_hyp->w[j];
        size_t k = n_entries;
        while (k > 0 && h[k - 1].n > j && strcmp(h[k - 1].w[j], word) == 0) k--;
        if (k == n_entries) continue; /* the last entry does not hold it: never stayed */
        d[nd++] = (double)(e[k].t_ms - times->end_ms[path[s].ref]);
    }
    free_hyps(h, n_entries);
    if (nd == 0) {
        free(d);
        return SR_OK;
    }
    *delays_ms = d;
    *n_delays = nd;
    return SR_OK;
}

sr_status sr_retracted_words(const sr_tl_entry *e, size_t n_entries, int64_t *out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_retracted_words: out is NULL");
    *out = 0;
    if (n_entries > 0 && !e)
        return sr_error(SR_ERR_ARG, "sr_retracted_words: entries are NULL with a count of %zu", n_entries);
    sr_words prev = {0};
    int64_t total = 0;
    for (size_t k = 0; k < n_entries; k++) {
        sr_words cur = {0};
        sr_status st = sr_words_split(e[k].text, &cur);
        if (st) {
            sr_words_free(&prev);
            return st;
        }
        if (k > 0) {
            size_t lcp = 0;
            while (lcp < prev.n && lcp < cur.n && strcmp(prev.w[lcp], cur.w[lcp]) == 0) lcp++;
            total += (int64_t)(prev.n - lcp);
        }
        sr_words_free(&prev);
        prev = cur;
    }
    sr_words_free(&prev);
    *out = total;
    return SR_OK;
}
