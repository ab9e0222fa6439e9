/*
 * record.c — utterance records: utts.jsonl (de)serialization, scoring a set of records into
 * corpus metrics (normalization, committed-prefix mapping, word-time mapping) and writing the
 * sclite trn files and timeline.jsonl. See record.h.
 */
#include "record.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "textio.h"

void sr_record_clear(sr_record *r)
{
    if (!r) return;
    free(r->id);
    free(r->ref);
    free(r->hyp);
    for (size_t i = 0; i < r->n_points; i++) free(r->points[i].text);
    free(r->points);
    free(r->error);
    memset(r, 0, sizeof *r);
}

void sr_records_free(sr_record *r, size_t n)
{
    if (!r) return;
    for (size_t i = 0; i < n; i++) sr_record_clear(&r[i]);
    free(r);
}

/* ---- JSON lines ----------------------------------------------------------------------------- */

sr_status sr_record_to_jsonl(const sr_record *r, sr_strbuf *out)
{
    cJSON *j = cJSON_CreateObject(), *pts, *mem;
    if (!j) return sr_error(SR_ERR_NOMEM, "out of memory writing record %s", r->id);
    cJSON_AddStringToObject(j, "id", r->id);
    cJSON_AddStringToObject(j, "ref", r->ref ? r->ref : "");
    cJSON_AddStringToObject(j, "hyp", r->hyp ? r->hyp : "");
    cJSON_AddNumberToObject(j, "audio_ms", r->audio_ms);
    pts = cJSON_AddArrayToObject(j, "points");
    for (size_t i = 0; pts && i < r->n_points; i++) {
        const sr_tl_point *p = &r->points[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddNumberToObject(o, "t_ms", p->t_ms);
        cJSON_AddStringToObject(o, "text", p->text ? p->text : "");
        if (p->n_stable >= 0) cJSON_AddNumberToObject(o, "n_stable", p->n_stable);
        if (p->is_final) cJSON_AddBoolToObject(o, "final", 1);
        if (p->compute_ms >= 0) cJSON_AddNumberToObject(o, "compute_ms", p->compute_ms);
        cJSON_AddItemToArray(pts, o);
    }
    mem = cJSON_AddObjectToObject(j, "mem");
    if (mem) {
        cJSON_AddNumberToObject(mem, "weight_bytes", (double)r->mem.weight_bytes);
        cJSON_AddNumberToObject(mem, "stream_bytes", (double)r->mem.stream_bytes);
        cJSON_AddNumberToObject(mem, "peak_rss_bytes", (double)r->mem.peak_rss_bytes);
        cJSON_AddNumberToObject(mem, "gpu_peak_bytes", (double)r->mem.gpu_peak_bytes);
        cJSON_AddNumberToObject(mem, "gpu_live_bytes", (double)r->mem.gpu_live_bytes);
        cJSON_AddNumberToObject(mem, "gpu_pool_bytes", (double)r->mem.gpu_pool_bytes);
    }
    if (r->error) cJSON_AddStringToObject(j, "error", r->error);
    cJSON_AddNumberToObject(j, "repetition_cuts", r->repetition_cuts);
    char *txt = sr_json_print(j, 0);
    cJSON_Delete(j);
    if (!txt) return sr_error(SR_ERR_NOMEM, "out of memory writing record %s", r->id);
    sr_status st = sr_strbuf_append(out, txt, strlen(txt));
    if (!st) st = sr_strbuf_append(out, "\n", 1);
    free(txt);
    return st;
}

static const char *jstr(const cJSON *j, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int jnum(const cJSON *j, const char *k, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    if (!cJSON_IsNumber(v)) return 0;
    *out = v->valuedouble;
    return 1;
}

sr_status sr_record_from_json(const cJSON *j, const char *where, sr_record *r)
{
    memset(r, 0, sizeof *r);
    const char *id = jstr(j, "id"), *ref = jstr(j, "ref"), *hyp = jstr(j, "hyp"), *err = jstr(j, "error");
    const cJSON *pts = cJSON_GetObjectItemCaseSensitive(j, "points");
    double audio_ms;
    if (!cJSON_IsObject(j) || !id || !*id || !ref || !hyp || !jnum(j, "audio_ms", &audio_ms) ||
        (pts && !cJSON_IsArray(pts)))
        return sr_error(SR_ERR_FORMAT, "%s: not an utterance record (needs id, ref, hyp, audio_ms, points)", where);
    sr_status st = SR_ERR_NOMEM;
    if (!(r->id = sr_strdup(id)) || !(r->ref = sr_strdup(ref)) || !(r->hyp = sr_strdup(hyp)) ||
        (err && !(r->error = sr_strdup(err))))
        goto fail;
    r->audio_ms = audio_ms;
    size_t n = pts ? (size_t)cJSON_GetArraySize(pts) : 0;
    if (n && !(r->points = sr_calloc(n, sizeof *r->points, "record points"))) goto fail;
    const cJSON *p;
    cJSON_ArrayForEach(p, pts) {
        sr_tl_point *q = &r->points[r->n_points];
        const char *text = jstr(p, "text");
        double v;
        if (!text || !jnum(p, "t_ms", &q->t_ms)) {
            st = sr_error(SR_ERR_FORMAT, "%s: utterance %s: timeline point %zu needs t_ms and text", where, id, r->n_points);
            goto fail;
        }
        if (!(q->text = sr_strdup(text))) goto fail;
        r->n_points++;
        q->n_stable = jnum(p, "n_stable", &v) ? (int)v : -1;
        q->compute_ms = jnum(p, "compute_ms", &v) ? v : -1;
        q->is_final = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "final"));
    }
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(j, "mem");
    double v;
    if (jnum(mem, "weight_bytes", &v)) r->mem.weight_bytes = (size_t)v;
    if (jnum(mem, "stream_bytes", &v)) r->mem.stream_bytes = (size_t)v;
    if (jnum(mem, "peak_rss_bytes", &v)) r->mem.peak_rss_bytes = (size_t)v;
    if (jnum(mem, "gpu_peak_bytes", &v)) r->mem.gpu_peak_bytes = (size_t)v;
    if (jnum(mem, "gpu_live_bytes", &v)) r->mem.gpu_live_bytes = (size_t)v;
    if (jnum(mem, "gpu_pool_bytes", &v)) r->mem.gpu_pool_bytes = (size_t)v;
    if (jnum(j, "repetition_cuts", &v) && v >= 0 && v <= 1e9) r->repetition_cuts = (int)v;
    return SR_OK;
fail:
    sr_record_clear(r);
    return st;
}

sr_status sr_records_read(const char *path, sr_record **out, size_t *n, size_t *n_dropped)
{
    *out = NULL;
    *n = 0;
    *n_dropped = 0;
    if (!sr_path_is_file(path)) return SR_OK;
    sr_lines lines = {0};
    sr_status st = sr_lines_read(path, &lines);
    if (st) return st;
    sr_record *r = lines.n ? sr_calloc(lines.n, sizeof *r, "records") : NULL;
    if (lines.n && !r) { sr_lines_free(&lines); return SR_ERR_NOMEM; }
    size_t k = 0;
    for (size_t i = 0; i < lines.n; i++) {
        const char *text = sr_trim(lines.line[i]);
        if (!*text) continue;
        char where[1024];
        snprintf(where, sizeof where, "%s:%zu", path, i + 1);
        cJSON *j = cJSON_Parse(text);
        if (!j) {
            if (i == lines.n - 1) { (*n_dropped)++; break; } /* cut off by a kill: redo it */
            st = sr_error(SR_ERR_FORMAT, "%s: malformed JSON", where);
            break;
        }
        st = sr_record_from_json(j, where, &r[k]);
        cJSON_Delete(j);
        if (st) break;
        k++;
    }
    sr_lines_free(&lines);
    if (st) { sr_records_free(r, k); return st; }
    *out = r;
    *n = k;
    return SR_OK;
}

/* ---- scoring -------------------------------------------------------------------------------- */

/* Words shared at the start of a and b. */
static size_t word_lcp(const sr_words *a, const sr_words *b)
{
    size_t i = 0;
    while (i < a->n && i < b->n && !strcmp(a->w[i], b->w[i])) i++;
    return i;
}

/* Normalized text of the first k words of raw. */
static sr_status normalize_prefix(const sr_normalizer *norm, const sr_words *raw, size_t k, char **out)
{
    sr_strbuf b = {0};
    sr_status st = sr_strbuf_append(&b, "", 0);
    for (size_t i = 0; !st && i < k && i < raw->n; i++) {
        if (i) st = sr_strbuf_append(&b, " ", 1);
        if (!st) st = sr_strbuf_append(&b, raw->w[i], strlen(raw->w[i]));
    }
    if (!st) st = sr_normalize(norm, b.data, out);
    sr_strbuf_free(&b);
    return st;
}

sr_status sr_map_word_times(const sr_normalizer *norm, const sr_utt_words *raw,
                            const char *ref_norm, int64_t **end_ms, size_t *n_out)
{
    *end_ms = NULL;
    *n_out = 0;
    sr_words W = {0}, R = {0};
    size_t *lcp = NULL;
    int64_t *ends = NULL;
    sr_strbuf joined = {0};
    sr_status st = sr_words_split(ref_norm, &W);
    if (st) return st;
    /* the raw words as one text, to reuse normalize_prefix */
    st = sr_strbuf_append(&joined, "", 0);
    for (size_t i = 0; !st && i < raw->n; i++) {
        if (i) st = sr_strbuf_append(&joined, " ", 1);
        if (!st) st = sr_strbuf_append(&joined, raw->words[i].word, strlen(raw->words[i].word));
    }
    if (!st) st = sr_words_split(joined.data, &R);
    if (st) goto out;
    if (R.n != raw->n) { /* a CTM "word" holding a space cannot be mapped */
        st = sr_error(SR_ERR_ARG, "utterance %s: word times hold a word with white space", raw->id);
        goto out;
    }
    st = SR_ERR_NOMEM;
    if (!(lcp = sr_calloc(R.n + 1, sizeof *lcp, "word-time map")) ||
        (W.n && !(ends = sr_malloc(W.n * sizeof *ends, "word end times"))))
        goto out;
    for (size_t i = 1; i <= R.n; i++) { /* lcp[i]: words of normalize(raw[0..i)) shared with W */
        char *t = NULL;
        sr_words P = {0};
        if ((st = normalize_prefix(norm, &R, i, &t)) || (st = sr_words_split(t, &P))) { free(t); goto out; }
        lcp[i] = word_lcp(&P, &W);
        if (i == R.n && (P.n != W.n || lcp[i] != W.n))
            st = sr_error(SR_ERR_ARG, "utterance %s: the aligned words do not spell the reference after normalization", raw->id);
        sr_words_free(&P);
        free(t);
        if (st) goto out;
    }
    if (!R.n && W.n) {
        st = sr_error(SR_ERR_ARG, "utterance %s: no aligned words for a non-empty reference", raw->id);
        goto out;
    }
    /* suffix minimum: from prefix i on, at least lcp_min[i] words are settled */
    for (size_t i = R.n; i-- > 1;)
        if (lcp[i + 1] < lcp[i]) lcp[i] = lcp[i + 1];
    size_t i = 1;
    for (size_t j = 0; j < W.n; j++) {
        while (lcp[i] < j + 1) i++; /* ends at R.n at the latest, where lcp = W.n */
        ends[j] = (int64_t)llround(raw->words[i - 1].end_s * 1000.0);
    }
    *end_ms = ends;
    ends = NULL;
    *n_out = W.n;
    st = SR_OK;
out:
    free(ends);
    free(lcp);
    sr_words_free(&W);
    sr_words_free(&R);
    sr_strbuf_free(&joined);
    return st;
}

static void add_rate(cJSON *o, const char *k, double v)
{
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

/* Score one record: normalized texts, entries, word times, then the corpus accumulator. */
static sr_status score_one(const sr_record *r, const sr_score_setup *setup, sr_corpus *corpus,
                           cJSON *per_utt)
{
    char *ref = NULL, *hyp = NULL;
    sr_tl_entry *e = NULL;
    char **texts = NULL;
    int64_t *ends = NULL;
    size_t n_ends = 0;
    sr_words hw = {0};
    sr_status st;
    if ((st = sr_normalize(setup->norm, r->ref, &ref)) || (st = sr_normalize(setup->norm, r->hyp, &hyp)))
        goto out;
    st = SR_ERR_NOMEM;
    if (r->n_points && (!(e = sr_calloc(r->n_points, sizeof *e, "timeline entries")) ||
                        !(texts = sr_calloc(r->n_points, sizeof *texts, "timeline texts"))))
        goto out;
    for (size_t k = 0; k < r->n_points; k++) {
        const sr_tl_point *p = &r->points[k];
        if ((st = sr_normalize(setup->norm, p->text, &texts[k]))) goto out;
        e[k].t_ms = (int64_t)llround(p->t_ms);
        e[k].text = texts[k];
        e[k].compute_ns = p->compute_ms >= 0 ? (int64_t)llround(p->compute_ms * 1e6) : -1;
        e[k].n_stable = -1;
        if (p->n_stable >= 0) { /* committed raw words -> committed normalized words */
            sr_words raw = {0}, full = {0}, pre = {0};
            char *t = NULL;
            if (!(st = sr_words_split(p->text, &raw)) && !(st = normalize_prefix(setup->norm, &raw, (size_t)p->n_stable, &t)) &&
                !(st = sr_words_split(t, &pre)) && !(st = sr_words_split(texts[k], &full)))
                e[k].n_stable = (int64_t)word_lcp(&pre, &full);
            sr_words_free(&raw);
            sr_words_free(&full);
            sr_words_free(&pre);
            free(t);
            if (st) goto out;
        }
    }
    sr_word_times times = {0}, *tp = NULL;
    const sr_utt_words *aw = setup->alignments ? sr_alignments_find(setup->alignments, r->id) : NULL;
    if (aw) {
        if ((st = sr_map_word_times(setup->norm, aw, ref, &ends, &n_ends))) goto out;
        times.end_ms = ends;
        times.n = n_ends;
        tp = &times;
    }
    sr_utt_input in = {r->id, ref, tp, e, r->n_points, hyp, r->audio_ms >= 0 ? (int64_t)llround(r->audio_ms) : -1};
    sr_utt_metrics um;
    if ((st = sr_corpus_add(corpus, &in, &um))) goto out;
    if (r->mem.weight_bytes || r->mem.peak_rss_bytes) sr_corpus_add_memory(corpus, &r->mem);
    if (per_utt) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", r->id);
        cJSON_AddStringToObject(o, "ref", r->ref);
        cJSON_AddStringToObject(o, "hyp", r->hyp);
        cJSON_AddStringToObject(o, "ref_norm", ref);
        cJSON_AddStringToObject(o, "hyp_norm", hyp);
        add_rate(o, "wer", um.wer_rate);
        cJSON_AddNumberToObject(o, "sub", (double)um.wer.sub);
        cJSON_AddNumberToObject(o, "del", (double)um.wer.del);
        cJSON_AddNumberToObject(o, "ins", (double)um.wer.ins);
        cJSON_AddNumberToObject(o, "cor", (double)um.wer.cor);
        cJSON_AddNumberToObject(o, "n_ref_words", (double)um.wer.n_ref);
        add_rate(o, "cer", um.cer_rate);
        add_rate(o, "rwer", um.rwer_rate);
        add_rate(o, "rwer_stable", um.rwer_stable_rate);
        add_rate(o, "arwer", um.arwer_rate);
        add_rate(o, "arwer_stable", um.arwer_stable_rate);
        if (um.first_hyp_ms >= 0) cJSON_AddNumberToObject(o, "first_hyp_ms", (double)um.first_hyp_ms);
        else cJSON_AddNullToObject(o, "first_hyp_ms");
        add_rate(o, "finalization_ms", um.finalization_ms);
        add_rate(o, "emission_delay_mean_ms", um.emission_delay_mean_ms);
        add_rate(o, "revisions_per_word", um.revisions_per_word);
        add_rate(o, "audio_s", um.audio_ms / 1000.0);
        add_rate(o, "compute_s", um.compute_ms / 1000.0);
        add_rate(o, "rtf", um.rtf);
        cJSON_AddNumberToObject(o, "n_chunks", (double)r->n_points);
        cJSON_AddNumberToObject(o, "repetition_cuts", r->repetition_cuts);
        cJSON_AddItemToArray(per_utt, o);
    }
out:
    sr_words_free(&hw);
    free(ends);
    for (size_t k = 0; texts && k < r->n_points; k++) free(texts[k]);
    free(texts);
    free(e);
    free(ref);
    free(hyp);
    return st;
}

sr_status sr_records_score(const sr_record *r, size_t n, const sr_score_setup *setup,
                           sr_corpus *corpus, size_t *n_failed, cJSON **per_utt)
{
    *n_failed = 0;
    cJSON *arr = NULL;
    if (per_utt && !(arr = cJSON_CreateArray())) return sr_error(SR_ERR_NOMEM, "out of memory scoring");
    for (size_t i = 0; i < n; i++) {
        if (r[i].error) {
            (*n_failed)++;
            if (arr) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "id", r[i].id);
                cJSON_AddStringToObject(o, "error", r[i].error);
                cJSON_AddItemToArray(arr, o);
            }
            continue;
        }
        sr_status st = score_one(&r[i], setup, corpus, arr);
        if (st) {
            cJSON_Delete(arr);
            return sr_error_prefix(st, "scoring utterance %s", r[i].id);
        }
    }
    if (per_utt) *per_utt = arr;
    return SR_OK;
}

static void add_stat(cJSON *o, const char *k, const sr_stat *s)
{
    cJSON *x = cJSON_AddObjectToObject(o, k);
    cJSON_AddNumberToObject(x, "n", (double)s->n);
    add_rate(x, "mean", s->mean);
    add_rate(x, "p50", s->p50);
    add_rate(x, "p90", s->p90);
    add_rate(x, "p99", s->p99);
    add_rate(x, "max", s->max);
}

cJSON *sr_corpus_to_json(const sr_corpus_metrics *m, size_t n_failed)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    add_rate(o, "wer", m->wer_rate);
    add_rate(o, "cer", m->cer_rate);
    add_rate(o, "rwer", m->rwer_rate);
    add_rate(o, "rwer_stable", m->rwer_stable_rate);
    add_rate(o, "arwer", m->arwer_rate);
    add_rate(o, "arwer_stable", m->arwer_stable_rate);
    cJSON_AddNumberToObject(o, "n_utts", (double)m->n_utts);
    cJSON_AddNumberToObject(o, "n_failed", (double)n_failed);
    cJSON_AddNumberToObject(o, "n_ref_words", (double)m->wer.n_ref);
    cJSON_AddNumberToObject(o, "sub", (double)m->wer.sub);
    cJSON_AddNumberToObject(o, "del", (double)m->wer.del);
    cJSON_AddNumberToObject(o, "ins", (double)m->wer.ins);
    cJSON_AddNumberToObject(o, "cor", (double)m->wer.cor);
    cJSON *lat = cJSON_AddObjectToObject(o, "latency");
    add_stat(lat, "chunk_compute_ms", &m->chunk_compute_ms);
    add_stat(lat, "first_hyp_ms", &m->first_hyp_ms);
    add_stat(lat, "finalization_ms", &m->finalization_ms);
    add_stat(lat, "emission_delay_ms", &m->emission_delay_ms);
    add_rate(lat, "revisions_per_word", m->revisions_per_word);
    cJSON_AddNumberToObject(lat, "retracted_words", (double)m->retracted_words);
    add_rate(o, "audio_s", m->audio_s);
    add_rate(o, "compute_s", m->compute_s);
    add_rate(o, "rtf", m->rtf);
    add_rate(o, "rtf_chunk_mean", m->rtf_chunk_mean);
    add_rate(o, "rtfx", m->rtfx);
    cJSON *mem = cJSON_AddObjectToObject(o, "memory");
    /* a measured run always has a peak RSS; all zero means nothing was measured (scored
     * from another system's output): unknown, not 0 */
    const sr_memstats *ms = &m->memory;
    int known = ms->weight_bytes || ms->stream_bytes || ms->peak_rss_bytes || ms->gpu_peak_bytes;
    add_rate(mem, "weight_bytes", known ? (double)ms->weight_bytes : NAN);
    add_rate(mem, "stream_bytes", known ? (double)ms->stream_bytes : NAN);
    add_rate(mem, "peak_rss_bytes", known ? (double)ms->peak_rss_bytes : NAN);
    add_rate(mem, "gpu_peak_bytes", known ? (double)ms->gpu_peak_bytes : NAN);
    /* the device bytes held by weights, cache pools and scratch (each the most over the run's
     * utterances; 0 on the CPU) */
    size_t gw, gp, gs;
    sr_memory_gpu_split(ms, &gw, &gp, &gs);
    add_rate(mem, "gpu_weight_bytes", known ? (double)gw : NAN);
    add_rate(mem, "gpu_pool_bytes", known ? (double)gp : NAN);
    add_rate(mem, "gpu_scratch_bytes", known ? (double)gs : NAN);
    return o;
}

sr_status sr_records_write_outputs(const sr_record *r, size_t n, const sr_normalizer *norm,
                                   const char *dir)
{
    sr_strbuf hyp = {0}, ref = {0}, tl = {0};
    sr_status st = SR_OK;
    for (size_t i = 0; !st && i < n; i++) {
        if (r[i].error) continue;
        char *h = NULL, *f = NULL;
        if (!(st = sr_normalize(norm, r[i].hyp, &h)) && !(st = sr_normalize(norm, r[i].ref, &f)) &&
            !(st = sr_trn_append(&hyp, r[i].id, h)))
            st = sr_trn_append(&ref, r[i].id, f);
        free(h);
        free(f);
        for (size_t k = 0; !st && k < r[i].n_points; k++) st = sr_timeline_append(&tl, r[i].id, &r[i].points[k]);
    }
    const char *names[3] = {"hyp.trn", "ref.trn", "timeline.jsonl"};
    sr_strbuf *bufs[3] = {&hyp, &ref, &tl};
    for (int k = 0; !st && k < 3; k++) {
        char *p = sr_path_join(dir, names[k]);
        if (!p) st = sr_error(SR_ERR_NOMEM, "out of memory");
        else st = sr_write_file_atomic(p, bufs[k]->data ? bufs[k]->data : "", bufs[k]->len);
        free(p);
    }
    for (int k = 0; k < 3; k++) sr_strbuf_free(bufs[k]);
    return st;
}
