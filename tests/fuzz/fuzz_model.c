/*
 * fuzz_model.c — model file loading (core/model.c, core/weights.c, the backends' loaders).
 *
 * libhdf5 1.10.8 itself crashes on some corrupt files, which srkit cannot fix, so srkit files
 * carry a whole-file digest in the HDF5 user block that is verified before libhdf5 parses
 * anything (sr_h5_check_digest, core/weights.h). This harness therefore fuzzes the digest check
 * on every input and passes to libhdf5 only what the check accepts: files with a matching
 * digest. Inputs without a digest block (has_digest == 0) are skipped, as they would reach
 * libhdf5 unchecked. An accepted file is loaded (sr_model_load, one BLAS thread), detokenized,
 * and described (sr_model_inspect); everything is freed.
 */
#include "fuzz_srkit.h"

#include "../../core/weights.h"

/* Inputs seen / with a matching digest / loaded as models: printed at exit when
 * SRKIT_FUZZ_STATS is set (tests/fuzz/run.sh sets it), to show how much reaches libhdf5. */
static unsigned long n_inputs, n_digest_ok, n_loaded;

static void print_stats(void)
{
    fprintf(stderr, "fuzz_model: %lu inputs, %lu with a matching digest, %lu loaded\n", n_inputs,
            n_digest_ok, n_loaded);
}

/* Decode a few ids in range and some out of range: text whenever it succeeds. */
static void detokenize(sr_model *m)
{
    static const int32_t ok[] = {0, 1, 2, 3, 4, 5, 6, 7}, bad[] = {0, -1, 1 << 30};
    char *text = NULL;
    if (sr_model_detokenize(m, ok, 8, &text) == SR_OK) FUZZ_CHECK(text != NULL);
    free(text);
    text = NULL;
    if (sr_model_detokenize(m, bad, 3, &text) == SR_OK) FUZZ_CHECK(text != NULL);
    free(text);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_dir();
    if (getenv("SRKIT_FUZZ_STATS")) atexit(print_stats);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_write(path, sizeof path, "in.h5", data, size);
    n_inputs++;
    int has_digest = -1;
    sr_status st = sr_h5_check_digest(path, &has_digest);
    if (st != SR_OK) return 0; /* a digest that does not match, or not an HDF5 file */
    FUZZ_CHECK(has_digest == 0 || has_digest == 1);
    if (!has_digest) return 0; /* no digest block: libhdf5 would parse it unchecked */
    n_digest_ok++;

    n_loaded += (unsigned long)fuzz_load_model(path, detokenize);
    return 0;
}
