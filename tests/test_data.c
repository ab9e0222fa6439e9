/*
 * test_data.c — the built-in aligned speech set (scripts/make_aligned_speech.sh): generated
 * twice into fresh folders, it must be byte-identical, hold >= 20 utterances of 3-15 s in
 * LibriSpeech layout, and its CTM must agree with the transcripts and mark exact word
 * boundaries (first and last sample of every word non-zero, everything between words zero).
 * Skips when espeak-ng or Debian's python3-numpy is absent.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define MAX_UTT 64
#define MAX_WORDS 64

typedef struct {
    char id[64];
    char words[MAX_WORDS][64];
    double start[MAX_WORDS], dur[MAX_WORDS];
    int n_ctm;
    char trans[1024];
} utt;

static utt utts[MAX_UTT];
static int n_utts;

static utt *find_utt(const char *id)
{
    for (int i = 0; i < n_utts; i++)
        if (!strcmp(utts[i].id, id)) return &utts[i];
    if (n_utts == MAX_UTT) return NULL;
    snprintf(utts[n_utts].id, sizeof utts[n_utts].id, "%s", id);
    return &utts[n_utts++];
}

static int generate(const char *dir)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash scripts/make_aligned_speech.sh %s >/dev/null 2>&1", dir);
    return system(cmd);
}

static void test_aligned_speech(void)
{
    if (system("command -v espeak-ng >/dev/null && command -v flac >/dev/null && "
               "/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
        TEST_SKIP("espeak-ng, flac or python3-numpy missing (make setup installs them)");
        return;
    }
    const char *a = test_tmppath("speech-a"), *b = test_tmppath("speech-b");
    CU_ASSERT_EQUAL_FATAL(generate(a), 0);
    CU_ASSERT_EQUAL_FATAL(generate(b), 0);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "diff -r %s %s >/dev/null", a, b);
    CU_ASSERT_EQUAL(system(cmd), 0); /* deterministic: same bytes each run */

    /* CTM */
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/alignments.ctm", a);
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    n_utts = 0;
    while (fgets(line, sizeof line, f)) {
        char id[64], w[64];
        int ch;
        double st, du;
        CU_ASSERT_EQUAL_FATAL(sscanf(line, "%63s %d %lf %lf %63s", id, &ch, &st, &du, w), 5);
        utt *u = find_utt(id);
        CU_ASSERT_PTR_NOT_NULL_FATAL(u);
        CU_ASSERT_FATAL(u->n_ctm < MAX_WORDS);
        snprintf(u->words[u->n_ctm], sizeof u->words[0], "%s", w);
        u->start[u->n_ctm] = st;
        u->dur[u->n_ctm++] = du;
    }
    fclose(f);
    CU_ASSERT(n_utts >= 20);

    int checked = 0;
    for (int i = 0; i < n_utts; i++) {
        utt *u = &utts[i];
        char spk[16], chap[16];
        CU_ASSERT_EQUAL_FATAL(sscanf(u->id, "%15[^-]-%15[^-]", spk, chap), 2);
        /* transcript line in <spk>/<chap>/<spk>-<chap>.trans.txt */
        snprintf(path, sizeof path, "%s/%s/%s/%s-%s.trans.txt", a, spk, chap, spk, chap);
        f = fopen(path, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        int found = 0;
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, u->id, strlen(u->id)) && line[strlen(u->id)] == ' ') {
                line[strcspn(line, "\n")] = '\0';
                snprintf(u->trans, sizeof u->trans, "%s", line + strlen(u->id) + 1);
                found = 1;
            }
        fclose(f);
        CU_ASSERT(found);
        /* CTM words == transcript words */
        char joined[1024] = "";
        for (int k = 0; k < u->n_ctm; k++) {
            if (k) strcat(joined, " ");
            strcat(joined, u->words[k]);
        }
        CU_ASSERT_STRING_EQUAL(joined, u->trans);
        /* audio: duration and exact word boundaries */
        snprintf(path, sizeof path, "%s/%s/%s/%s.flac", a, spk, chap, u->id);
        sr_audio au = {0};
        CU_ASSERT_EQUAL_FATAL(sr_audio_load(path, 0, &au), SR_OK);
        CU_ASSERT_EQUAL(au.sample_rate, 16000);
        double secs = (double)au.n / 16000;
        CU_ASSERT(secs >= 3.0 && secs <= 15.0);
        size_t prev_end = 0; /* first sample after the previous word */
        for (int k = 0; k < u->n_ctm; k++) {
            long s0 = lround(u->start[k] * 16000), s1 = lround((u->start[k] + u->dur[k]) * 16000);
            CU_ASSERT_FATAL(s0 >= (long)prev_end && s1 > s0 && (size_t)s1 <= au.n);
            CU_ASSERT(au.samples[s0] != 0.0f && au.samples[s1 - 1] != 0.0f);
            for (size_t j = prev_end; j < (size_t)s0; j++)
                if (au.samples[j] != 0.0f) {
                    printf("\n      %s: sample %zu before word %d (%s) is not silent\n", u->id, j, k, u->words[k]);
                    CU_FAIL("audio between words");
                    break;
                }
            prev_end = (size_t)s1;
        }
        for (size_t j = prev_end; j < au.n; j++)
            if (au.samples[j] != 0.0f) { CU_FAIL("audio after the last word"); break; }
        sr_audio_free(&au);
        checked++;
    }
    printf("\n      %d utterances checked\n      ", checked);
}

void test_register_data(void)
{
    TEST_SUITE("data_aligned_speech",
               {"generated set: deterministic, layout, exact word times", test_aligned_speech});
}
