/*
 * test_convert.c — suite whisper_convert: scripts/convert_whisper.py on the tiny CTranslate2
 * fixtures of tests/fixtures/convert/ (written by scripts/gen_convert_fixtures.py).
 *
 * The converter runs as CI has it (/usr/bin/python3 with numpy and h5py); its output is read
 * back through the C loader: sr_model_inspect for the layout (arch, tensor names and shapes,
 * parameter count, dtypes, config, tokenizer, front end) and sr_h5_tensor for values. The split
 * of CTranslate2's fused self-attention Q/K/V and cross-attention K/V must reproduce the rows
 * of the fused matrices exactly, and int8 weights must dequantize to q / scale exactly; the
 * fixture generator stores those expected values in expected.json. Damaged model.bin files
 * and a vocabulary that does not match the embedding must fail with exit status 1, a message
 * naming the file and the defect, and no output file. scripts/recast_model.py (a model file's
 * weights in another element type) is checked here too. Skips when /usr/bin/python3 lacks
 * numpy or h5py.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../core/internal.h"
#include "../core/weights.h"
#include "test.h"

#define FIX "tests/fixtures/convert"

#define NEED_PYTHON()                                                                       \
    do {                                                                                    \
        if (!test_python_ok()) {                                                                 \
            TEST_SKIP("/usr/bin/python3 lacks numpy/h5py (make setup installs them)");      \
            return;                                                                         \
        }                                                                                   \
    } while (0)

/* Run the converter with `args`; its stdout+stderr go to out (NUL-terminated, truncated to
 * cap). Returns the exit status, or -1 if it did not exit normally. */
static int convert(const char *args, char *out, size_t cap)
{
    return test_run(out, cap, "/usr/bin/python3 scripts/convert_whisper.py -q %s", args);
}

static cJSON *read_json(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    if (sr_read_file(path, &text, &len) != SR_OK) return NULL;
    cJSON *j = cJSON_Parse(text);
    free(text);
    return j;
}

static int file_exists(const char *path) { return access(path, F_OK) == 0; }

/* Shape of `name` from expected.json's "shapes" into shape[]; returns ndim (0 if absent). */
static int expected_shape(const cJSON *exp, const char *name, int64_t *shape)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(exp, "shapes"),
                                                      name);
    int n = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, s) if (n < SR_MAX_DIMS) shape[n++] = (int64_t)d->valuedouble;
    return n;
}

/* Every "values_<which>" tensor of expected.json loaded from h5 as f32 must equal the stored
 * values within tol; returns the number of tensors checked. */
static int check_values(const cJSON *exp, const char *which, const char *h5, double tol)
{
    sr_h5 *f = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open(h5, &f), SR_OK);
    int checked = 0;
    const cJSON *vals = cJSON_GetObjectItemCaseSensitive(exp, which), *v;
    cJSON_ArrayForEach(v, vals)
    {
        int64_t shape[SR_MAX_DIMS];
        int nd = expected_shape(exp, v->string, shape);
        CU_ASSERT(nd > 0);
        sr_tensor t = {0};
        sr_status st = sr_h5_tensor(f, v->string, SR_F32, nd, shape, &t);
        CU_ASSERT_EQUAL(st, SR_OK);
        if (st != SR_OK) {
            printf("\n      %s: %s\n", v->string, sr_last_error());
            continue;
        }
        int n = cJSON_GetArraySize(v);
        CU_ASSERT_EQUAL(n, sr_tensor_numel(&t));
        float *want = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        CU_ASSERT_PTR_NOT_NULL_FATAL(want);
        for (int i = 0; i < n; i++) want[i] = (float)cJSON_GetArrayItem(v, i)->valuedouble;
        double d = test_max_abs_diff(want, (const float *)t.data, (size_t)n);
        if (d > tol) printf("\n      %s: max abs diff %g > %g\n", v->string, d, tol);
        CU_ASSERT(d <= tol);
        free(want);
        sr_tensor_free(&t);
        checked++;
    }
    sr_h5_close(f);
    return checked;
}

static long long json_int(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? (long long)x->valuedouble : -1;
}

/* Stored bytes of one dtype from sr_model_inspect's bytes_by_dtype (absent = 0). */
static long long dtype_bytes(const cJSON *info, const char *dtype)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(info, "bytes_by_dtype"), dtype);
    return cJSON_IsNumber(x) ? (long long)x->valuedouble : 0;
}

static void test_ct2_layout(void)
{
    NEED_PYTHON();
    char msg[4096], args[1024];
    const char *out = test_tmppath("ct2_f16.h5");
    snprintf(args, sizeof args, FIX "/ct2_f16 %s", out);
    int rc = convert(args, msg, sizeof msg);
    if (rc != 0) printf("\n      converter: %s\n", msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);

    cJSON *exp = read_json(FIX "/expected.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(exp);
    char *text = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_model_inspect(out, &text), SR_OK);
    cJSON *info = cJSON_Parse(text);
    free(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(info);

    CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItemCaseSensitive(info, "arch")->valuestring, "whisper");
    CU_ASSERT_EQUAL(json_int(info, "n_tensors"), json_int(exp, "n_tensors"));
    CU_ASSERT_EQUAL(json_int(info, "n_params"), json_int(exp, "n_params"));
    /* the source is float16 and --dtype keep keeps it, biases and norms included */
    CU_ASSERT_EQUAL(dtype_bytes(info, "f16"), 2 * json_int(exp, "n_params"));
    CU_ASSERT_EQUAL(dtype_bytes(info, "f32"), 0);

    /* every tensor with exactly the expected name and shape, nothing else */
    const cJSON *t;
    int n = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(info, "tensors"))
    {
        const char *name = cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring;
        int64_t shape[SR_MAX_DIMS];
        int nd = expected_shape(exp, name, shape);
        const cJSON *got = cJSON_GetObjectItemCaseSensitive(t, "shape");
        int same = nd > 0 && cJSON_GetArraySize(got) == nd;
        for (int i = 0; same && i < nd; i++)
            same = (int64_t)cJSON_GetArrayItem(got, i)->valuedouble == shape[i];
        if (!same) printf("\n      unexpected tensor or shape: %s\n", name);
        CU_ASSERT(same);
        n++;
    }
    CU_ASSERT_EQUAL(n, json_int(exp, "n_tensors"));

    /* config: ModelDimensions, token ids, suppress lists, front-end constants */
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(info, "config"), *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(exp, "dims"))
        CU_ASSERT_EQUAL(json_int(cfg, d->string), (long long)d->valuedouble);
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(cfg, "tokens");
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(exp, "tokens"))
        CU_ASSERT_EQUAL(json_int(tok, d->string), (long long)d->valuedouble);
    CU_ASSERT_EQUAL(json_int(tok, "language_first"), -1); /* English-only layout */
    CU_ASSERT(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cfg, "multilingual")));
    CU_ASSERT(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(cfg, "suppress_tokens"),
                            cJSON_GetObjectItemCaseSensitive(exp, "suppress_tokens"), 1));
    CU_ASSERT(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(cfg, "begin_suppress_tokens"),
                            cJSON_GetObjectItemCaseSensitive(exp, "begin_suppress_tokens"), 1));
    CU_ASSERT_EQUAL(json_int(cfg, "sample_rate"), 16000);
    CU_ASSERT_EQUAL(json_int(cfg, "n_fft"), 400);
    CU_ASSERT_EQUAL(json_int(cfg, "hop_length"), 160);
    CU_ASSERT_EQUAL(json_int(cfg, "chunk_length_s"), 30);

    const cJSON *tz = cJSON_GetObjectItemCaseSensitive(info, "tokenizer");
    CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItemCaseSensitive(tz, "type")->valuestring, "bytebpe");
    CU_ASSERT_EQUAL(json_int(tz, "size"), json_int(cJSON_GetObjectItemCaseSensitive(exp, "dims"),
                                                   "n_vocab"));
    const cJSON *fe = cJSON_GetObjectItemCaseSensitive(info, "frontend");
    CU_ASSERT(cJSON_GetArraySize(fe) == 1 &&
              !strcmp(cJSON_GetArrayItem(fe, 0)->valuestring, "mel_filters"));
    cJSON_Delete(info);
    cJSON_Delete(exp);
}

static void test_ct2_split_values(void)
{
    NEED_PYTHON();
    char msg[4096], args[1024];
    const char *out = test_tmppath("ct2_f16_values.h5");
    snprintf(args, sizeof args, FIX "/ct2_f16 %s", out);
    CU_ASSERT_EQUAL_FATAL(convert(args, msg, sizeof msg), 0);
    cJSON *exp = read_json(FIX "/expected.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(exp);
    /* f16 widened to f32 is exact: the split rows must be bit-identical */
    CU_ASSERT_EQUAL(check_values(exp, "values_f16", out, 0.0), 8);

    sr_h5 *f = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open(out, &f), SR_OK);
    /* the key projections have no bias; the value and query ones do */
    CU_ASSERT(!sr_h5_has_tensor(f, "encoder.blocks.0.attn.key.bias"));
    CU_ASSERT(!sr_h5_has_tensor(f, "decoder.blocks.1.cross_attn.key.bias"));
    CU_ASSERT(sr_h5_has_tensor(f, "decoder.blocks.1.cross_attn.value.bias"));
    /* every id from eot on is special, none before */
    long long eot = json_int(cJSON_GetObjectItemCaseSensitive(exp, "tokens"), "eot");
    sr_tensor sp = {0};
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/tokenizer/special", SR_I8, &sp), SR_OK);
    int ok = 1;
    for (int64_t i = 0; i < sp.shape[0]; i++)
        ok &= ((const unsigned char *)sp.data)[i] == (i >= eot ? 1 : 0);
    CU_ASSERT(ok);
    sr_tensor_free(&sp);
    /* Slaney filterbank [n_mels, 201]: non-negative triangles, none empty */
    sr_tensor mel = {0};
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/frontend/mel_filters", SR_F32, &mel), SR_OK);
    CU_ASSERT(mel.ndim == 2 && mel.shape[0] == 8 && mel.shape[1] == 201);
    for (int64_t r = 0; r < mel.shape[0]; r++) {
        double sum = 0, mn = 0;
        for (int64_t c = 0; c < mel.shape[1]; c++) {
            float x = ((const float *)mel.data)[r * mel.shape[1] + c];
            sum += x;
            if (x < mn) mn = x;
        }
        CU_ASSERT(sum > 0 && mn == 0);
    }
    sr_tensor_free(&mel);
    sr_h5_close(f);
    cJSON_Delete(exp);
}

static void test_ct2_int8(void)
{
    NEED_PYTHON();
    char msg[4096], args[1024];
    cJSON *exp = read_json(FIX "/expected.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(exp);
    /* --dtype f32: q / scale in float32, exactly what the generator computed */
    const char *out = test_tmppath("ct2_int8_f32.h5");
    snprintf(args, sizeof args, FIX "/ct2_int8 %s --dtype f32", out);
    int rc = convert(args, msg, sizeof msg);
    if (rc != 0) printf("\n      converter: %s\n", msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(check_values(exp, "values_int8", out, 0.0), 3);

    /* --dtype keep on an int8 source stores int8 (re-quantized per row) */
    const char *keep = test_tmppath("ct2_int8_keep.h5");
    snprintf(args, sizeof args, FIX "/ct2_int8 %s", keep);
    CU_ASSERT_EQUAL_FATAL(convert(args, msg, sizeof msg), 0);
    char *text = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_model_inspect(keep, &text), SR_OK);
    cJSON *info = cJSON_Parse(text);
    free(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(info);
    CU_ASSERT(dtype_bytes(info, "i8") > 0);
    cJSON_Delete(info);
    /* re-quantizing values that are already on an int8 grid loses at most half a step */
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(exp,
                                                      "values_int8"), "encoder.blocks.1.attn.key.weight");
    double amax = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, w) if (fabs(x->valuedouble) > amax) amax = fabs(x->valuedouble);
    CU_ASSERT_EQUAL(check_values(exp, "values_int8", keep, amax / 127.0 * 0.5 + 1e-7), 3);
    cJSON_Delete(exp);
}

static void test_dtype_option(void)
{
    NEED_PYTHON();
    char msg[4096], args[1024];
    cJSON *exp = read_json(FIX "/expected.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(exp);
    const char *out = test_tmppath("ct2_bf16.h5");
    snprintf(args, sizeof args, FIX "/ct2_f16 %s --dtype bf16", out);
    CU_ASSERT_EQUAL_FATAL(convert(args, msg, sizeof msg), 0);
    char *text = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_model_inspect(out, &text), SR_OK);
    cJSON *info = cJSON_Parse(text);
    free(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(info);
    CU_ASSERT_EQUAL(dtype_bytes(info, "bf16"), 2 * json_int(exp, "n_params"));
    CU_ASSERT_EQUAL(dtype_bytes(info, "f16"), 0);
    cJSON_Delete(info);
    /* bf16 keeps 8 significant bits: |error| <= 2^-9 relative; the values are below 1 */
    CU_ASSERT_EQUAL(check_values(exp, "values_f16", out, 1.0 / 512), 8);
    cJSON_Delete(exp);
}

static void test_deterministic(void)
{
    NEED_PYTHON();
    char msg[4096], args[1024];
    const char *a = test_tmppath("det_a.h5"), *b = test_tmppath("det_b.h5");
    snprintf(args, sizeof args, FIX "/ct2_f16 %s", a);
    CU_ASSERT_EQUAL_FATAL(convert(args, msg, sizeof msg), 0);
    snprintf(args, sizeof args, FIX "/ct2_f16 %s", b);
    CU_ASSERT_EQUAL_FATAL(convert(args, msg, sizeof msg), 0);
    char *da = NULL, *db = NULL;
    size_t la = 0, lb = 0;
    CU_ASSERT_EQUAL_FATAL(sr_read_file(a, &da, &la), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_read_file(b, &db, &lb), SR_OK);
    CU_ASSERT(la == lb && la > 0 && memcmp(da, db, la) == 0);
    free(da);
    free(db);
}

/* A copy of the ct2_f16 fixture in tmp/convert-<name>/ (the prefix keeps clear of other
 * suites' files in the shared temporary folder, e.g. core_hdf5's empty.h5) whose model.bin is `bin` (len bytes) and whose
 * vocabulary.json drops its last `drop_vocab` tokens. Returns the folder. */
static const char *damaged_copy(const char *name, const char *bin, size_t len, int drop_vocab)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, "convert-%s", name);
    const char *dir = test_tmppath(tmp);
    mkdir(dir, 0755);
    char path[1024];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(bin, 1, len, f), len);
    fclose(f);
    char *text = NULL;
    size_t tl = 0;
    CU_ASSERT_EQUAL_FATAL(sr_read_file(FIX "/ct2_f16/config.json", &text, &tl), SR_OK);
    snprintf(path, sizeof path, "%s/config.json", dir);
    f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(text, 1, tl, f);
    fclose(f);
    free(text);
    cJSON *vocab = read_json(FIX "/ct2_f16/vocabulary.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(vocab);
    for (int i = 0; i < drop_vocab; i++) cJSON_DeleteItemFromArray(vocab, cJSON_GetArraySize(vocab) - 1);
    char *vt = cJSON_PrintUnformatted(vocab);
    snprintf(path, sizeof path, "%s/vocabulary.json", dir);
    f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(vt, f);
    fclose(f);
    free(vt);
    cJSON_Delete(vocab);
    return dir;
}

/* Convert dir; expect exit status 1, a message containing each needle, and no output. */
static void expect_failure(const char *dir, const char *needle1, const char *needle2)
{
    char msg[4096], args[2200], out[1024];
    snprintf(out, sizeof out, "%s.h5", dir);
    snprintf(args, sizeof args, "%s %s", dir, out);
    int rc = convert(args, msg, sizeof msg);
    CU_ASSERT_EQUAL(rc, 1);
    int named = strstr(msg, needle1) && (!needle2 || strstr(msg, needle2));
    if (rc != 1 || !named)
        printf("\n      %s: exit %d, message \"%s\", wanted \"%s\" and \"%s\"\n", dir, rc, msg,
               needle1, needle2 ? needle2 : "");
    CU_ASSERT(named);
    CU_ASSERT(strstr(msg, "Traceback") == NULL); /* a message, not a crash */
    CU_ASSERT(!file_exists(out));
}

static void test_bad_inputs(void)
{
    NEED_PYTHON();
    char *bin = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(sr_read_file(FIX "/ct2_f16/model.bin", &bin, &len), SR_OK);
    CU_ASSERT_FATAL(len > 64);

    /* cut in the middle of a variable's data */
    expect_failure(damaged_copy("truncated", bin, len / 2, 0), "model.bin", "truncated");
    expect_failure(damaged_copy("empty", bin, 0, 0), "model.bin", "truncated");
    expect_failure(damaged_copy("header_only", bin, 3, 0), "model.bin", "truncated");
    /* version field 99: not a model.bin this converter reads */
    char *bad = malloc(len + 8);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bad);
    memcpy(bad, bin, len);
    bad[0] = 99, bad[1] = bad[2] = bad[3] = 0;
    expect_failure(damaged_copy("version", bad, len, 0), "model.bin", "binary version 99");
    /* some other file altogether: its first bytes read as a huge version */
    const char junk[] = "PK\003\004 this is not a CTranslate2 model";
    expect_failure(damaged_copy("junk", junk, sizeof junk, 0), "model.bin", "binary version");
    /* trailing bytes after the aliases */
    memcpy(bad, bin, len);
    memset(bad + len, 0x5a, 8);
    expect_failure(damaged_copy("trailing", bad, len + 8, 0), "model.bin", "unexpected bytes");
    /* a different spec name (same length, so the rest still parses) */
    memcpy(bad, bin, len);
    char *spec = NULL;
    for (size_t i = 0; !spec && i + 11 <= 64; i++)
        if (!memcmp(bad + i, "WhisperSpec", 11)) spec = bad + i;
    CU_ASSERT_PTR_NOT_NULL_FATAL(spec);
    memcpy(spec, "WhisperSpex", 11);
    expect_failure(damaged_copy("spec", bad, len, 0), "model.bin", "WhisperSpec");
    free(bad);
    /* vocabulary one token short of the embedding */
    expect_failure(damaged_copy("short_vocab", bin, len, 1), "vocabulary.json",
                   "token embedding has 277 rows");
    free(bin);

    /* no such source */
    expect_failure(test_tmppath("does_not_exist"), "does_not_exist", "no such file");
}

/* scripts/recast_model.py: the rand Whisper fixture in int8 loads (every matrix i8, 1-D tensors
 * f32), each dequantized weight within half a step (max |row| / 127 / 2) of the original, the
 * tokenizer and front end copied (the model loads and streams); back to f32 it loads again; a
 * file onto itself is refused. */
static void test_recast(void)
{
    NEED_PYTHON();
    const char *src = "tests/fixtures/whisper/rand.h5", *i8 = test_tmppath("recast_i8.h5");
    const char *f32 = test_tmppath("recast_f32.h5");
    char msg[2048];
    CU_ASSERT_EQUAL_FATAL(test_run(msg, sizeof msg, "/usr/bin/python3 scripts/recast_model.py %s %s --dtype int8",
                                   src, i8), 0);
    CU_ASSERT_EQUAL_FATAL(test_run(msg, sizeof msg, "/usr/bin/python3 scripts/recast_model.py %s %s --dtype f32",
                                   i8, f32), 0);
    CU_ASSERT_NOT_EQUAL(test_run(msg, sizeof msg, "/usr/bin/python3 scripts/recast_model.py %s %s --dtype f16",
                                 f32, f32), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "another file"));
    sr_h5 *a = NULL, *b = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open(src, &a), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_h5_open(i8, &b), SR_OK);
    static const struct { const char *name; int64_t shape[2]; } ts[] = {
        {"decoder.blocks.0.mlp.0.weight", {128, 32}},
        {"encoder.blocks.1.attn.query.weight", {32, 32}},
        {"decoder.token_embedding.weight", {259, 32}}};
    int ok = 1;
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        sr_tensor ta = {0}, tb = {0}, tq = {0};
        const int64_t *shape = ts[i].shape;
        CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(a, ts[i].name, SR_F32, 2, shape, &ta), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(b, ts[i].name, SR_F32, 2, shape, &tb), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(b, ts[i].name, SR_I8, 2, shape, &tq), SR_OK); /* stored i8 */
        const float *x = ta.data, *y = tb.data;
        for (int64_t r = 0; r < shape[0]; r++) {
            double mx = 0;
            for (int64_t c = 0; c < shape[1]; c++) mx = fmax(mx, fabs((double)x[r * shape[1] + c]));
            for (int64_t c = 0; c < shape[1]; c++)
                ok &= fabs((double)x[r * shape[1] + c] - (double)y[r * shape[1] + c]) <= mx / 127.0 / 2.0 * 1.0001 + 1e-12;
        }
        sr_tensor_free(&ta);
        sr_tensor_free(&tb);
        sr_tensor_free(&tq);
    }
    CU_ASSERT(ok);
    sr_h5_close(a);
    sr_h5_close(b);
    sr_model *m = NULL;
    CU_ASSERT_EQUAL(sr_model_load(i8, NULL, &m), SR_OK);
    sr_model_free(m);
    m = NULL;
    CU_ASSERT_EQUAL(sr_model_load(f32, NULL, &m), SR_OK);
    sr_model_free(m);
    remove(i8);
    remove(f32);
}

void test_register_whisper_convert(void)
{
    TEST_SUITE("whisper_convert", {"CTranslate2 -> srkit layout, config, tokenizer", test_ct2_layout},
               {"fused Q/K/V and K/V split exactly", test_ct2_split_values},
               {"int8 source: dequantized and kept", test_ct2_int8},
               {"--dtype bf16", test_dtype_option},
               {"byte-identical reruns", test_deterministic},
               {"damaged model.bin and vocabulary", test_bad_inputs},
               {"recast_model.py: int8 and back", test_recast});
}
