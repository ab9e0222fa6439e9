/*
 * rwer.c — RWER and ARWER (WhisperRT's streaming word error rates) of one utterance's timeline.
 *
 * For every timeline entry k with hypothesis h_k (|h_k| words) against the N reference words:
 *   RWER:  align h_k with the first min(|h_k|, N) reference words;
 *   ARWER: align h_k with the reference words whose end time is <= t_k (word alignments needed);
 *   *_stable: the same with only the committed first n_stable words of h_k in place of h_k
 *             (RWER's prefix then has min(n_stable, N) words).
 * Each alignment is sr_align (sclite costs); the sums over entries of S + D + I and of the
 * reference prefix lengths (C + S + D) are returned, so that corpus rates are
 * sum(errors) / sum(prefix words) over utterances and entries (DESIGN §8).
 */
#include "metrics.h"

#include <math.h>
#include <string.h>

#include "../core/internal.h"

/* S + D + I of hyp[0, n_hyp) against ref[0, n_ref). */
static sr_status prefix_errors(const sr_words *ref, size_t n_ref, const sr_words *hyp, size_t n_hyp,
                               int64_t *err)
{
    sr_edit_counts c;
    sr_status st = sr_align((const char *const *)ref->w, n_ref, (const char *const *)hyp->w, n_hyp,
                            &c, NULL, NULL);
    if (st) return st;
    *err = c.sub + c.del + c.ins;
    return SR_OK;
}

static void add_entry(sr_rwer_sums *s, int64_t err, size_t n_ref)
{
    s->err += err;
    s->ref += (int64_t)n_ref;
    s->n_entries++;
}

sr_status sr_rwer_utt(const char *ref, const sr_word_times *times, const sr_tl_entry *e,
                      size_t n_entries, sr_rwer_result *out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_rwer_utt: out is NULL");
    memset(out, 0, sizeof *out);
    if (n_entries > 0 && !e)
        return sr_error(SR_ERR_ARG, "sr_rwer_utt: entries are NULL with a count of %zu", n_entries);

    sr_words r = {0};
    sr_status st = sr_words_split(ref, &r);
    if (st) return st;
    const int64_t *ref_end_ms = times ? times->end_ms : NULL;
    if (times) {
        if (times->n != r.n || (r.n > 0 && !ref_end_ms)) {
            st = sr_error(SR_ERR_ARG, "word times: %zu end times for %zu reference words", times->n, r.n);
            goto done;
        }
        for (size_t i = 0; i < r.n; i++) {
            if (ref_end_ms[i] < 0 || (i > 0 && ref_end_ms[i] < ref_end_ms[i - 1])) {
                st = sr_error(SR_ERR_ARG,
                              "word times: reference word %zu \"%s\" ends at %lld ms, %s", i, r.w[i],
                              (long long)ref_end_ms[i],
                              ref_end_ms[i] < 0 ? "negative" : "before the word preceding it");
                goto done;
            }
        }
    }
    for (size_t k = 0; k < n_entries; k++) {
        if (e[k].t_ms < 0 || (k > 0 && e[k].t_ms < e[k - 1].t_ms)) {
            st = sr_error(SR_ERR_ARG, "timeline entry %zu: t_ms %lld %s", k, (long long)e[k].t_ms,
                          e[k].t_ms < 0 ? "is negative" : "is earlier than the entry before it");
            goto done;
        }
    }
    if (n_entries == 0) goto done;

    int have_stable = 1;
    for (size_t k = 0; k < n_entries; k++)
        if (e[k].n_stable < 0) have_stable = 0;
    out->rwer.valid = 1;
    out->rwer_stable.valid = have_stable;
    out->arwer.valid = times != NULL;
    out->arwer_stable.valid = out->arwer.valid && have_stable;

    size_t n_ended = 0; /* reference words ended by t_k; t_k never decreases */
    for (size_t k = 0; k < n_entries; k++) {
        sr_words h = {0};
        st = sr_words_split(e[k].text, &h);
        if (st) goto done;
        if (have_stable && (uint64_t)e[k].n_stable > h.n) {
            st = sr_error(SR_ERR_ARG, "timeline entry %zu: n_stable %lld exceeds its %zu words", k,
                          (long long)e[k].n_stable, h.n);
            sr_words_free(&h);
            goto done;
        }
        int64_t err;
        size_t n_pre = SR_MIN(h.n, r.n);
        st = prefix_errors(&r, n_pre, &h, h.n, &err);
        if (!st) add_entry(&out->rwer, err, n_pre);
        if (!st && have_stable) {
            size_t s = (size_t)e[k].n_stable, n_pre_s = SR_MIN(s, r.n);
            st = prefix_errors(&r, n_pre_s, &h, s, &err);
            if (!st) add_entry(&out->rwer_stable, err, n_pre_s);
        }
        if (!st && out->arwer.valid) {
            while (n_ended < r.n && ref_end_ms[n_ended] <= e[k].t_ms) n_ended++;
            st = prefix_errors(&r, n_ended, &h, h.n, &err);
            if (!st) add_entry(&out->arwer, err, n_ended);
            if (!st && have_stable) {
                st = prefix_errors(&r, n_ended, &h, (size_t)e[k].n_stable, &err);
                if (!st) add_entry(&out->arwer_stable, err, n_ended);
            }
        }
        sr_words_free(&h);
        if (st) goto done;
    }
done:
    sr_words_free(&r);
    if (st) memset(out, 0, sizeof *out);
    return st;
}

double sr_rwer_rate(const sr_rwer_sums *s)
{
    if (!s || !s->valid) return NAN;
    if (s->ref == 0) return s->err == 0 ? 0.0 : NAN;
    return (double)s->err / (double)s->ref;
}

void sr_rwer_sums_add(sr_rwer_sums *acc, const sr_rwer_sums *x)
{
    if (!acc || !x || !x->valid) return;
    acc->err += x->err;
    acc->ref += x->ref;
    acc->n_entries += x->n_entries;
    acc->valid = 1;
}
