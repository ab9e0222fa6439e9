/*
 * fuzz_timeline.c — timeline.jsonl: sr_timelines_read (eval/timeline_io.c) on arbitrary text
 * (one JSON object per line, typed fields, contiguous and time-ordered utterances). What reads
 * successfully is written back with sr_timelines_write (to the temporary folder) and read
 * again: the two must be equal field by field (ids, times, texts, n_stable, final, compute_ms).
 */
#include "fuzz_common.h"

#include "../../eval/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512], back[512];
    fuzz_write(path, sizeof path, "in.jsonl", data, size);
    sr_timelines *t = NULL;
    if (sr_timelines_read(path, &t) != SR_OK) {
        FUZZ_CHECK(t == NULL);
        return 0;
    }
    for (size_t i = 0; i < t->n; i++) {
        const sr_utt_timeline *u = &t->utts[i];
        FUZZ_CHECK(u->id && u->id[0] && u->where && u->n > 0);
        if (i) FUZZ_CHECK(strcmp(t->utts[i - 1].id, u->id) < 0);
        FUZZ_CHECK(sr_timelines_find(t, u->id) == u);
        for (size_t k = 0; k < u->n; k++) {
            FUZZ_CHECK(u->points[k].text && u->points[k].t_ms >= 0);
            if (k) FUZZ_CHECK(u->points[k - 1].t_ms <= u->points[k].t_ms);
        }
    }
    fuzz_path(back, sizeof back, "back.jsonl");
    FUZZ_CHECK(sr_timelines_write(back, t) == SR_OK);
    sr_timelines *r = NULL;
    FUZZ_CHECK(sr_timelines_read(back, &r) == SR_OK);
    FUZZ_CHECK(r->n == t->n);
    for (size_t i = 0; i < t->n; i++) {
        const sr_utt_timeline *a = &t->utts[i], *b = &r->utts[i];
        FUZZ_CHECK(!strcmp(a->id, b->id) && a->n == b->n);
        for (size_t k = 0; k < a->n; k++) {
            const sr_tl_point *p = &a->points[k], *q = &b->points[k];
            FUZZ_CHECK(p->t_ms == q->t_ms);
            FUZZ_CHECK(!strcmp(p->text, q->text));
            FUZZ_CHECK(p->n_stable == q->n_stable);
            FUZZ_CHECK(p->is_final == q->is_final);
            FUZZ_CHECK(p->compute_ms == q->compute_ms);
        }
    }
    sr_timelines_free(r);
    sr_timelines_free(t);
    return 0;
}
