/*
 * test_dataset.c — suites eval_dataset, eval_wordtimes and eval_timeline_io: the evaluation
 * harness's input readers (eval/dataset.h).
 *
 * Datasets with audio are built in test_tmpdir() (WAV written with sr_audio_write_wav, FLAC
 * with libsndfile) so relative-path resolution, missing files and header probing are checked
 * without shared data; tests/fixtures/eval/ holds the small text fixtures, one per bad-input
 * case, each checked for the status and the file:line (or field) in the message. The shared
 * LibriSpeech sample and the generated aligned speech set (LibriSpeech layout + CTM) are
 * loaded end to end when available, and skipped with a message otherwise.
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../eval/dataset.h"
#include "../eval/textio.h"

#include <cJSON.h>
#include "test.h"

#define FX(name) test_fixture("eval/" name)

/* ---- helpers ------------------------------------------------------------------------------ */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static void make_dir(const char *path)
{
    struct stat sb;
    CU_ASSERT_FATAL(mkdir(path, 0755) == 0 || (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)));
}

/* Silence of `seconds` at 16 kHz, as WAV (sr_audio_write_wav) or FLAC (libsndfile). */
static void write_audio(const char *path, double seconds)
{
    size_t n = (size_t)lround(seconds * 16000);
    float *x = calloc(n ? n : 1, sizeof *x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.1 * sin((double)i * 0.05));
    size_t len = strlen(path);
    if (len > 5 && !strcmp(path + len - 5, ".flac")) {
        SF_INFO info = {.samplerate = 16000, .channels = 1,
                        .format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16};
        SNDFILE *f = sf_open(path, SFM_WRITE, &info);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(sf_writef_float(f, x, (sf_count_t)n), (sf_count_t)n);
        sf_close(f);
    } else {
        CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(path, x, n, 16000), SR_OK);
    }
    free(x);
}

static int file_exists(const char *path) { return access(path, F_OK) == 0; }

static sr_dataset *load_ok(const char *path, sr_data_format f)
{
    sr_dataset *d = NULL;
    sr_status st = sr_dataset_load(path, f, &d);
    if (st) printf("\n      load %s: %s\n", path, sr_last_error());
    CU_ASSERT_EQUAL(st, SR_OK);
    return d;
}

/* ---- eval_dataset ------------------------------------------------------------------------- */

/* LibriSpeech layout in a temp folder: two chapters, FLAC preferred over WAV, a missing file
 * reported (not dropped), a transcript line without text, white space trimmed. */
static void test_librispeech_layout(void)
{
    char p[1024];
    const char *root = test_tmppath("ls");
    make_dir(root);
    snprintf(p, sizeof p, "%s/100", root); make_dir(p);
    snprintf(p, sizeof p, "%s/100/200", root); make_dir(p);
    snprintf(p, sizeof p, "%s/7", root); make_dir(p);
    snprintf(p, sizeof p, "%s/7/8", root); make_dir(p);
    snprintf(p, sizeof p, "%s/100/200/100-200.trans.txt", root);
    write_text(p, "100-200-0001 SECOND  ONE  \r\n100-200-0000 FIRST ONE\n\n100-200-0002 GONE\n");
    snprintf(p, sizeof p, "%s/7/8/7-8.trans.txt", root);
    write_text(p, "7-8-0000\tTAB SEPARATED\n7-8-0001\n");
    snprintf(p, sizeof p, "%s/100/200/100-200-0000.flac", root); write_audio(p, 0.5);
    snprintf(p, sizeof p, "%s/100/200/100-200-0000.wav", root); write_audio(p, 0.25);
    snprintf(p, sizeof p, "%s/100/200/100-200-0001.wav", root); write_audio(p, 0.75);
    snprintf(p, sizeof p, "%s/7/8/7-8-0000.flac", root); write_audio(p, 1.0);
    snprintf(p, sizeof p, "%s/7/8/7-8-0001.flac", root); write_audio(p, 0.1);
    snprintf(p, sizeof p, "%s/README.txt", root); write_text(p, "not a transcript\n");

    sr_dataset *d = load_ok(root, SR_DATA_AUTO);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->format, SR_DATA_LIBRISPEECH);
    CU_ASSERT_EQUAL_FATAL(d->n, 5);
    const char *ids[] = {"100-200-0000", "100-200-0001", "100-200-0002", "7-8-0000", "7-8-0001"};
    for (size_t i = 0; i < 5; i++) CU_ASSERT_STRING_EQUAL(d->utts[i].id, ids[i]);
    CU_ASSERT_STRING_EQUAL(d->utts[0].text, "FIRST ONE");
    CU_ASSERT_STRING_EQUAL(d->utts[1].text, "SECOND  ONE"); /* raw: inner spacing kept */
    CU_ASSERT_STRING_EQUAL(d->utts[3].text, "TAB SEPARATED");
    CU_ASSERT_STRING_EQUAL(d->utts[4].text, "");
    snprintf(p, sizeof p, "%s/100/200/100-200-0000.flac", root);
    CU_ASSERT_STRING_EQUAL(d->utts[0].audio, p);
    snprintf(p, sizeof p, "%s/100/200/100-200-0001.wav", root);
    CU_ASSERT_STRING_EQUAL(d->utts[1].audio, p);
    CU_ASSERT_EQUAL(d->n_problems, 1);
    CU_ASSERT_PTR_NULL(d->utts[0].problem);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d->utts[2].problem);
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[2].problem, "100-200.trans.txt:4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[2].problem, "100-200-0002.flac"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[1].where, "100-200.trans.txt:1"));
    for (size_t i = 0; i < d->n; i++) CU_ASSERT(d->utts[i].duration_s <= 0);
    CU_ASSERT(d->utts[0].offset_s == 0);

    CU_ASSERT_PTR_EQUAL(sr_dataset_find(d, "7-8-0000"), &d->utts[3]);
    CU_ASSERT_PTR_NULL(sr_dataset_find(d, "7-8-0002"));

    CU_ASSERT_EQUAL(sr_dataset_probe_durations(d), SR_OK);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[0].duration_s, 0.5, 1e-9); /* the FLAC, not the WAV */
    CU_ASSERT_DOUBLE_EQUAL(d->utts[1].duration_s, 0.75, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[3].duration_s, 1.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(sr_dataset_total_duration(d), 0.5 + 0.75 + 1.0 + 0.1, 1e-9);
    CU_ASSERT_EQUAL(d->n_problems, 1);

    CU_ASSERT_EQUAL(sr_dataset_drop_problems(d), 1);
    CU_ASSERT_EQUAL(d->n, 4);
    CU_ASSERT_EQUAL(d->n_problems, 0);
    CU_ASSERT_STRING_EQUAL(d->utts[2].id, "7-8-0000");
    CU_ASSERT_PTR_EQUAL(sr_dataset_find(d, "7-8-0001"), &d->utts[3]);
    sr_dataset_free(d);

    /* one transcript file given directly */
    snprintf(p, sizeof p, "%s/7/8/7-8.trans.txt", root);
    d = load_ok(p, SR_DATA_AUTO);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->n, 2);
    CU_ASSERT_EQUAL(d->n_problems, 0);
    sr_dataset_free(d);
}

/* The flat variant: transcripts.txt next to the audio; an unreadable audio file and an empty
 * one become problems when probing. */
static void test_librispeech_flat(void)
{
    char p[1024];
    const char *root = test_tmppath("flat");
    make_dir(root);
    snprintf(p, sizeof p, "%s/transcripts.txt", root);
    write_text(p, "b-2 BEE\na-1 AY\nc-3 SEE\n");
    snprintf(p, sizeof p, "%s/a-1.wav", root); write_audio(p, 0.3);
    snprintf(p, sizeof p, "%s/b-2.flac", root); write_text(p, "this is not audio");
    snprintf(p, sizeof p, "%s/c-3.wav", root); write_audio(p, 0.2);
    sr_dataset *d = load_ok(root, SR_DATA_LIBRISPEECH);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL_FATAL(d->n, 3);
    CU_ASSERT_STRING_EQUAL(d->utts[0].id, "a-1");
    CU_ASSERT_EQUAL(d->n_problems, 0);
    CU_ASSERT_EQUAL(sr_dataset_probe_durations(d), SR_OK);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[0].duration_s, 0.3, 1e-9);
    CU_ASSERT_EQUAL(d->n_problems, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d->utts[1].problem);
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[1].problem, "transcripts.txt:1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[1].problem, "b-2.flac"));
    sr_dataset_free(d);
}

static void test_librispeech_shared(void)
{
    const char *dir = test_shared("librispeech-sample");
    if (!dir) { TEST_SKIP("../shared/data/librispeech-sample absent"); return; }
    sr_dataset *d = load_ok(dir, SR_DATA_AUTO);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->format, SR_DATA_LIBRISPEECH);
    CU_ASSERT_EQUAL(d->n, 10);
    CU_ASSERT_EQUAL(d->n_problems, 0);
    for (size_t i = 1; i < d->n; i++) CU_ASSERT(strcmp(d->utts[i - 1].id, d->utts[i].id) < 0);
    const sr_utt *u = sr_dataset_find(d, "1089-134686-0000");
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    CU_ASSERT_STRING_EQUAL(u->text, "HE HOPED THERE WOULD BE STEW FOR DINNER TURNIPS AND CARROTS "
                                    "AND BRUISED POTATOES AND FAT MUTTON PIECES TO BE LADLED OUT "
                                    "IN THICK PEPPERED FLOUR FATTENED SAUCE");
    u = sr_dataset_find(d, "1089-134686-0002");
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    CU_ASSERT(strstr(u->audio, "1089-134686-0002.wav") != NULL); /* some are .wav */
    CU_ASSERT_EQUAL(sr_dataset_probe_durations(d), SR_OK);
    CU_ASSERT_EQUAL(d->n_problems, 0);
    double total = sr_dataset_total_duration(d);
    printf("\n      librispeech-sample: %zu utterances, %.2f s ", d->n, total);
    CU_ASSERT(fabs(total - 77.1) < 0.1); /* the shared README says 77.1 s */
    sr_dataset_free(d);
}

/* Manifest with audio in the temp folder: relative and absolute paths, explicit ids, offset
 * and duration, probing fills only unknown durations, an offset past the end is a problem. */
static void test_manifest(void)
{
    char p[1024], m[4096];
    const char *root = test_tmppath("mf");
    make_dir(root);
    snprintf(p, sizeof p, "%s/wavs", root); make_dir(p);
    snprintf(p, sizeof p, "%s/wavs/one.wav", root); write_audio(p, 1.0);
    snprintf(p, sizeof p, "%s/two.flac", root); write_audio(p, 2.0);
    snprintf(m, sizeof m,
             "{\"audio_filepath\": \"wavs/one.wav\", \"text\": \" Hello, World! \", \"duration\": 1.0}\n"
             "{\"audio_filepath\": \"%s/two.flac\", \"text\": \"tail\", \"offset\": 0.5}\n"
             "\n"
             "{\"audio_filepath\": \"two.flac\", \"text\": \"\", \"utt_id\": \"late\", \"offset\": 2.5}\n"
             "{\"audio_filepath\": \"two.flac\", \"text\": \"seg\", \"id\": \"seg\", \"offset\": 0.25, "
             "\"duration\": 1.0, \"lang\": \"en\"}\n",
             root);
    snprintf(p, sizeof p, "%s/train.jsonl", root);
    write_text(p, m);
    sr_dataset *d = load_ok(p, SR_DATA_AUTO);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->format, SR_DATA_MANIFEST);
    CU_ASSERT_EQUAL_FATAL(d->n, 4);
    const char *ids[] = {"late", "one", "seg", "two"};
    for (size_t i = 0; i < 4; i++) CU_ASSERT_STRING_EQUAL(d->utts[i].id, ids[i]);
    CU_ASSERT_EQUAL(d->n_problems, 0);
    snprintf(p, sizeof p, "%s/wavs/one.wav", root);
    CU_ASSERT_STRING_EQUAL(d->utts[1].audio, p);
    CU_ASSERT_STRING_EQUAL(d->utts[1].text, "Hello, World!");
    CU_ASSERT_DOUBLE_EQUAL(d->utts[1].duration_s, 1.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[3].offset_s, 0.5, 0);
    CU_ASSERT(d->utts[3].duration_s <= 0);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[2].duration_s, 1.0, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[2].where, "train.jsonl:5"));
    CU_ASSERT_EQUAL(sr_dataset_probe_durations(d), SR_OK);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[3].duration_s, 1.5, 1e-9); /* 2.0 s file minus offset */
    CU_ASSERT_DOUBLE_EQUAL(d->utts[2].duration_s, 1.0, 0);    /* given: not overwritten */
    CU_ASSERT_EQUAL(d->n_problems, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d->utts[0].problem);
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[0].problem, "train.jsonl:4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[0].problem, "offset"));
    sr_dataset_free(d);
}

/* Missing audio in a committed manifest: reported per utterance with file:line, paths
 * resolved against the manifest's folder, absolute ones kept. */
static void test_manifest_missing(void)
{
    sr_dataset *d = load_ok(FX("manifest/missing_audio.json"), SR_DATA_MANIFEST);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL_FATAL(d->n, 2);
    CU_ASSERT_EQUAL(d->n_problems, 2);
    CU_ASSERT_STRING_EQUAL(d->utts[0].id, "a1");
    CU_ASSERT_STRING_EQUAL(d->utts[0].audio, "tests/fixtures/eval/manifest/audio/a1.wav");
    CU_ASSERT_STRING_EQUAL(d->utts[1].audio, "/nonexistent/abs/a2.flac");
    CU_ASSERT_DOUBLE_EQUAL(d->utts[1].offset_s, 0.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[1].duration_s, 2.0, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[0].problem, "missing_audio.json:1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[1].problem, "missing_audio.json:2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[1].problem, "not found"));
    CU_ASSERT_EQUAL(sr_dataset_drop_problems(d), 2);
    CU_ASSERT_EQUAL(d->n, 0);
    CU_ASSERT_PTR_NULL(sr_dataset_find(d, "a1"));
    sr_dataset_free(d);

    d = load_ok(FX("manifest/ids.json"), SR_DATA_AUTO);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL_FATAL(d->n, 2);
    CU_ASSERT_STRING_EQUAL(d->utts[1].id, "seg-2");
    CU_ASSERT_DOUBLE_EQUAL(d->utts[1].offset_s, 3.0, 0);
    sr_dataset_free(d);
}

/* Kaldi folder: plain wav.scp (relative and absolute), text order differs, utt2dur. */
static void test_kaldi(void)
{
    char p[1024], t[2048];
    const char *root = test_tmppath("kaldi");
    make_dir(root);
    snprintf(p, sizeof p, "%s/a.wav", root); write_audio(p, 0.5);
    snprintf(p, sizeof p, "%s/b.flac", root); write_audio(p, 0.25);
    snprintf(t, sizeof t, "utt-b %s/b.flac\nutt-a a.wav\n", root);
    snprintf(p, sizeof p, "%s/wav.scp", root); write_text(p, t);
    snprintf(p, sizeof p, "%s/text", root); write_text(p, "utt-a HELLO THERE\nutt-b  WORLD\n");
    snprintf(p, sizeof p, "%s/utt2dur", root); write_text(p, "utt-a 0.5\n");
    sr_dataset *d = load_ok(root, SR_DATA_AUTO);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->format, SR_DATA_KALDI);
    CU_ASSERT_EQUAL_FATAL(d->n, 2);
    CU_ASSERT_EQUAL(d->n_problems, 0);
    snprintf(p, sizeof p, "%s/a.wav", root);
    CU_ASSERT_STRING_EQUAL(d->utts[0].audio, p);
    CU_ASSERT_STRING_EQUAL(d->utts[1].text, "WORLD");
    CU_ASSERT_DOUBLE_EQUAL(d->utts[0].duration_s, 0.5, 0);
    CU_ASSERT(d->utts[1].duration_s <= 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[1].where, "/text:2"));
    CU_ASSERT_EQUAL(sr_dataset_probe_durations(d), SR_OK);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[1].duration_s, 0.25, 1e-9);
    sr_dataset_free(d);

    /* the wav.scp file itself names the folder */
    snprintf(p, sizeof p, "%s/wav.scp", root);
    d = load_ok(p, SR_DATA_AUTO);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->n, 2);
    sr_dataset_free(d);
}

/* Kaldi segments: offsets and durations from start/end (end -1 = unknown), utt2dur wins,
 * a transcript without a segment is a problem, missing recordings are problems. */
static void test_kaldi_segments(void)
{
    sr_dataset *d = load_ok(FX("kaldi/segments"), SR_DATA_KALDI);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL_FATAL(d->n, 4);
    const char *ids[] = {"rec1-0001", "rec1-0002", "rec2-0001", "rec3-0001"};
    for (size_t i = 0; i < 4; i++) CU_ASSERT_STRING_EQUAL(d->utts[i].id, ids[i]);
    CU_ASSERT_STRING_EQUAL(d->utts[0].audio, "tests/fixtures/eval/kaldi/segments/audio/rec1.wav");
    CU_ASSERT_DOUBLE_EQUAL(d->utts[0].offset_s, 0.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[0].duration_s, 2.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[1].offset_s, 2.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[1].duration_s, 7.5, 0); /* from utt2dur */
    CU_ASSERT_DOUBLE_EQUAL(d->utts[2].offset_s, 1.25, 0);
    CU_ASSERT_DOUBLE_EQUAL(d->utts[2].duration_s, 2.75, 1e-12);
    CU_ASSERT_STRING_EQUAL(d->utts[2].audio, "/abs/missing/rec2.flac");
    CU_ASSERT_STRING_EQUAL(d->utts[1].text, "SECOND PART");
    CU_ASSERT_EQUAL(d->n_problems, 4); /* no audio files in the fixture; rec3 has no segment */
    CU_ASSERT_PTR_NULL(d->utts[3].audio);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d->utts[3].problem);
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[3].problem, "text:4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[3].problem, "segments"));
    sr_dataset_free(d);
}

static void test_trn_dataset(void)
{
    sr_dataset *d = load_ok(FX("trn/ref.trn"), SR_DATA_AUTO);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->format, SR_DATA_TRN);
    CU_ASSERT_EQUAL_FATAL(d->n, 4);
    CU_ASSERT_EQUAL(d->n_problems, 0);
    CU_ASSERT_STRING_EQUAL(d->utts[0].id, "utt-a");
    CU_ASSERT_STRING_EQUAL(d->utts[0].text, "the (uh) answer   is");
    CU_ASSERT_PTR_NULL(d->utts[0].audio);
    CU_ASSERT_STRING_EQUAL(d->utts[3].text, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(d->utts[0].where, "ref.trn:3"));
    CU_ASSERT_EQUAL(sr_dataset_probe_durations(d), SR_OK); /* nothing to probe */
    CU_ASSERT_EQUAL(d->n_problems, 0);
    sr_dataset_free(d);
}

static void test_detect(void)
{
    sr_data_format f;
    CU_ASSERT_EQUAL(sr_dataset_detect(FX("detect/noext_manifest"), &f), SR_OK);
    CU_ASSERT_EQUAL(f, SR_DATA_MANIFEST);
    CU_ASSERT_EQUAL(sr_dataset_detect(FX("detect/noext_trn"), &f), SR_OK);
    CU_ASSERT_EQUAL(f, SR_DATA_TRN);
    CU_ASSERT_EQUAL(sr_dataset_detect(FX("kaldi/pipe"), &f), SR_OK);
    CU_ASSERT_EQUAL(f, SR_DATA_KALDI);
    CU_ASSERT_EQUAL(sr_dataset_detect(FX("kaldi/pipe/text"), &f), SR_OK);
    CU_ASSERT_EQUAL(f, SR_DATA_KALDI);
    CU_ASSERT_EQUAL(sr_dataset_detect(FX("ls_dup"), &f), SR_OK);
    CU_ASSERT_EQUAL(f, SR_DATA_LIBRISPEECH);
    CU_ASSERT_EQUAL(sr_dataset_detect(FX("ls_dup/1/10/1-10.trans.txt"), &f), SR_OK);
    CU_ASSERT_EQUAL(f, SR_DATA_LIBRISPEECH);
    TEST_ASSERT_ERR(sr_dataset_detect(FX("detect/unknown.txt"), &f), SR_ERR_FORMAT, "unknown.txt");
    TEST_ASSERT_ERR(sr_dataset_detect(FX("detect/nope"), &f), SR_ERR_IO, "detect/nope");

    const char *names[] = {"auto", "librispeech", "manifest", "kaldi", "trn"};
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(sr_data_format_parse(names[i], &f), SR_OK);
        CU_ASSERT_EQUAL((int)f, i);
        CU_ASSERT_STRING_EQUAL(sr_data_format_name(f), names[i]);
    }
    CU_ASSERT_EQUAL(sr_data_format_parse("nemo", &f), SR_OK);
    CU_ASSERT_EQUAL(f, SR_DATA_MANIFEST);
    TEST_ASSERT_ERR(sr_data_format_parse("csv", &f), SR_ERR_ARG, "\"csv\" (known: auto, librispeech");
}

/* A trn of n ids u00..u(n-1), written in reverse order. */
static sr_dataset *numbered(size_t n)
{
    char line[64], *buf = calloc(n + 1, sizeof line);
    for (size_t i = n; i-- > 0;) {
        snprintf(line, sizeof line, "W%zu (u%02zu)\n", i, i);
        strcat(buf, line);
    }
    write_text(test_tmppath("numbered.trn"), buf);
    free(buf);
    return load_ok(test_tmppath("numbered.trn"), SR_DATA_TRN);
}

static void test_limit_shard(void)
{
    sr_dataset *d = numbered(10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    sr_dataset_limit(d, 0);
    CU_ASSERT_EQUAL(d->n, 10);
    sr_dataset_limit(d, 4);
    CU_ASSERT_EQUAL_FATAL(d->n, 4);
    CU_ASSERT_STRING_EQUAL(d->utts[0].id, "u00");
    CU_ASSERT_STRING_EQUAL(d->utts[3].id, "u03");
    sr_dataset_limit(d, 40);
    CU_ASSERT_EQUAL(d->n, 4);
    sr_dataset_free(d);

    /* shards 0/3, 1/3, 2/3 partition the set, each in id order */
    int seen[10] = {0};
    size_t sizes[3];
    for (size_t k = 0; k < 3; k++) {
        d = numbered(10);
        CU_ASSERT_PTR_NOT_NULL_FATAL(d);
        CU_ASSERT_EQUAL(sr_dataset_shard(d, k, 3), SR_OK);
        sizes[k] = d->n;
        for (size_t i = 0; i < d->n; i++) {
            int id = atoi(d->utts[i].id + 1);
            CU_ASSERT_EQUAL((size_t)id, k + 3 * i);
            seen[id]++;
        }
        sr_dataset_free(d);
    }
    CU_ASSERT(sizes[0] == 4 && sizes[1] == 3 && sizes[2] == 3);
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(seen[i], 1);

    d = numbered(3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    TEST_ASSERT_ERR(sr_dataset_shard(d, 3, 3), SR_ERR_ARG, "shard 3/3");
    TEST_ASSERT_ERR(sr_dataset_shard(d, 0, 0), SR_ERR_ARG, "shard 0/0");
    CU_ASSERT_EQUAL(d->n, 3);
    CU_ASSERT_EQUAL(sr_dataset_shard(d, 2, 5), SR_OK); /* more shards than utterances */
    CU_ASSERT_EQUAL(d->n, 1);
    sr_dataset_free(d);

    size_t k, n;
    CU_ASSERT_EQUAL(sr_shard_parse("0/4", &k, &n), SR_OK);
    CU_ASSERT(k == 0 && n == 4);
    CU_ASSERT_EQUAL(sr_shard_parse("15/16", &k, &n), SR_OK);
    CU_ASSERT(k == 15 && n == 16);
    const char *bad[] = {"4/4", "1/0", "a/b", "1/", "/2", "-1/2", "1/2x", "1 /2", "", "99999999999999999/2"};
    for (size_t i = 0; i < SR_ARRAY_LEN(bad); i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "\"%s\"", bad[i]);
        TEST_ASSERT_ERR(sr_shard_parse(bad[i], &k, &n), SR_ERR_ARG, needle);
    }
}

static void test_dataset_bad_input(void)
{
    sr_dataset *d = (sr_dataset *)1;
    /* duplicate ids across two transcript files: both lines named */
    TEST_ASSERT_ERR(sr_dataset_load(FX("ls_dup"), SR_DATA_AUTO, &d), SR_ERR_FORMAT,
                    "1-10.trans.txt:2 and tests/fixtures/eval/ls_dup/2/20/2-20.trans.txt:2: "
                    "duplicate utterance id \"1-10-0001\"");
    CU_ASSERT_PTR_NULL(d);
    /* missing audio is not an error */
    d = load_ok(FX("ls_missing"), SR_DATA_LIBRISPEECH);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->n, 2);
    CU_ASSERT_EQUAL(d->n_problems, 2);
    CU_ASSERT_STRING_EQUAL(d->utts[1].text, "");
    sr_dataset_free(d);
    TEST_ASSERT_ERR(sr_dataset_load(FX("textgrid/empty_dir"), SR_DATA_LIBRISPEECH, &d),
                    SR_ERR_FORMAT, "empty_dir: no *.trans.txt");
    TEST_ASSERT_ERR(sr_dataset_load(FX("no/such/folder"), SR_DATA_LIBRISPEECH, &d), SR_ERR_IO,
                    "no/such/folder");
    TEST_ASSERT_ERR(sr_dataset_load(FX("no/such.json"), SR_DATA_MANIFEST, &d), SR_ERR_IO,
                    "no/such.json");
    TEST_ASSERT_ERR(sr_dataset_load(NULL, SR_DATA_AUTO, &d), SR_ERR_ARG, "NULL");
    TEST_ASSERT_ERR(sr_dataset_load(FX("trn/ref.trn"), (sr_data_format)9, &d), SR_ERR_ARG,
                    "format 9");
    /* an id that is not UTF-8 could not come back from the JSON records and results */
    write_text(test_tmppath("bad_id.trn"), "hello there (u1)\nhi (u\xff" "2)\n");
    TEST_ASSERT_ERR(sr_dataset_load(test_tmppath("bad_id.trn"), SR_DATA_TRN, &d), SR_ERR_FORMAT,
                    "bad_id.trn:2: utterance id is not valid UTF-8 (byte 1)");

    /* manifests */
    TEST_ASSERT_ERR(sr_dataset_load(FX("manifest/bad_json.json"), SR_DATA_AUTO, &d),
                    SR_ERR_FORMAT, "bad_json.json:2: not a JSON object");
    TEST_ASSERT_ERR(sr_dataset_load(FX("manifest/bad_notext.json"), SR_DATA_AUTO, &d),
                    SR_ERR_FORMAT, "bad_notext.json:2: field \"text\"");
    TEST_ASSERT_ERR(sr_dataset_load(FX("manifest/bad_duration.json"), SR_DATA_AUTO, &d),
                    SR_ERR_FORMAT, "bad_duration.json:2: field \"duration\"");
    TEST_ASSERT_ERR(sr_dataset_load(FX("manifest/bad_offset.json"), SR_DATA_AUTO, &d),
                    SR_ERR_FORMAT, "bad_offset.json:1: field \"offset\"");
    TEST_ASSERT_ERR(sr_dataset_load(FX("manifest/bad_audio.json"), SR_DATA_AUTO, &d),
                    SR_ERR_FORMAT, "bad_audio.json:1: field \"audio_filepath\"");
    TEST_ASSERT_ERR(sr_dataset_load(FX("manifest/bad_dup.json"), SR_DATA_AUTO, &d),
                    SR_ERR_FORMAT, "bad_dup.json:1 and tests/fixtures/eval/manifest/bad_dup.json:3: "
                                   "duplicate utterance id \"a\"");
    TEST_ASSERT_ERR(sr_dataset_load(FX("manifest/bad_space.json"), SR_DATA_AUTO, &d),
                    SR_ERR_FORMAT, "bad_space.json:1: utterance id \"my file\"");
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), "utt_id"));

    /* Kaldi */
    TEST_ASSERT_ERR(sr_dataset_load(FX("kaldi/pipe"), SR_DATA_AUTO, &d), SR_ERR_UNSUPPORTED,
                    "pipe/wav.scp:2: recording r2: piped commands");
    TEST_ASSERT_ERR(sr_dataset_load(FX("kaldi/stdin"), SR_DATA_KALDI, &d), SR_ERR_UNSUPPORTED,
                    "stdin/wav.scp:2: recording r2: reading audio from stdin");
    TEST_ASSERT_ERR(sr_dataset_load(FX("kaldi/notext"), SR_DATA_KALDI, &d), SR_ERR_FORMAT,
                    "notext/wav.scp:2: recording r2 has no transcript");
    TEST_ASSERT_ERR(sr_dataset_load(FX("kaldi/dup"), SR_DATA_KALDI, &d), SR_ERR_FORMAT,
                    "dup/wav.scp:1 and tests/fixtures/eval/kaldi/dup/wav.scp:3: duplicate id \"r1\"");
    TEST_ASSERT_ERR(sr_dataset_load(FX("kaldi/badseg"), SR_DATA_KALDI, &d), SR_ERR_FORMAT,
                    "badseg/segments:1: expected");
    TEST_ASSERT_ERR(sr_dataset_load(FX("trn"), SR_DATA_KALDI, &d), SR_ERR_IO, "trn/wav.scp");

    /* trn as a dataset */
    TEST_ASSERT_ERR(sr_dataset_load(FX("trn/bad_noid.trn"), SR_DATA_AUTO, &d), SR_ERR_FORMAT,
                    "bad_noid.trn:2:");
    TEST_ASSERT_ERR(sr_dataset_load(FX("trn/bad_dup.trn"), SR_DATA_TRN, &d), SR_ERR_FORMAT,
                    "bad_dup.trn:1 and tests/fixtures/eval/trn/bad_dup.trn:3: duplicate utterance "
                    "id \"u1\"");
    CU_ASSERT_PTR_NULL(d);
}

/* Loads on several threads at once give the same results, and each thread sees its own error
 * message (the detail text is thread-local). Paths are resolved before the threads start
 * (test_fixture itself is not thread-safe). */
typedef struct {
    int bad;
    const char *pipe, *bad_ctm, *segments, *tg_dir, *timeline;
} load_job;

static void *load_worker(void *arg)
{
    const load_job *j = arg;
    long ok = 1;
    for (int i = 0; i < 25 && ok; i++) {
        sr_dataset *d = NULL;
        sr_alignments *a = NULL;
        sr_timelines *t = NULL;
        if (j->bad) {
            ok = sr_dataset_load(j->pipe, SR_DATA_KALDI, &d) == SR_ERR_UNSUPPORTED &&
                 strstr(sr_last_error(), "pipe/wav.scp:2") != NULL;
            ok = ok && sr_alignments_load(j->bad_ctm, &a) == SR_ERR_FORMAT &&
                 strstr(sr_last_error(), "bad_dur.ctm:2") != NULL;
            continue;
        }
        ok = sr_dataset_load(j->segments, SR_DATA_KALDI, &d) == SR_OK && d->n == 4 &&
             d->n_problems == 4 && !strcmp(d->utts[2].id, "rec2-0001");
        ok = ok && sr_alignments_load(j->tg_dir, &a) == SR_OK && a->n == 2 && a->utts[0].n == 3;
        ok = ok && sr_timelines_read(j->timeline, &t) == SR_OK && t->n == 2;
        sr_dataset_free(d);
        sr_alignments_free(a);
        sr_timelines_free(t);
    }
    return (void *)ok;
}

static void test_concurrent_loads(void)
{
    enum { N = 4 };
    pthread_t th[N];
    load_job jobs[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (load_job){i == 1, FX("kaldi/pipe"), FX("ctm/bad_dur.ctm"), FX("kaldi/segments"),
                             FX("textgrid/dir"), FX("timeline/good.jsonl")};
    }
    for (int i = 0; i < N; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, load_worker, &jobs[i]), 0);
    for (int i = 0; i < N; i++) {
        void *ok;
        pthread_join(th[i], &ok);
        CU_ASSERT_PTR_NOT_NULL(ok);
    }
}

/* ---- eval_wordtimes ----------------------------------------------------------------------- */

static void check_word(const sr_word_time *w, const char *word, double a, double b)
{
    CU_ASSERT_STRING_EQUAL(w->word, word);
    CU_ASSERT_DOUBLE_EQUAL(w->start_s, a, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(w->end_s, b, 1e-12);
}

static void test_ctm(void)
{
    sr_alignments *a = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_alignments_load(FX("ctm/good.ctm"), &a), SR_OK);
    CU_ASSERT_EQUAL_FATAL(a->n, 2);
    const sr_utt_words *u = sr_alignments_find(a, "uttA");
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    CU_ASSERT_EQUAL_FATAL(u->n, 2);
    check_word(&u->words[0], "HELLO", 0.3, 0.7);
    check_word(&u->words[1], "THERE", 0.8, 1.0);
    CU_ASSERT_PTR_NOT_NULL(strstr(u->where, "good.ctm:3"));
    u = sr_alignments_find(a, "uttB");
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    CU_ASSERT_EQUAL_FATAL(u->n, 2); /* sorted by start although listed later */
    check_word(&u->words[0], "HELLO", 0.1, 0.4);
    check_word(&u->words[1], "WORLD", 0.5, 0.75);
    CU_ASSERT_PTR_NOT_NULL(strstr(u->where, "good.ctm:2"));
    CU_ASSERT_PTR_NULL(sr_alignments_find(a, "uttC"));
    sr_alignments_free(a);

    TEST_ASSERT_ERR(sr_alignments_load(FX("ctm/bad_fields.ctm"), &a), SR_ERR_FORMAT,
                    "bad_fields.ctm:2: expected \"utt channel start duration word\", got 4 fields");
    CU_ASSERT_PTR_NULL(a);
    TEST_ASSERT_ERR(sr_alignments_load(FX("ctm/bad_start.ctm"), &a), SR_ERR_FORMAT,
                    "bad_start.ctm:2: start \"zero\"");
    TEST_ASSERT_ERR(sr_alignments_load(FX("ctm/bad_dur.ctm"), &a), SR_ERR_FORMAT,
                    "bad_dur.ctm:2: duration \"-0.2\"");
    TEST_ASSERT_ERR(sr_alignments_load(FX("ctm/bad_nan.ctm"), &a), SR_ERR_FORMAT,
                    "bad_nan.ctm:2: start \"nan\"");
    TEST_ASSERT_ERR(sr_alignments_load(FX("ctm/none.ctm"), &a), SR_ERR_IO, "ctm/none.ctm");
    TEST_ASSERT_ERR(sr_alignments_load(NULL, &a), SR_ERR_ARG, "NULL");
}

static void test_textgrid(void)
{
    sr_alignments *a = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_alignments_load(FX("textgrid/dir/spk1/utt-long.TextGrid"), &a), SR_OK);
    CU_ASSERT_EQUAL_FATAL(a->n, 1);
    const sr_utt_words *u = &a->utts[0];
    CU_ASSERT_STRING_EQUAL(u->id, "utt-long");
    CU_ASSERT_EQUAL_FATAL(u->n, 3); /* "" and "   " are silences; the phones tier is ignored */
    check_word(&u->words[0], "hello", 0.31, 0.72);
    check_word(&u->words[1], "say \"hi\"", 1.05, 1.6);
    check_word(&u->words[2], "world", 1.6, 2.5);
    sr_alignments_free(a);

    CU_ASSERT_EQUAL_FATAL(sr_alignments_load(FX("textgrid/dir/spk2/utt-short.TextGrid"), &a), SR_OK);
    CU_ASSERT_EQUAL_FATAL(a->n, 1);
    u = &a->utts[0];
    CU_ASSERT_STRING_EQUAL(u->id, "utt-short");
    CU_ASSERT_EQUAL_FATAL(u->n, 2);
    check_word(&u->words[0], "good", 0.2, 0.7);
    check_word(&u->words[1], "morning", 0.7, 1.2);
    sr_alignments_free(a);

    CU_ASSERT_EQUAL_FATAL(sr_alignments_load(FX("textgrid/dir"), &a), SR_OK);
    CU_ASSERT_EQUAL_FATAL(a->n, 2);
    CU_ASSERT_STRING_EQUAL(a->utts[0].id, "utt-long");
    CU_ASSERT_STRING_EQUAL(a->utts[1].id, "utt-short");
    CU_ASSERT_EQUAL(sr_alignments_find(a, "utt-short")->n, 2);
    sr_alignments_free(a);
}

/* TextGrids written by praatio (MFA's writer) in both formats, against praatio's own reading
 * of them (expected.ctm, scripts/gen_textgrid_fixtures.py). */
static void test_textgrid_praatio(void)
{
    sr_alignments *tg = NULL, *ref = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_alignments_load(FX("textgrid/praatio"), &tg), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_alignments_load(FX("textgrid/praatio/expected.ctm"), &ref), SR_OK);
    CU_ASSERT_EQUAL_FATAL(tg->n, 2);
    CU_ASSERT_EQUAL_FATAL(ref->n, 2);
    size_t words = 0;
    for (size_t i = 0; i < ref->n; i++) {
        const sr_utt_words *a = &tg->utts[i], *b = &ref->utts[i];
        CU_ASSERT_STRING_EQUAL(a->id, b->id);
        CU_ASSERT_EQUAL_FATAL(a->n, b->n);
        for (size_t k = 0; k < a->n; k++, words++) {
            CU_ASSERT_STRING_EQUAL(a->words[k].word, b->words[k].word);
            CU_ASSERT_DOUBLE_EQUAL(a->words[k].start_s, b->words[k].start_s, 1e-12);
            CU_ASSERT_DOUBLE_EQUAL(a->words[k].end_s, b->words[k].end_s, 1e-12);
        }
    }
    CU_ASSERT_EQUAL(words, 9);
    sr_alignments_free(tg);
    sr_alignments_free(ref);
}

static void test_textgrid_bad(void)
{
    sr_alignments *a = NULL;
    static const struct { const char *file, *needle; } cases[] = {
        {"textgrid/bad/no_words.TextGrid", "no_words.TextGrid: no IntervalTier named \"words\""},
        {"textgrid/bad/two_words.TextGrid", "two_words.TextGrid:37: a second words tier (\"words\"; the first is on line 11)"},
        {"textgrid/bad/backwards.TextGrid", "backwards.TextGrid:20: interval [0.31, 0.2]"},
        {"textgrid/bad/truncated.TextGrid", "truncated.TextGrid:25: expected interval xmax (a "
                                            "number), found end of file"},
        {"textgrid/bad/badnum.TextGrid", "badnum.TextGrid:29: \"1.6x\" is not a number"},
        {"textgrid/bad/unterminated.TextGrid", "unterminated.TextGrid:34: string not terminated"},
        {"textgrid/bad/binary.TextGrid", "binary.TextGrid:1: file type \"ooBinaryFile\""},
        {"textgrid/bad/badclass.TextGrid", "badclass.TextGrid:8: tier class \"PointTier\""},
        {"textgrid/bad/overlap.TextGrid", "overlap.TextGrid:26: interval [0.5, 1.2] starts before"},
        {"textgrid/dupdir", "a/x.TextGrid and tests/fixtures/eval/textgrid/dupdir/b/x.TextGrid: "
                            "duplicate utterance id \"x\""},
        {"textgrid/empty_dir", "empty_dir: no *.TextGrid"},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(cases); i++) {
        char path[512];
        snprintf(path, sizeof path, "tests/fixtures/eval/%s", cases[i].file);
        TEST_ASSERT_ERR(sr_alignments_load(path, &a), SR_ERR_FORMAT, cases[i].needle);
        CU_ASSERT_PTR_NULL(a);
    }
    /* UTF-16 (Praat writes it for non-ASCII text) and NUL bytes */
    const char *p = test_tmppath("utf16.TextGrid");
    FILE *f = fopen(p, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite("\xff\xfe" "F\0i\0", 1, 6, f);
    fclose(f);
    TEST_ASSERT_ERR(sr_alignments_load(p, &a), SR_ERR_FORMAT, "utf16.TextGrid: UTF-16");
    p = test_tmppath("nul.TextGrid");
    f = fopen(p, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite("File\0type", 1, 9, f);
    fclose(f);
    TEST_ASSERT_ERR(sr_alignments_load(p, &a), SR_ERR_FORMAT, "nul.TextGrid: NUL byte");
}

static void test_alignments_for_dataset(void)
{
    write_text(test_tmppath("ab.trn"), "X (uttA)\nY (uttC)\nZ (uttB)\n");
    sr_dataset *d = load_ok(test_tmppath("ab.trn"), SR_DATA_TRN);
    sr_alignments *a = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_alignments_load(FX("ctm/good.ctm"), &a), SR_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    const sr_utt_words *per[3];
    size_t missing = 99;
    sr_alignments_for_dataset(a, d, per, &missing);
    CU_ASSERT_EQUAL(missing, 1);
    CU_ASSERT_PTR_EQUAL(per[0], sr_alignments_find(a, "uttA"));
    CU_ASSERT_PTR_EQUAL(per[1], sr_alignments_find(a, "uttB"));
    CU_ASSERT_PTR_NULL(per[2]);
    sr_alignments_free(a);
    sr_dataset_free(d);
}

/* The generated aligned speech set: LibriSpeech layout + CTM, every utterance aligned, the
 * CTM words equal to the transcript words, and the last word ends inside the audio. Reuses the
 * copy that suite `data` generated in this run, else generates one (about 10 s). */
static void test_aligned_speech_set(void)
{
    char stamp[1024], cmd[2048];
    const char *dir = test_tmppath("speech-a");
    snprintf(stamp, sizeof stamp, "%s/.stamp", dir);
    if (!file_exists(stamp)) {
        if (system("command -v espeak-ng >/dev/null && command -v flac >/dev/null && "
                   "/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
            TEST_SKIP("espeak-ng, flac or python3-numpy missing (make setup installs them)");
            return;
        }
        dir = test_tmppath("eval-speech");
        snprintf(cmd, sizeof cmd, "bash scripts/make_aligned_speech.sh %s >/dev/null 2>&1", dir);
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    }
    sr_dataset *d = load_ok(dir, SR_DATA_AUTO);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->format, SR_DATA_LIBRISPEECH);
    CU_ASSERT_EQUAL(d->n, 24);
    CU_ASSERT_EQUAL(d->n_problems, 0);
    CU_ASSERT_EQUAL(sr_dataset_probe_durations(d), SR_OK);
    char ctm[1024];
    snprintf(ctm, sizeof ctm, "%s/alignments.ctm", dir);
    sr_alignments *a = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_alignments_load(ctm, &a), SR_OK);
    const sr_utt_words **per = calloc(d->n, sizeof *per);
    size_t missing = 99, words = 0;
    sr_alignments_for_dataset(a, d, per, &missing);
    CU_ASSERT_EQUAL(missing, 0);
    for (size_t i = 0; i < d->n; i++) {
        if (!per[i]) continue;
        char *text = strdup(d->utts[i].text), *save = NULL;
        size_t k = 0;
        for (char *w = strtok_r(text, " ", &save); w; w = strtok_r(NULL, " ", &save), k++) {
            CU_ASSERT_FATAL(k < per[i]->n);
            CU_ASSERT_STRING_EQUAL(per[i]->words[k].word, w);
            if (k) CU_ASSERT(per[i]->words[k].start_s >= per[i]->words[k - 1].end_s);
        }
        CU_ASSERT_EQUAL(k, per[i]->n);
        CU_ASSERT(per[i]->words[per[i]->n - 1].end_s <= d->utts[i].duration_s + 1e-9);
        words += k;
        free(text);
    }
    printf("\n      aligned speech set: %zu utterances, %zu aligned words, %.1f s ", d->n, words,
           sr_dataset_total_duration(d));
    CU_ASSERT_EQUAL(words, 330);
    free(per);
    sr_alignments_free(a);
    sr_dataset_free(d);
}

/* ---- eval_timeline_io --------------------------------------------------------------------- */

static void test_trn_read(void)
{
    sr_texts *t = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_trn_read(FX("trn/ref.trn"), &t), SR_OK);
    CU_ASSERT_EQUAL_FATAL(t->n, 4);
    const char *ids[] = {"utt-a", "utt-b", "utt-c", "utt-empty"};
    const char *texts[] = {"the (uh) answer   is", "HELLO WORLD", "TEXT WITH TAB", ""};
    for (size_t i = 0; i < 4; i++) {
        CU_ASSERT_STRING_EQUAL(t->items[i].id, ids[i]);
        CU_ASSERT_STRING_EQUAL(t->items[i].text, texts[i]);
        CU_ASSERT_PTR_EQUAL(sr_texts_find(t, ids[i]), &t->items[i]);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(t->items[1].where, "ref.trn:1"));
    CU_ASSERT_PTR_NULL(sr_texts_find(t, "utt-z"));
    sr_texts_free(t);

    t = (sr_texts *)1;
    TEST_ASSERT_ERR(sr_trn_read(FX("trn/bad_noid.trn"), &t), SR_ERR_FORMAT,
                    "bad_noid.trn:2: expected \"text (utt_id)\"");
    CU_ASSERT_PTR_NULL(t);
    TEST_ASSERT_ERR(sr_trn_read(FX("trn/bad_dup.trn"), &t), SR_ERR_FORMAT,
                    "bad_dup.trn:1 and tests/fixtures/eval/trn/bad_dup.trn:3");
    TEST_ASSERT_ERR(sr_trn_read(FX("trn/bad_space_id.trn"), &t), SR_ERR_FORMAT,
                    "bad_space_id.trn:2: utterance id \"u 2\"");
    TEST_ASSERT_ERR(sr_trn_read(FX("trn/bad_empty_id.trn"), &t), SR_ERR_FORMAT,
                    "bad_empty_id.trn:2: utterance id \"\"");
    TEST_ASSERT_ERR(sr_trn_read(FX("trn/absent.trn"), &t), SR_ERR_IO, "absent.trn");
    /* a binary file: NUL byte named with its line */
    const char *p = test_tmppath("nul.trn");
    FILE *f = fopen(p, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite("a (u1)\nb\0 (u2)\n", 1, 15, f);
    fclose(f);
    TEST_ASSERT_ERR(sr_trn_read(p, &t), SR_ERR_FORMAT, "nul.trn:2: NUL byte");
    /* UTF-8 BOM and CRLF line ends are accepted */
    write_text(test_tmppath("bom.trn"), "\xef\xbb\xbfHELLO (u1)\r\nWORLD (u2)\r\n");
    CU_ASSERT_EQUAL_FATAL(sr_trn_read(test_tmppath("bom.trn"), &t), SR_OK);
    CU_ASSERT_EQUAL(t->n, 2);
    CU_ASSERT_STRING_EQUAL(t->items[0].id, "u1");
    CU_ASSERT_STRING_EQUAL(t->items[1].text, "WORLD");
    sr_texts_free(t);
}

/* No "name.tmp.*" left next to a file written atomically. */
static int temp_files_left(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

/* JSON text stays UTF-8 whatever bytes an id or a path holds (Linux names may hold any byte but
 * '/' and NUL): the literal writer and sr_json_print make each maximal ill-formed subpart
 * U+FFFD, escape what JSON needs, and leave valid text as it is. */
static void test_json_strings(void)
{
    sr_strbuf b = {0};
    CU_ASSERT_EQUAL(sr_strbuf_append(&b, "x", 1), SR_OK); /* the repair starts at the literal */
    CU_ASSERT_EQUAL(sr_json_append_string(&b, "a\xff\"b\xe2\x82\n\xc3\xa9"), SR_OK);
    CU_ASSERT_STRING_EQUAL(b.data, "x\"a\xef\xbf\xbd\\\"b\xef\xbf\xbd\\n\xc3\xa9\"");
    sr_strbuf_free(&b);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "file", "/tmp/a\xff\xfe\xc3\xa9.wav");
    cJSON_AddStringToObject(j, "ok", "\xe6\x97\xa5\xf0\x9f\x98\x80");
    for (int pretty = 0; pretty < 2; pretty++) {
        char *t = sr_json_print(j, pretty);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        cJSON *back = cJSON_Parse(t);
        CU_ASSERT_PTR_NOT_NULL_FATAL(back);
        CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(back, "file")),
                               "/tmp/a\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9.wav");
        CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(back, "ok")),
                               "\xe6\x97\xa5\xf0\x9f\x98\x80");
        CU_ASSERT_EQUAL(pretty, strchr(t, '\n') != NULL);
        cJSON_Delete(back);
        free(t);
    }
    cJSON_Delete(j);
}

static void test_trn_write(void)
{
    const char *ids[] = {"b", "a", "c"};
    const char *texts[] = {"  two\twords\n", "one", ""};
    const char *p = test_tmppath("out.trn");
    write_text(p, "old contents\n");
    CU_ASSERT_EQUAL_FATAL(sr_trn_write(p, ids, texts, 3), SR_OK);
    char *data;
    CU_ASSERT_EQUAL_FATAL(sr_read_file(p, &data, NULL), SR_OK);
    CU_ASSERT_STRING_EQUAL(data, "two words (b)\none (a)\n(c)\n");
    free(data);
    CU_ASSERT_EQUAL(temp_files_left(test_tmpdir()), 0);
    sr_texts *t;
    CU_ASSERT_EQUAL_FATAL(sr_trn_read(p, &t), SR_OK);
    CU_ASSERT_EQUAL(t->n, 3);
    CU_ASSERT_STRING_EQUAL(sr_texts_find(t, "b")->text, "two words");
    CU_ASSERT_STRING_EQUAL(sr_texts_find(t, "c")->text, "");
    sr_texts_free(t);

    const char *bad_ids[] = {"ok", "has space"};
    TEST_ASSERT_ERR(sr_trn_write(p, bad_ids, texts, 2), SR_ERR_ARG, "\"has space\"");
    const char *paren[] = {"x(1)"};
    TEST_ASSERT_ERR(sr_trn_write(p, paren, texts, 1), SR_ERR_ARG, "\"x(1)\"");
    /* failed writes leave the previous file untouched */
    CU_ASSERT_EQUAL_FATAL(sr_read_file(p, &data, NULL), SR_OK);
    CU_ASSERT_STRING_EQUAL(data, "two words (b)\none (a)\n(c)\n");
    free(data);
    TEST_ASSERT_ERR(sr_trn_write(test_tmppath("no-dir/out.trn"), ids, texts, 3), SR_ERR_IO,
                    "no-dir/out.trn");
    sr_strbuf b = {0};
    TEST_ASSERT_ERR(sr_trn_append(&b, "", "x"), SR_ERR_ARG, "\"\"");
    sr_strbuf_free(&b);
}

static void test_timeline_read(void)
{
    sr_timelines *t = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_timelines_read(FX("timeline/good.jsonl"), &t), SR_OK);
    CU_ASSERT_EQUAL_FATAL(t->n, 2);
    const sr_utt_timeline *u = sr_timelines_find(t, "u1");
    CU_ASSERT_PTR_EQUAL_FATAL(u, &t->utts[0]);
    CU_ASSERT_EQUAL_FATAL(u->n, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(u->where, "good.jsonl:4"));
    CU_ASSERT_DOUBLE_EQUAL(u->points[0].t_ms, 0, 0);
    CU_ASSERT_STRING_EQUAL(u->points[0].text, "");
    CU_ASSERT_EQUAL(u->points[0].n_stable, 0);
    CU_ASSERT_STRING_EQUAL(u->points[1].text, "the \"cat\"");
    CU_ASSERT_EQUAL(u->points[1].n_stable, 1);
    CU_ASSERT_EQUAL(u->points[1].is_final, 0);
    CU_ASSERT_DOUBLE_EQUAL(u->points[2].t_ms, 1200.5, 0);
    CU_ASSERT_EQUAL(u->points[2].n_stable, 3);
    CU_ASSERT_EQUAL(u->points[2].is_final, 1);
    CU_ASSERT_DOUBLE_EQUAL(u->points[2].compute_ms, 12.25, 0);
    CU_ASSERT(u->points[1].compute_ms < 0);
    u = sr_timelines_find(t, "u2");
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    CU_ASSERT_EQUAL_FATAL(u->n, 2);
    CU_ASSERT_EQUAL(u->points[0].n_stable, -1);
    CU_ASSERT_STRING_EQUAL(u->points[1].text, "good morning");
    CU_ASSERT_PTR_NULL(sr_timelines_find(t, "u3"));
    sr_timelines_free(t);

    static const struct { const char *file, *needle; } cases[] = {
        {"bad_json.jsonl", "bad_json.jsonl:2: not a JSON object"},
        {"bad_order.jsonl", "bad_order.jsonl:2: utterance u1: t_ms 400 is earlier than 500 on line 1"},
        {"bad_split.jsonl", "bad_split.jsonl:1 and tests/fixtures/eval/timeline/bad_split.jsonl:3: "
                            "entries of one utterance must be contiguous"},
        {"bad_stable.jsonl", "bad_stable.jsonl:2: field \"n_stable\""},
        {"bad_tms.jsonl", "bad_tms.jsonl:1: field \"t_ms\""},
        {"bad_noutt.jsonl", "bad_noutt.jsonl:2: field \"utt\""},
        {"bad_negative.jsonl", "bad_negative.jsonl:1: field \"t_ms\""},
        {"bad_text.jsonl", "bad_text.jsonl:1: field \"text\""},
        {"bad_final.jsonl", "bad_final.jsonl:1: field \"final\""},
        {"bad_array.jsonl", "bad_array.jsonl:1: not a JSON object"},
        {"bad_trailing.jsonl", "bad_trailing.jsonl:1: not a JSON object"},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(cases); i++) {
        char path[512];
        snprintf(path, sizeof path, "tests/fixtures/eval/timeline/%s", cases[i].file);
        t = (sr_timelines *)1;
        TEST_ASSERT_ERR(sr_timelines_read(path, &t), SR_ERR_FORMAT, cases[i].needle);
        CU_ASSERT_PTR_NULL(t);
    }
    TEST_ASSERT_ERR(sr_timelines_read(FX("timeline/absent.jsonl"), &t), SR_ERR_IO, "absent.jsonl");
    /* strings that are not UTF-8 (JSON text is; srkit writes them so): refused, naming the byte */
    write_text(test_tmppath("bad_utf8.jsonl"), "{\"utt\": \"u1\", \"t_ms\": 0, \"text\": \"ok\"}\n"
                                               "{\"utt\": \"u1\", \"t_ms\": 5, \"text\": \"the \xff cat\"}\n");
    TEST_ASSERT_ERR(sr_timelines_read(test_tmppath("bad_utf8.jsonl"), &t), SR_ERR_FORMAT,
                    "bad_utf8.jsonl:2: field \"text\" is not valid UTF-8 (byte 4)");
    write_text(test_tmppath("bad_utf8_id.jsonl"), "{\"utt\": \"u\xc3\", \"t_ms\": 0, \"text\": \"ok\"}\n");
    TEST_ASSERT_ERR(sr_timelines_read(test_tmppath("bad_utf8_id.jsonl"), &t), SR_ERR_FORMAT,
                    "bad_utf8_id.jsonl:1: field \"utt\" is not valid UTF-8 (byte 1)");
    /* an empty file is an empty set */
    write_text(test_tmppath("empty.jsonl"), "");
    CU_ASSERT_EQUAL_FATAL(sr_timelines_read(test_tmppath("empty.jsonl"), &t), SR_OK);
    CU_ASSERT_EQUAL(t->n, 0);
    CU_ASSERT_PTR_NULL(sr_timelines_find(t, "u1"));
    sr_timelines_free(t);
}

static void test_timeline_write(void)
{
    sr_strbuf b = {0};
    sr_tl_point p = {.t_ms = 1200, .text = "say \"hi\"\n\tnow\x01", .n_stable = 3, .compute_ms = -1};
    CU_ASSERT_EQUAL_FATAL(sr_timeline_append(&b, "u1", &p), SR_OK);
    CU_ASSERT_STRING_EQUAL(b.data, "{\"utt\": \"u1\", \"t_ms\": 1200, \"text\": \"say \\\"hi\\\"\\n\\tnow"
                                   "\\u0001\", \"n_stable\": 3}\n");
    sr_strbuf_clear(&b);
    p = (sr_tl_point){.t_ms = 0.1, .text = "caf\xc3\xa9", .n_stable = -1, .is_final = 1,
                      .compute_ms = 2.5};
    CU_ASSERT_EQUAL_FATAL(sr_timeline_append(&b, "u2", &p), SR_OK);
    CU_ASSERT_STRING_EQUAL(b.data, "{\"utt\": \"u2\", \"t_ms\": 0.1, \"text\": \"caf\xc3\xa9\", "
                                   "\"final\": true, \"compute_ms\": 2.5}\n");
    p.t_ms = -1;
    TEST_ASSERT_ERR(sr_timeline_append(&b, "u2", &p), SR_ERR_ARG, "utterance u2: t_ms");
    p.t_ms = NAN;
    TEST_ASSERT_ERR(sr_timeline_append(&b, "u2", &p), SR_ERR_ARG, "t_ms");
    TEST_ASSERT_ERR(sr_timeline_append(&b, "", &p), SR_ERR_ARG, "utterance id is empty");
    sr_strbuf_free(&b);

    /* read -> write -> read gives the same timelines */
    sr_timelines *t = NULL, *t2 = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_timelines_read(FX("timeline/good.jsonl"), &t), SR_OK);
    const char *out = test_tmppath("timeline.jsonl");
    CU_ASSERT_EQUAL_FATAL(sr_timelines_write(out, t), SR_OK);
    CU_ASSERT_EQUAL(temp_files_left(test_tmpdir()), 0);
    CU_ASSERT_EQUAL_FATAL(sr_timelines_read(out, &t2), SR_OK);
    CU_ASSERT_EQUAL_FATAL(t2->n, t->n);
    for (size_t i = 0; i < t->n; i++) {
        CU_ASSERT_STRING_EQUAL(t2->utts[i].id, t->utts[i].id);
        CU_ASSERT_EQUAL_FATAL(t2->utts[i].n, t->utts[i].n);
        for (size_t k = 0; k < t->utts[i].n; k++) {
            const sr_tl_point *a = &t->utts[i].points[k], *c = &t2->utts[i].points[k];
            CU_ASSERT_DOUBLE_EQUAL(a->t_ms, c->t_ms, 0);
            CU_ASSERT_STRING_EQUAL(a->text, c->text);
            CU_ASSERT_EQUAL(a->n_stable, c->n_stable);
            CU_ASSERT_EQUAL(a->is_final, c->is_final);
            CU_ASSERT_DOUBLE_EQUAL(a->compute_ms, c->compute_ms, 0);
        }
    }
    /* a value that needs 17 digits survives the round trip */
    t->utts[0].points[2].t_ms = 1.0 / 3.0;
    t->utts[0].points[1].t_ms = 0;
    CU_ASSERT_EQUAL_FATAL(sr_timelines_write(out, t), SR_OK);
    sr_timelines_free(t2);
    CU_ASSERT_EQUAL_FATAL(sr_timelines_read(out, &t2), SR_OK);
    CU_ASSERT_DOUBLE_EQUAL(t2->utts[0].points[2].t_ms, 1.0 / 3.0, 0);
    sr_timelines_free(t2);
    TEST_ASSERT_ERR(sr_timelines_write(test_tmppath("no-dir/timeline.jsonl"), t), SR_ERR_IO,
                    "no-dir/timeline.jsonl");
    sr_timelines_free(t);
}

void test_register_eval_data(void)
{
    TEST_SUITE("eval_dataset", {"librispeech_layout", test_librispeech_layout},
               {"librispeech_flat", test_librispeech_flat},
               {"librispeech_shared", test_librispeech_shared}, {"manifest", test_manifest},
               {"manifest_missing", test_manifest_missing}, {"kaldi", test_kaldi},
               {"kaldi_segments", test_kaldi_segments}, {"trn_dataset", test_trn_dataset},
               {"detect", test_detect}, {"limit_shard", test_limit_shard},
               {"bad_input", test_dataset_bad_input},
               {"concurrent_loads", test_concurrent_loads});
    TEST_SUITE("eval_wordtimes", {"ctm", test_ctm}, {"textgrid", test_textgrid},
               {"textgrid_praatio", test_textgrid_praatio}, {"textgrid_bad", test_textgrid_bad},
               {"for_dataset", test_alignments_for_dataset},
               {"aligned_speech_set", test_aligned_speech_set});
    TEST_SUITE("eval_timeline_io", {"trn_read", test_trn_read}, {"trn_write", test_trn_write},
               {"timeline_read", test_timeline_read}, {"timeline_write", test_timeline_write},
               {"json_strings", test_json_strings});
}
