/*
 * score.c — all metrics of one utterance (WER, CER, RWER/ARWER and committed variants, latency,
 * RTF) and their corpus accumulation.
 *
 * Corpus rules: error rates are sums of errors over sums of reference units (never means of
 * per-utterance rates); RWER-type sums cover the utterances where they are defined (a timeline,
 * n_stable on every entry, word alignments); percentiles pool the samples of every utterance
 * (chunks, words, utterances); RTF = sum of compute / sum of audio over utterances whose every
 * entry has a compute time; RTFx = 1 / RTF; memory figures keep their maxima.
 */
#include "metrics.h"

#include <math.h>
#include <string.h>

#include "../core/internal.h"

typedef struct dvec {
    double *v;
    size_t n, cap;
} dvec;

static sr_status dvec_push(dvec *d, double x)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        double *p = realloc(d->v, cap * sizeof *p);
        if (!p) return sr_error(SR_ERR_NOMEM, "out of memory growing a sample list to %zu values", cap);
        d->v = p;
        d->cap = cap;
    }
    d->v[d->n++] = x;
    return SR_OK;
}

static sr_status dvec_append(dvec *d, const dvec *src)
{
    for (size_t i = 0; i < src->n; i++) {
        sr_status st = dvec_push(d, src->v[i]);
        if (st) return st;
    }
    return SR_OK;
}

static void dvec_free(dvec *d)
{
    free(d->v);
    memset(d, 0, sizeof *d);
}

/* Samples one utterance contributes to the pooled corpus distributions. */
typedef struct samples {
    dvec chunk_ms, chunk_rtf, first_hyp_ms, final_ms, delay_ms;
} samples;

static void samples_free(samples *s)
{
    dvec_free(&s->chunk_ms);
    dvec_free(&s->chunk_rtf);
    dvec_free(&s->first_hyp_ms);
    dvec_free(&s->final_ms);
    dvec_free(&s->delay_ms);
}

static sr_status samples_append(samples *d, const samples *s)
{
    sr_status st = dvec_append(&d->chunk_ms, &s->chunk_ms);
    if (!st) st = dvec_append(&d->chunk_rtf, &s->chunk_rtf);
    if (!st) st = dvec_append(&d->first_hyp_ms, &s->first_hyp_ms);
    if (!st) st = dvec_append(&d->final_ms, &s->final_ms);
    if (!st) st = dvec_append(&d->delay_ms, &s->delay_ms);
    return st;
}

struct sr_corpus {
    size_t n_utts, n_timeline, n_stable, n_aligned;
    sr_edit_counts wer, cer;
    sr_rwer_result rwer;
    int64_t retracted, final_words;
    double audio_ms, compute_ms; /* utterances with complete compute records */
    size_t n_timed;              /* how many such utterances */
    samples smp;
    sr_memstats mem;
};

/* Validation of the per-entry fields the latency figures read (rwer.c checks the rest). */
static sr_status check_entries(const sr_tl_entry *e, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (e[k].compute_ns < -1)
            return sr_error(SR_ERR_ARG, "timeline entry %zu: compute_ns %lld is negative", k,
                            (long long)e[k].compute_ns);
    return SR_OK;
}

static sr_status score_one(const sr_utt_input *in, sr_utt_metrics *m, samples *smp)
{
    memset(m, 0, sizeof *m);
    const sr_tl_entry *e = in->entries;
    size_t ne = in->n_entries;
    if (ne > 0 && !e) return sr_error(SR_ERR_ARG, "entries are NULL with a count of %zu", ne);
    if (!in->hyp && ne == 0) return sr_error(SR_ERR_ARG, "no hypothesis (hyp NULL and no timeline)");
    const char *final_text = in->hyp ? in->hyp : e[ne - 1].text;
    sr_status st = check_entries(e, ne);
    if (st) return st;

    sr_words r = {0}, f = {0};
    sr_align_step *path = NULL;
    size_t n_path = 0;
    double *delays = NULL;
    size_t n_delays = 0;
    st = sr_words_split(in->ref, &r);
    if (!st) st = sr_words_split(final_text, &f);
    if (!st) st = sr_align((const char *const *)r.w, r.n, (const char *const *)f.w, f.n, &m->wer, &path, &n_path);
    if (!st) st = sr_cer_counts(in->ref, final_text, &m->cer);
    if (!st) st = sr_rwer_utt(in->ref, in->times, e, ne, &m->rwer);
    if (!st) st = sr_emission_delays(&f, path, n_path, in->times, e, ne, &delays, &n_delays);
    if (!st) st = sr_retracted_words(e, ne, &m->retracted_words);
    if (st) goto done;

    m->wer_rate = sr_edit_rate(&m->wer);
    m->cer_rate = sr_edit_rate(&m->cer);
    m->rwer_rate = sr_rwer_rate(&m->rwer.rwer);
    m->rwer_stable_rate = sr_rwer_rate(&m->rwer.rwer_stable);
    m->arwer_rate = sr_rwer_rate(&m->rwer.arwer);
    m->arwer_stable_rate = sr_rwer_rate(&m->rwer.arwer_stable);

    m->first_hyp_ms = -1;
    m->finalization_ms = NAN;
    m->revisions_per_word = NAN;
    m->emission_delay_mean_ms = NAN;
    m->n_emission_words = n_delays;
    if (n_delays) {
        double s = 0;
        for (size_t i = 0; i < n_delays; i++) {
            s += delays[i];
            if ((st = dvec_push(&smp->delay_ms, delays[i]))) goto done;
        }
        m->emission_delay_mean_ms = s / (double)n_delays;
    }
    if (ne > 0 && f.n > 0) m->revisions_per_word = (double)m->retracted_words / (double)f.n;

    int complete = ne > 0;
    double compute = 0;
    for (size_t k = 0; k < ne; k++) {
        if (m->first_hyp_ms < 0 && e[k].text) {
            sr_words w = {0};
            if ((st = sr_words_split(e[k].text, &w))) goto done;
            if (w.n > 0) m->first_hyp_ms = e[k].t_ms;
            sr_words_free(&w);
        }
        if (e[k].compute_ns < 0) {
            complete = 0;
            continue;
        }
        double ms = (double)e[k].compute_ns / 1e6;
        compute += ms;
        if ((st = dvec_push(&smp->chunk_ms, ms))) goto done;
        int64_t dt = e[k].t_ms - (k > 0 ? e[k - 1].t_ms : 0);
        if (dt > 0 && (st = dvec_push(&smp->chunk_rtf, ms / (double)dt))) goto done;
    }
    if (m->first_hyp_ms >= 0 && (st = dvec_push(&smp->first_hyp_ms, (double)m->first_hyp_ms))) goto done;
    if (ne > 0 && e[ne - 1].compute_ns >= 0) {
        m->finalization_ms = (double)e[ne - 1].compute_ns / 1e6;
        if ((st = dvec_push(&smp->final_ms, m->finalization_ms))) goto done;
    }
    m->audio_ms = in->audio_ms >= 0 ? (double)in->audio_ms : ne > 0 ? (double)e[ne - 1].t_ms : NAN;
    m->compute_ms = complete ? compute : NAN;
    m->rtf = complete && m->audio_ms > 0 ? compute / m->audio_ms : NAN;
done:
    sr_words_free(&r);
    sr_words_free(&f);
    free(path);
    free(delays);
    return st;
}

sr_status sr_score_utt(const sr_utt_input *in, sr_utt_metrics *out)
{
    if (!in || !out) return sr_error(SR_ERR_ARG, "sr_score_utt: %s is NULL", in ? "out" : "in");
    samples smp = {0};
    sr_status st = score_one(in, out, &smp);
    samples_free(&smp);
    if (st) {
        memset(out, 0, sizeof *out);
        return sr_error_prefix(st, "utterance %s", in->id ? in->id : "(no id)");
    }
    return SR_OK;
}

sr_status sr_corpus_create(sr_corpus **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_corpus_create: out is NULL");
    *out = sr_calloc(1, sizeof **out, "scorer");
    return *out ? SR_OK : SR_ERR_NOMEM;
}

void sr_corpus_free(sr_corpus *sc)
{
    if (!sc) return;
    samples_free(&sc->smp);
    free(sc);
}

/* The utterance-level sums of src (one utterance's metrics or another scorer) into dst. */
static void add_sums(sr_corpus *dst, const sr_rwer_result *r)
{
    sr_rwer_sums_add(&dst->rwer.rwer, &r->rwer);
    sr_rwer_sums_add(&dst->rwer.rwer_stable, &r->rwer_stable);
    sr_rwer_sums_add(&dst->rwer.arwer, &r->arwer);
    sr_rwer_sums_add(&dst->rwer.arwer_stable, &r->arwer_stable);
}

sr_status sr_corpus_add(sr_corpus *sc, const sr_utt_input *in, sr_utt_metrics *out)
{
    if (!sc || !in) return sr_error(SR_ERR_ARG, "sr_corpus_add: %s is NULL", sc ? "in" : "scorer");
    sr_utt_metrics m;
    samples smp = {0};
    sr_status st = score_one(in, &m, &smp);
    if (st) {
        samples_free(&smp);
        if (out) memset(out, 0, sizeof *out);
        return sr_error_prefix(st, "utterance %s", in->id ? in->id : "(no id)");
    }
    /* append the samples first: it is the only step that can fail, and a failure leaves the
     * scorer's sums untouched (the pooled lists are truncated back) */
    size_t keep[5] = {sc->smp.chunk_ms.n, sc->smp.chunk_rtf.n, sc->smp.first_hyp_ms.n,
                      sc->smp.final_ms.n, sc->smp.delay_ms.n};
    st = samples_append(&sc->smp, &smp);
    samples_free(&smp);
    if (st) {
        sc->smp.chunk_ms.n = keep[0];
        sc->smp.chunk_rtf.n = keep[1];
        sc->smp.first_hyp_ms.n = keep[2];
        sc->smp.final_ms.n = keep[3];
        sc->smp.delay_ms.n = keep[4];
        if (out) memset(out, 0, sizeof *out);
        return st;
    }
    sc->n_utts++;
    sr_edit_counts_add(&sc->wer, &m.wer);
    sr_edit_counts_add(&sc->cer, &m.cer);
    add_sums(sc, &m.rwer);
    sc->n_timeline += m.rwer.rwer.valid != 0;
    sc->n_stable += m.rwer.rwer_stable.valid != 0;
    sc->n_aligned += m.rwer.arwer.valid != 0;
    if (in->n_entries > 0) {
        sc->retracted += m.retracted_words;
        sc->final_words += m.wer.n_hyp;
    }
    if (!isnan(m.compute_ms) && !isnan(m.audio_ms)) {
        sc->compute_ms += m.compute_ms;
        sc->audio_ms += m.audio_ms;
        sc->n_timed++;
    }
    if (out) *out = m;
    return SR_OK;
}

static void mem_max(sr_memstats *d, const sr_memstats *s)
{
    d->weight_bytes = SR_MAX(d->weight_bytes, s->weight_bytes);
    d->stream_bytes = SR_MAX(d->stream_bytes, s->stream_bytes);
    d->peak_rss_bytes = SR_MAX(d->peak_rss_bytes, s->peak_rss_bytes);
    d->gpu_peak_bytes = SR_MAX(d->gpu_peak_bytes, s->gpu_peak_bytes);
    d->gpu_live_bytes = SR_MAX(d->gpu_live_bytes, s->gpu_live_bytes);
    d->gpu_pool_bytes = SR_MAX(d->gpu_pool_bytes, s->gpu_pool_bytes);
}

sr_status sr_corpus_merge(sr_corpus *dst, const sr_corpus *src)
{
    if (!dst || !src) return sr_error(SR_ERR_ARG, "sr_corpus_merge: %s is NULL", dst ? "src" : "dst");
    if (dst == src) return sr_error(SR_ERR_ARG, "sr_corpus_merge: src and dst are the same scorer");
    size_t keep[5] = {dst->smp.chunk_ms.n, dst->smp.chunk_rtf.n, dst->smp.first_hyp_ms.n,
                      dst->smp.final_ms.n, dst->smp.delay_ms.n};
    sr_status st = samples_append(&dst->smp, &src->smp);
    if (st) {
        dst->smp.chunk_ms.n = keep[0];
        dst->smp.chunk_rtf.n = keep[1];
        dst->smp.first_hyp_ms.n = keep[2];
        dst->smp.final_ms.n = keep[3];
        dst->smp.delay_ms.n = keep[4];
        return st;
    }
    dst->n_utts += src->n_utts;
    dst->n_timeline += src->n_timeline;
    dst->n_stable += src->n_stable;
    dst->n_aligned += src->n_aligned;
    sr_edit_counts_add(&dst->wer, &src->wer);
    sr_edit_counts_add(&dst->cer, &src->cer);
    add_sums(dst, &src->rwer);
    dst->retracted += src->retracted;
    dst->final_words += src->final_words;
    dst->audio_ms += src->audio_ms;
    dst->compute_ms += src->compute_ms;
    dst->n_timed += src->n_timed;
    mem_max(&dst->mem, &src->mem);
    return SR_OK;
}

void sr_corpus_add_memory(sr_corpus *sc, const sr_memstats *m)
{
    if (sc && m) mem_max(&sc->mem, m);
}

sr_status sr_corpus_result(const sr_corpus *sc, sr_corpus_metrics *out)
{
    if (!sc || !out) return sr_error(SR_ERR_ARG, "sr_corpus_result: %s is NULL", sc ? "out" : "scorer");
    memset(out, 0, sizeof *out);
    out->n_utts = sc->n_utts;
    out->wer = sc->wer;
    out->cer = sc->cer;
    out->wer_rate = sc->n_utts ? sr_edit_rate(&sc->wer) : NAN;
    out->cer_rate = sc->n_utts ? sr_edit_rate(&sc->cer) : NAN;
    out->rwer = sc->rwer;
    out->rwer_rate = sr_rwer_rate(&sc->rwer.rwer);
    out->rwer_stable_rate = sr_rwer_rate(&sc->rwer.rwer_stable);
    out->arwer_rate = sr_rwer_rate(&sc->rwer.arwer);
    out->arwer_stable_rate = sr_rwer_rate(&sc->rwer.arwer_stable);
    out->n_utts_timeline = sc->n_timeline;
    out->n_utts_stable = sc->n_stable;
    out->n_utts_aligned = sc->n_aligned;
    sr_status st = sr_stat_compute(sc->smp.chunk_ms.v, sc->smp.chunk_ms.n, &out->chunk_compute_ms);
    if (!st) st = sr_stat_compute(sc->smp.first_hyp_ms.v, sc->smp.first_hyp_ms.n, &out->first_hyp_ms);
    if (!st) st = sr_stat_compute(sc->smp.final_ms.v, sc->smp.final_ms.n, &out->finalization_ms);
    if (!st) st = sr_stat_compute(sc->smp.delay_ms.v, sc->smp.delay_ms.n, &out->emission_delay_ms);
    if (st) return st;
    out->retracted_words = sc->retracted;
    out->final_words = sc->final_words;
    out->revisions_per_word = sc->final_words > 0 ? (double)sc->retracted / (double)sc->final_words : NAN;
    /* unknown (NaN: null in JSON) when no utterance came with compute times (scoring another
     * system's trn), not 0 */
    out->audio_s = sc->n_timed ? sc->audio_ms / 1e3 : NAN;
    out->compute_s = sc->n_timed ? sc->compute_ms / 1e3 : NAN;
    out->rtf = sc->audio_ms > 0 ? sc->compute_ms / sc->audio_ms : NAN;
    out->rtfx = out->rtf > 0 ? 1.0 / out->rtf : NAN;
    double s = 0;
    for (size_t i = 0; i < sc->smp.chunk_rtf.n; i++) s += sc->smp.chunk_rtf.v[i];
    out->rtf_chunk_mean = sc->smp.chunk_rtf.n ? s / (double)sc->smp.chunk_rtf.n : NAN;
    out->memory = sc->mem;
    return SR_OK;
}
