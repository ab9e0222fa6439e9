/*
 * test.h — shared helpers for the CUnit suites. Each tests/test_<x>.c defines one
 * `void test_register_<x>(void)` that adds its suites (named <area>_<topic>); tests/main.c
 * calls every one that is linked in.
 */
#ifndef SR_TEST_H
#define SR_TEST_H

#include <CUnit/CUnit.h>
#include <stdio.h>

#include "../core/sr.h"
#include "../core/weights.h"
#include "../kernels/kernels.h"

/* Path of tests/fixtures/<name> (the runner starts in the repository root). Static buffer per
 * call site is not needed: the result is malloc'ed once per name and kept. */
const char *test_fixture(const char *name);

/* Path of ../shared/data/<rel> when it exists, else NULL (the caller skips with a message). */
const char *test_shared(const char *rel);

/* Path of the real whisper-tiny.en.h5 ($SRKIT_HOME/models, else ~/.cache/srkit/models) when it
 * exists (`make models`), else NULL (the caller skips with a message). */
const char *test_tiny_en_path(void);

/* Path of model `file` ($SRKIT_HOME/models, else ~/.cache/srkit/models) when it exists, else
 * NULL. The string stays valid for the next three calls. */
const char *test_model_path(const char *file);

/* A copy of model fixture `fixture` in the temp dir as out_name, with the object at HDF5 path
 * `drop` deleted and / or the config attribute replaced by `config` (each NULL: unchanged),
 * sealed again (sr_h5_seal) so that the edit, not the digest, is what the loader meets. NULL on
 * failure. */
const char *test_model_copy(const char *fixture, const char *out_name, const char *drop,
                            const char *config);

/* A fresh per-run temporary directory (created once, removed at exit) and a path inside it. */
const char *test_tmpdir(void);
const char *test_tmppath(const char *name);

/* Print a skip line that CI logs show; use `TEST_SKIP("why"); return;`. */
#define TEST_SKIP(why) printf("\n    SKIP %s: %s\n      ", __func__, (why))

/* Assert a status and that sr_last_error() contains `needle` (the culprit's name). */
#define TEST_ASSERT_ERR(call, want_status, needle)                                        \
    do {                                                                                  \
        sr_status st_ = (call);                                                           \
        CU_ASSERT_EQUAL(st_, (want_status));                                              \
        if (st_ != (want_status) || !strstr(sr_last_error(), (needle))) {                 \
            printf("\n      %s:%d: status %d (%s), message \"%s\", wanted %d containing \"%s\"\n", \
                   __FILE__, __LINE__, (int)st_, sr_strerror(st_), sr_last_error(),       \
                   (int)(want_status), (needle));                                         \
            CU_FAIL("error status or message");                                           \
        }                                                                                 \
    } while (0)

/* Read dataset `path` of a golden fixture into *out (zeroed first), converted to t; asserts
 * success and prints the path and message on failure. Returns 1 on success. */
int test_golden(sr_h5 *f, const char *path, sr_dtype t, sr_tensor *out);

/* The golden's /audio (int16 samples stored as integers) as floats in [-1, 1): what the
 * generator fed the reference. *n samples; malloc'ed; NULL on failure. */
float *test_golden_audio(sr_h5 *f, size_t *n);

/* The device the model-level suites run on: $SRKIT_TEST_DEVICE ("cuda", "cpu-guard", ...), or
 * NULL (the CPU) when unset or empty. CI leaves it unset; on a GPU machine
 * `SRKIT_TEST_DEVICE=cuda build/test_srkit whisper_parity ...` checks the device path against
 * the same goldens, and "cpu-guard" (kernels/cpu/guard.c) proves on any machine that a test
 * reads and writes table memory only through its table. */
const char *test_device(void);

/* Load model file `path` with default options but device test_device(); a failure prints the
 * message and ends the test (CU_ASSERT_..._FATAL). */
sr_model *test_load_path(const char *path);

/* Load model fixture tests/fixtures/<name> as test_load_path does. */
sr_model *test_load_model(const char *name);

/* test_load_path with options precision `precision` (NULL: the default, "f32"). */
sr_model *test_load_prec(const char *path, const char *precision);

/* The golden-parity tolerance of precision "bf16" (issue 11's fast mode: every product's two
 * operands rounded to bf16, unit roundoff 2^-9 each, f32 sums): 2^SR_TEST_BF16_TOL_EXP of the
 * golden tensor's largest magnitude, for every tensor a parity suite compares (encoder outputs,
 * logits). Rounding errors of 2^-8 per product compound over the layers; what the suites
 * measure is printed next to this bound. Tokens are compared exactly. */
#define SR_TEST_BF16_TOL_EXP (-6)
double test_bf16_tol(const float *want, size_t n);

/* n floats of table memory p (of table k) copied to a malloc'ed host array (free with free()):
 * how a test reads what a model computed wherever the table keeps it. A failure ends the
 * test. */
float *test_table_copy(const sr_kernels *k, const float *p, size_t n);

/* n floats of new table memory of k, cleared to 0 (k->zero: a device's fresh memory holds
 * garbage), for the outputs of a backend's internal functions. A failure ends the test. Free
 * with k->free. */
float *test_table_alloc(const sr_kernels *k, size_t n);

/* Max |table_ptr - host_ref| over n floats, table_ptr being table memory of k (test_max_abs_diff
 * over its host copy). */
double test_max_abs_diff_table(const sr_kernels *k, const float *table_ptr, const float *host_ref,
                               size_t n);

/* One stream of m (cfg may be NULL) over audio a[n], fed in pieces of 7000 samples, then
 * finished: its tokens (up to cap) into tok, the count returned, its timeline length in
 * *n_entries. Failures are test failures (open: fatal). */
int test_stream_tokens(const sr_model *m, const sr_stream_config *cfg, const float *a, size_t n,
                       int32_t *tok, int cap, size_t *n_entries);

/* The three backends' fixtures (FastConformer RNN-T / TDT with greedy, beam, offline, f16
 * caches; Voxtral with f32 / bf16 caches; Whisper whisperrt stable_greedy / stable_beam,
 * reencode local_agreement, offline aed_beam) loaded on `device` stream the CPU's tokens and
 * timeline length (test_stream_tokens over one generated signal). */
void test_backends_match_cpu(const char *device);

/* Open golden fixture tests/fixtures/<name> as plain HDF5 (sr_h5_open_plain); a failure prints
 * the message and ends the test. */
sr_h5 *test_open_golden(const char *name);

/* Run the shell command printf(fmt, ...) with stderr joined to stdout; the output goes to out
 * (NUL-terminated, truncated to cap; the rest is read and dropped). Returns the exit status, -1
 * when the command could not start or did not exit normally. */
int test_run(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Whether /usr/bin/python3 imports numpy and h5py (what the repository's scripts need); asked
 * once. */
int test_python_ok(void);

/* Max |a - b| over n floats. */
double test_max_abs_diff(const float *a, const float *b, size_t n);

/* Register a suite with its tests: TEST_SUITE("core_api", NULL, NULL, {"name", fn}, ...). */
typedef struct { const char *name; void (*fn)(void); } test_case;
void test_add_suite(const char *name, const test_case *cases, size_t n);
#define TEST_SUITE(name, ...)                                                             \
    do {                                                                                  \
        static const test_case cases_[] = {__VA_ARGS__};                                  \
        test_add_suite((name), cases_, sizeof(cases_) / sizeof(cases_[0]));               \
    } while (0)

#endif /* SR_TEST_H */
