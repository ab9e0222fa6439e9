/*
 * test_hdf5.c — suite core_hdf5: the srkit HDF5 model format reader (core/weights.c),
 * sr_model_inspect, and the element-type conversions of core/dtype.c.
 *
 * Fixtures come from scripts/gen_test_fixtures.py (numpy + h5py): test_linear*.h5 hold the same
 * weights stored f32 / f16 / bf16 / int8, bad_*.h5 are one defect away from test_linear.h5, and
 * plain.h5 is an ordinary h5py file. Corrupt copies (truncated, garbage in the middle) are made
 * at test time. Expected weight values below are the generator's float32 values (seed 1234),
 * printed with 9 significant digits, which round-trip float32 exactly.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "../core/dtype.h"
#include "../core/internal.h"
#include "../core/weights.h"
#include "test.h"


/* sr_h5_has_dataset as 1 / 0, or -1 when it fails. */
static int has_ds(sr_h5 *f, const char *path)
{
    int e = 0;
    return sr_h5_has_dataset(f, path, &e) ? -1 : e;
}

static const float W_REF[48] = {
    -2.12849498f, -0.460558385f, 0.216233f, -0.372039109f, 0.339085609f, 2.38844085f,
    -2.00348163f, 0.420814693f, -1.13161731f, 0.878262758f, 0.0220744591f, 1.85827708f,
    -0.325762033f, 1.05401134f, -0.73062557f, -1.6246208f, 0.090312317f, 1.38886774f,
    0.175712526f, -1.34658742f, -0.0760760978f, 0.422753066f, 0.846850395f, -1.50183249f,
    0.531441867f, 0.186546147f, -0.197252616f, -0.151655957f, -0.844087481f, -0.785369575f,
    1.16637671f, 0.0940009728f, 0.317269385f, -1.69303632f, -0.0778104663f, 0.293244183f,
    -0.484375864f, -0.531575143f, 1.62474585f, 0.551538289f, -1.15790427f, -0.793350995f,
    0.242163002f, 1.65660882f, -0.964606941f, 2.1319139f, 0.0544767119f, -1.16930032f};
static const float B_REF[6] = {-12.0f, 0.718545973f, -0.110902056f, 0.324408263f, -0.15894559f,
                               -0.00548912771f};
static const int64_t W_SHAPE[2] = {6, 8};
static const int64_t B_SHAPE[1] = {6};

/* status + culprit named + file path named */
#define ASSERT_ERR_PATH(call, want, needle, path)                                           \
    do {                                                                                    \
        TEST_ASSERT_ERR(call, want, needle);                                                \
        if (!strstr(sr_last_error(), (path))) {                                             \
            printf("\n      %s:%d: message \"%s\" does not name %s\n", __FILE__, __LINE__,  \
                   sr_last_error(), (path));                                                \
            CU_FAIL("error message names the file");                                        \
        }                                                                                   \
    } while (0)


static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- dtype ------------------------------------------------------------------------------- */

static void test_dtype_names(void)
{
    CU_ASSERT_STRING_EQUAL(sr_dtype_name(SR_F32), "f32");
    CU_ASSERT_STRING_EQUAL(sr_dtype_name(SR_F16), "f16");
    CU_ASSERT_STRING_EQUAL(sr_dtype_name(SR_BF16), "bf16");
    CU_ASSERT_STRING_EQUAL(sr_dtype_name(SR_I8), "i8");
    CU_ASSERT_STRING_EQUAL(sr_dtype_name(SR_I32), "i32");
    CU_ASSERT_STRING_EQUAL(sr_dtype_name(SR_I64), "i64");
    CU_ASSERT_EQUAL(sr_dtype_size(SR_F32), 4);
    CU_ASSERT_EQUAL(sr_dtype_size(SR_F16), 2);
    CU_ASSERT_EQUAL(sr_dtype_size(SR_BF16), 2);
    CU_ASSERT_EQUAL(sr_dtype_size(SR_I8), 1);
    CU_ASSERT_EQUAL(sr_dtype_size(SR_I32), 4);
    CU_ASSERT_EQUAL(sr_dtype_size(SR_I64), 8);
}

/* f32 -> f16 bit patterns as numpy 1.24 gives them (np.float32(x).astype(np.float16)). */
static void test_dtype_f16_known(void)
{
    static const struct { float x; uint16_t h; } k[] = {
        {0.1f, 0x2e66}, {1.0f / 3.0f, 0x3555}, {65504.0f, 0x7bff}, {65519.99f, 0x7bff},
        {65520.0f, 0x7c00}, {1e5f, 0x7c00}, {1e-8f, 0x0000}, {6e-8f, 0x0001}, {-2.0f, 0xc000},
        {5.9604645e-08f, 0x0001}, {8.940696716308594e-08f, 0x0002} /* 1.5 ulp: tie -> even */,
        {6.1035156e-05f, 0x0400}, {6.097555e-05f, 0x03ff}, {0.0f, 0x0000}, {-0.0f, 0x8000}};
    for (size_t i = 0; i < SR_ARRAY_LEN(k); i++) {
        uint16_t h = sr_f32_to_f16(k[i].x);
        if (h != k[i].h) printf("\n      f16(%g) = 0x%04x, numpy 0x%04x", (double)k[i].x, h, k[i].h);
        CU_ASSERT_EQUAL(h, k[i].h);
    }
    CU_ASSERT_EQUAL(sr_f32_to_f16(INFINITY), 0x7c00);
    CU_ASSERT_EQUAL(sr_f32_to_f16(-INFINITY), 0xfc00);
    uint16_t n = sr_f32_to_f16(NAN);
    CU_ASSERT((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
    CU_ASSERT(isnan(sr_f16_to_f32(0x7e00)));
    CU_ASSERT(isinf(sr_f16_to_f32(0xfc00)) && sr_f16_to_f32(0xfc00) < 0);
    CU_ASSERT_EQUAL(sr_f16_to_f32(0x3c00), 1.0f);
    CU_ASSERT_EQUAL(sr_f16_to_f32(0x0001), ldexpf(1.0f, -24));
    CU_ASSERT_EQUAL(sr_f16_to_f32(0x7bff), 65504.0f);
}

/* Every f16 pattern: widening matches the definition, narrowing gives the pattern back, and
 * the f32 midpoints between neighbours round to the even one (just off the midpoint: to the
 * nearer one), on both signs. */
static void test_dtype_f16_exhaustive(void)
{
    int bad_value = 0, bad_trip = 0, bad_round = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = sr_f16_to_f32((uint16_t)h);
        uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
        float want = e == 0 ? ldexpf((float)m, -24)
                   : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(1024 + m), (int)e - 25);
        if (h & 0x8000) want = -want;
        if (isnan(want) ? !isnan(f) : f != want || signbit(f) != signbit(want)) bad_value++;
        if (sr_f32_to_f16(f) != h) bad_trip++;
    }
    for (uint32_t h = 0; h < 0x7c00; h++) {
        float a = sr_f16_to_f32((uint16_t)h);
        float b = h + 1 == 0x7c00 ? 65536.0f : sr_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)(((double)a + (double)b) / 2); /* exact: 12 significant bits */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        for (int s = 0; s < 2; s++) {
            float sg = s ? -1.0f : 1.0f;
            uint16_t sb = s ? 0x8000 : 0;
            if (sr_f32_to_f16(sg * mid) != (sb | even)) bad_round++;
            if (sr_f32_to_f16(sg * nextafterf(mid, INFINITY)) != (sb | (h + 1))) bad_round++;
            if (sr_f32_to_f16(sg * nextafterf(mid, 0.0f)) != (sb | h)) bad_round++;
        }
    }
    if (bad_value || bad_trip || bad_round)
        printf("\n      f16: %d wrong values, %d round-trip failures, %d rounding failures",
               bad_value, bad_trip, bad_round);
    CU_ASSERT_EQUAL(bad_value, 0);
    CU_ASSERT_EQUAL(bad_trip, 0);
    CU_ASSERT_EQUAL(bad_round, 0);
}

static void test_dtype_bf16(void)
{
    static const struct { uint32_t x; uint16_t b; } k[] = {
        {0x3f800000u, 0x3f80}, /* 1.0 */
        {0x40490fdbu, 0x4049}, /* pi: low half 0x0fdb < 0x8000, down */
        {0x3f808000u, 0x3f80}, /* 1 + 2^-8: tie, 0x3f80 is even */
        {0x3f818000u, 0x3f82}, /* 1 + 3 * 2^-8: tie, up to even */
        {0x3f808001u, 0x3f81}, /* just above the tie */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds past the largest bf16: Inf */
        {0xff800000u, 0xff80}, /* -Inf */
        {0x00000001u, 0x0000}, /* smallest f32 subnormal */
        {0x80000000u, 0x8000}};
    for (size_t i = 0; i < SR_ARRAY_LEN(k); i++)
        CU_ASSERT_EQUAL(sr_f32_to_bf16(from_bits(k[i].x)), k[i].b);
    uint16_t n = sr_f32_to_bf16(from_bits(0xffffffffu)); /* a NaN whose carry would wrap */
    CU_ASSERT((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0);
    int bad_trip = 0, bad_round = 0;
    for (uint32_t b = 0; b < 0x10000; b++) {
        float f = sr_bf16_to_f32((uint16_t)b);
        if (bits(f) != b << 16) bad_trip++;
        if (!isnan(f) && sr_f32_to_bf16(f) != b) bad_trip++;
        if (isnan(f) && !isnan(sr_bf16_to_f32(sr_f32_to_bf16(f)))) bad_trip++;
    }
    for (uint32_t b = 0; b < 0x7f7f; b++) { /* positive finite neighbours (b, b + 1) */
        float lo = sr_bf16_to_f32((uint16_t)b), hi = sr_bf16_to_f32((uint16_t)(b + 1));
        float mid = (float)(((double)lo + (double)hi) / 2); /* exact: 9 significant bits */
        uint16_t even = (b & 1) ? (uint16_t)(b + 1) : (uint16_t)b;
        if (sr_f32_to_bf16(mid) != even || sr_f32_to_bf16(-mid) != (0x8000 | even)) bad_round++;
        if (sr_f32_to_bf16(nextafterf(mid, INFINITY)) != b + 1) bad_round++;
        if (sr_f32_to_bf16(nextafterf(mid, 0.0f)) != b) bad_round++;
    }
    CU_ASSERT_EQUAL(bad_trip, 0);
    CU_ASSERT_EQUAL(bad_round, 0);
}

static void test_dtype_bulk_and_int8(void)
{
    float x[7] = {0.1f, -2.5f, 65504.0f, 1e-7f, 3.0e38f, -0.0f, 1234.5678f};
    uint16_t h[7], b[7];
    float y[7];
    sr_f32_to_f16_n(x, h, 7);
    sr_f32_to_bf16_n(x, b, 7);
    for (int i = 0; i < 7; i++) {
        CU_ASSERT_EQUAL(h[i], sr_f32_to_f16(x[i]));
        CU_ASSERT_EQUAL(b[i], sr_f32_to_bf16(x[i]));
    }
    sr_f16_to_f32_n(h, y, 7);
    for (int i = 0; i < 7; i++) CU_ASSERT_EQUAL(bits(y[i]), bits(sr_f16_to_f32(h[i])));
    sr_bf16_to_f32_n(b, y, 7);
    for (int i = 0; i < 7; i++) CU_ASSERT_EQUAL(bits(y[i]), bits(sr_bf16_to_f32(b[i])));

    /* rows: ordinary, all zero, a tie at q = 0.5 * 127 / 127 ... */
    const float m[3][4] = {{1.0f, -0.5f, 0.25f, 0.0f}, {0, 0, 0, 0}, {-127.0f, 63.5f, 0.5f, 1.5f}};
    int8_t q[12];
    float s[3], back[12];
    sr_i8_quant_rows(&m[0][0], 3, 4, q, s);
    CU_ASSERT_EQUAL(s[0], 1.0f / 127.0f);
    CU_ASSERT_EQUAL(s[1], 1.0f); /* all-zero row */
    CU_ASSERT_EQUAL(s[2], 1.0f);
    const int8_t want[12] = {127, -64 /* -63.5 -> even */, 32 /* 31.75 */, 0, 0, 0, 0, 0,
                             -127, 64 /* 63.5 -> even */, 0 /* 0.5 -> even */, 2 /* 1.5 */};
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(q[i], want[i]);
    sr_i8_dequant_rows(q, s, 3, 4, back);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++)
            CU_ASSERT(fabsf(back[r * 4 + c] - m[r][c]) <= s[r] / 2 * (1 + 1e-6f));
}

/* ---- model files ----------------------------------------------------------------------------- */

static sr_h5 *open_ok(const char *name)
{
    sr_h5 *f = NULL;
    sr_status st = sr_h5_open(test_fixture(name), &f);
    if (st) printf("\n      %s: %s", name, sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    return f;
}

static void test_open_test_linear(void)
{
    sr_h5 *f = open_ok("test_linear.h5");
    CU_ASSERT_STRING_EQUAL(sr_h5_path(f), test_fixture("test_linear.h5"));
    CU_ASSERT_STRING_EQUAL(sr_h5_arch(f), "test_linear");
    CU_ASSERT_STRING_EQUAL(sr_h5_config(f),
                           "{\"sample_rate\":16000,\"chunk_ms\":80,\"n_bands\":8,\"vocab\":6,\"blank\":0}");
    CU_ASSERT_STRING_EQUAL(sr_h5_root_attr(f, "source"), "srkit test fixture");
    CU_ASSERT_STRING_EQUAL(sr_h5_root_attr(f, "license"), "MIT");
    CU_ASSERT_PTR_NULL(sr_h5_root_attr(f, "no_such_attr"));
    CU_ASSERT_PTR_NULL(sr_h5_root_attr(f, "format_version")); /* an integer, not a string */
    CU_ASSERT(sr_h5_has_tensor(f, "proj.weight"));
    CU_ASSERT(sr_h5_has_tensor(f, "proj.bias"));
    CU_ASSERT(!sr_h5_has_tensor(f, "proj"));      /* a group */
    CU_ASSERT(!sr_h5_has_tensor(f, "proj.nope"));
    CU_ASSERT(!sr_h5_has_tensor(f, "a..b"));
    CU_ASSERT(has_ds(f, "/tokenizer/pieces_data") == 1);
    CU_ASSERT(has_ds(f, "/frontend/window") == 0);
    CU_ASSERT_STRING_EQUAL(sr_h5_attr(f, "/tokenizer", "type"), "pieces");
    CU_ASSERT_PTR_NULL(sr_h5_attr(f, "/tokenizer", "nope"));
    CU_ASSERT_PTR_NULL(sr_h5_attr(f, "/nope", "type"));

    sr_tensor w, b;
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, &w), SR_OK);
    CU_ASSERT_STRING_EQUAL(w.name, "proj.weight");
    CU_ASSERT_EQUAL(w.dtype, SR_F32);
    CU_ASSERT_EQUAL(w.ndim, 2);
    CU_ASSERT_EQUAL(w.shape[0], 6);
    CU_ASSERT_EQUAL(w.shape[1], 8);
    CU_ASSERT_EQUAL(sr_tensor_numel(&w), 48);
    CU_ASSERT_EQUAL(w.nbytes, 192);
    CU_ASSERT_PTR_NULL(w.scale);
    CU_ASSERT_EQUAL(memcmp(w.data, W_REF, sizeof W_REF), 0); /* exact */
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f, "proj.bias", SR_F32, 1, B_SHAPE, &b), SR_OK);
    CU_ASSERT_EQUAL(memcmp(b.data, B_REF, sizeof B_REF), 0);
    sr_tensor_free(&w);
    CU_ASSERT_PTR_NULL(w.data);
    sr_tensor_free(&b);
    sr_tensor_free(NULL);

    /* tokenizer datasets through the generic reader */
    sr_tensor t;
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/tokenizer/pieces_offsets", SR_I64, &t), SR_OK);
    CU_ASSERT_EQUAL(t.ndim, 1);
    CU_ASSERT_EQUAL(t.shape[0], 7);
    const int64_t off[7] = {0, 7, 8, 9, 10, 11, 12};
    CU_ASSERT_EQUAL(memcmp(t.data, off, sizeof off), 0);
    sr_tensor_free(&t);
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/tokenizer/pieces_data", SR_I8, &t), SR_OK);
    CU_ASSERT_EQUAL(t.shape[0], 12);
    CU_ASSERT_EQUAL(memcmp(t.data, "<blank>abcd ", 12), 0);
    sr_tensor_free(&t);
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/tokenizer/special", SR_I32, &t), SR_OK);
    CU_ASSERT_EQUAL(((int32_t *)t.data)[0], 1);
    CU_ASSERT_EQUAL(((int32_t *)t.data)[5], 0);
    sr_tensor_free(&t);
    sr_h5_close(f);
    sr_h5_close(NULL);
}

/* Max |got - W_REF| / allowed over the weight, and the same for the bias; allowed(i) is the
 * quantization error bound of element i. */
static void check_variant(const char *file, double w_rel, int int8)
{
    sr_h5 *f = open_ok(file);
    sr_tensor w, b;
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, &w), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f, "proj.bias", SR_F32, 1, B_SHAPE, &b), SR_OK);
    const float *x = w.data;
    double worst = 0, max_abs = 0;
    for (int r = 0; r < 6; r++) {
        float amax = 0;
        for (int c = 0; c < 8; c++) amax = fmaxf(amax, fabsf(W_REF[r * 8 + c]));
        for (int c = 0; c < 8; c++) {
            int i = r * 8 + c;
            double err = fabs((double)x[i] - W_REF[i]);
            /* int8: |q - w/s| <= 1/2 so |q s - w| <= s/2 with s = max|row| / 127, plus the
             * float32 rounding of w/s and q*s (each <= 2^-24 relative); f16 / bf16: round to
             * nearest is within half an ulp, 2^-11 / 2^-8 of |w| for normal values (every
             * weight here is >= 2^-14, so none is an f16 subnormal) */
            double allowed = int8 ? amax / 127.0 / 2 + ldexp(fabs(W_REF[i]), -22)
                                  : ldexp(fabs(W_REF[i]), (int)w_rel);
            if (err / allowed > worst) worst = err / allowed;
            if (err > max_abs) max_abs = err;
        }
    }
    printf("\n      %s: weight max abs err %.3g (%.4f of the bound)", file, max_abs, worst);
    CU_ASSERT(worst <= 1.0);
    CU_ASSERT(max_abs > 0); /* really stored narrower */
    /* biases: 1-D tensors stay f32 for f16 and int8, bf16 applies to all */
    double berr = test_max_abs_diff(b.data, B_REF, 6);
    if (w_rel == -8 && !int8) {
        for (int i = 0; i < 6; i++)
            CU_ASSERT(fabs((double)((float *)b.data)[i] - B_REF[i]) <= ldexp(fabs(B_REF[i]), -8));
        CU_ASSERT(berr > 0);
    } else {
        CU_ASSERT_EQUAL(berr, 0);
    }
    sr_tensor_free(&w);
    sr_tensor_free(&b);
    sr_h5_close(f);
}

static void test_variants_f32(void)
{
    check_variant("test_linear_f16.h5", -11, 0);
    check_variant("test_linear_bf16.h5", -8, 0);
    check_variant("test_linear_int8.h5", 0, 1);
}

/* The Python writer (numpy) and the C conversions agree bit for bit: loading a narrow file
 * kept as stored equals converting the f32 reference in C, and loading the f32 file as a
 * narrow dtype gives the same bits. */
static void test_variants_native(void)
{
    uint16_t h[48], bh[48];
    int8_t q[48];
    float s[6];
    sr_f32_to_f16_n(W_REF, h, 48);
    sr_f32_to_bf16_n(W_REF, bh, 48);
    sr_i8_quant_rows(W_REF, 6, 8, q, s);
    sr_h5 *f32 = open_ok("test_linear.h5"), *f16 = open_ok("test_linear_f16.h5");
    sr_h5 *fb = open_ok("test_linear_bf16.h5"), *fq = open_ok("test_linear_int8.h5");
    sr_tensor t;

    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f16, "proj.weight", SR_F16, 2, W_SHAPE, &t), SR_OK);
    CU_ASSERT_EQUAL(t.dtype, SR_F16);
    CU_ASSERT_EQUAL(t.nbytes, 96);
    CU_ASSERT_EQUAL(memcmp(t.data, h, sizeof h), 0);
    sr_tensor_free(&t);
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f32, "proj.weight", SR_F16, 2, W_SHAPE, &t), SR_OK);
    CU_ASSERT_EQUAL(memcmp(t.data, h, sizeof h), 0);
    sr_tensor_free(&t);

    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(fb, "proj.weight", SR_BF16, 2, W_SHAPE, &t), SR_OK);
    CU_ASSERT_EQUAL(t.dtype, SR_BF16);
    CU_ASSERT_EQUAL(memcmp(t.data, bh, sizeof bh), 0);
    sr_tensor_free(&t);
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f32, "proj.weight", SR_BF16, 2, W_SHAPE, &t), SR_OK);
    CU_ASSERT_EQUAL(memcmp(t.data, bh, sizeof bh), 0);
    sr_tensor_free(&t);
    /* f16 -> bf16 goes through f32 (exact) then rounds once */
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f16, "proj.weight", SR_BF16, 2, W_SHAPE, &t), SR_OK);
    for (int i = 0; i < 48; i++)
        CU_ASSERT_EQUAL(((uint16_t *)t.data)[i], sr_f32_to_bf16(sr_f16_to_f32(h[i])));
    sr_tensor_free(&t);

    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(fq, "proj.weight", SR_I8, 2, W_SHAPE, &t), SR_OK);
    CU_ASSERT_EQUAL(t.dtype, SR_I8);
    CU_ASSERT_EQUAL(t.nbytes, 48 + 6 * 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t.scale);
    CU_ASSERT_EQUAL(memcmp(t.data, q, sizeof q), 0);
    CU_ASSERT_EQUAL(memcmp(t.scale, s, sizeof s), 0);
    sr_tensor_free(&t);
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f32, "proj.weight", SR_I8, 2, W_SHAPE, &t), SR_OK);
    CU_ASSERT_EQUAL(memcmp(t.data, q, sizeof q), 0);
    CU_ASSERT_EQUAL(memcmp(t.scale, s, sizeof s), 0);
    sr_tensor_free(&t);
    /* the int8 file's bias is f32 and loads as f16 by rounding */
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(fq, "proj.bias", SR_F16, 1, B_SHAPE, &t), SR_OK);
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(((uint16_t *)t.data)[i], sr_f32_to_f16(B_REF[i]));
    sr_tensor_free(&t);

    sr_h5_close(f32);
    sr_h5_close(f16);
    sr_h5_close(fb);
    sr_h5_close(fq);
}

/* ---- sr_model_inspect ------------------------------------------------------------------------ */

static cJSON *inspect(const char *name)
{
    char *txt = NULL;
    sr_status st = sr_model_inspect(test_fixture(name), &txt);
    if (st) printf("\n      %s: %s", name, sr_last_error());
    CU_ASSERT_EQUAL(st, SR_OK);
    if (st) return NULL;
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    CU_ASSERT_PTR_NOT_NULL(j);
    return j;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "(not a string)";
}

static void check_tensor_entry(const cJSON *t, const char *name, const char *dtype, int64_t d0,
                               int64_t d1, double bytes)
{
    CU_ASSERT_STRING_EQUAL(str(t, "name"), name);
    CU_ASSERT_STRING_EQUAL(str(t, "dtype"), dtype);
    CU_ASSERT_EQUAL(num(t, "bytes"), bytes);
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(sh), d1 ? 2 : 1);
    CU_ASSERT_EQUAL(cJSON_GetArrayItem(sh, 0) ? cJSON_GetArrayItem(sh, 0)->valuedouble : -1, d0);
    if (d1) CU_ASSERT_EQUAL(cJSON_GetArrayItem(sh, 1) ? cJSON_GetArrayItem(sh, 1)->valuedouble : -1, d1);
}

static void test_inspect(void)
{
    cJSON *j = inspect("test_linear.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(str(j, "path"), test_fixture("test_linear.h5"));
    CU_ASSERT_STRING_EQUAL(str(j, "arch"), "test_linear");
    CU_ASSERT_EQUAL(num(j, "format_version"), 1);
    CU_ASSERT_STRING_EQUAL(str(j, "digest"), "xxh3-128 verified");
    cJSON *nod = inspect("test_linear_nodigest.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(nod);
    CU_ASSERT_STRING_EQUAL(str(nod, "digest"), "none");
    cJSON_Delete(nod);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(j, "config");
    CU_ASSERT(cJSON_IsObject(cfg));
    CU_ASSERT_EQUAL(num(cfg, "vocab"), 6);
    CU_ASSERT_EQUAL(num(cfg, "chunk_ms"), 80);
    CU_ASSERT_STRING_EQUAL(str(j, "source"), "srkit test fixture");
    CU_ASSERT_STRING_EQUAL(str(j, "license"), "MIT");
    CU_ASSERT_EQUAL(num(j, "n_tensors"), 2);
    CU_ASSERT_EQUAL(num(j, "n_params"), 54);
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(j, "bytes_by_dtype");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(by), 1);
    CU_ASSERT_EQUAL(num(by, "f32"), 216);
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "tensors");
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(ts), 2);
    check_tensor_entry(cJSON_GetArrayItem(ts, 0), "proj.bias", "f32", 6, 0, 24);
    check_tensor_entry(cJSON_GetArrayItem(ts, 1), "proj.weight", "f32", 6, 8, 192);
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(j, "tokenizer");
    CU_ASSERT_STRING_EQUAL(str(tok, "type"), "pieces");
    CU_ASSERT_EQUAL(num(tok, "size"), 6);
    const cJSON *fe = cJSON_GetObjectItemCaseSensitive(j, "frontend");
    CU_ASSERT(cJSON_IsArray(fe) && cJSON_GetArraySize(fe) == 0);
    cJSON_Delete(j);

    /* int8: the scale is listed and counted in bytes, not in n_params */
    j = inspect("test_linear_int8.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(num(j, "n_tensors"), 3);
    CU_ASSERT_EQUAL(num(j, "n_params"), 54);
    by = cJSON_GetObjectItemCaseSensitive(j, "bytes_by_dtype");
    CU_ASSERT_EQUAL(num(by, "i8"), 48);
    CU_ASSERT_EQUAL(num(by, "f32"), 48);
    ts = cJSON_GetObjectItemCaseSensitive(j, "tensors");
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(ts), 3);
    check_tensor_entry(cJSON_GetArrayItem(ts, 1), "proj.weight", "i8", 6, 8, 48);
    check_tensor_entry(cJSON_GetArrayItem(ts, 2), "proj.weight_scale", "f32", 6, 0, 24);
    cJSON_Delete(j);

    j = inspect("test_linear_bf16.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    by = cJSON_GetObjectItemCaseSensitive(j, "bytes_by_dtype");
    CU_ASSERT_EQUAL(num(by, "bf16"), 108);
    CU_ASSERT_EQUAL(num(j, "n_params"), 54);
    cJSON_Delete(j);

    j = inspect("test_linear_f16.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    by = cJSON_GetObjectItemCaseSensitive(j, "bytes_by_dtype");
    CU_ASSERT_EQUAL(num(by, "f16"), 96);
    CU_ASSERT_EQUAL(num(by, "f32"), 24);
    cJSON_Delete(j);

    j = inspect("test_linear_frontend.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    fe = cJSON_GetObjectItemCaseSensitive(j, "frontend");
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(fe), 2);
    CU_ASSERT_STRING_EQUAL(cJSON_GetArrayItem(fe, 0)->valuestring, "mel_filters");
    CU_ASSERT_STRING_EQUAL(cJSON_GetArrayItem(fe, 1)->valuestring, "window");
    cJSON_Delete(j);

    char *txt = (char *)"untouched";
    TEST_ASSERT_ERR(sr_model_inspect(test_fixture("bad_format.h5"), &txt), SR_ERR_FORMAT,
                    "attribute format");
    CU_ASSERT_PTR_NULL(txt);
    TEST_ASSERT_ERR(sr_model_inspect("no/such/model.h5", &txt), SR_ERR_IO, "no/such/model.h5");
    TEST_ASSERT_ERR(sr_model_inspect(test_fixture("test_linear.h5"), NULL), SR_ERR_ARG, "json_out");
}

/* ---- bad files ------------------------------------------------------------------------------- */

static void expect_open_error(const char *name, const char *needle)
{
    static int dummy;
    sr_h5 *f = (sr_h5 *)&dummy; /* must be reset to NULL */
    const char *p = test_fixture(name);
    ASSERT_ERR_PATH(sr_h5_open(p, &f), SR_ERR_FORMAT, needle, p);
    CU_ASSERT_PTR_NULL(f);
}

static void test_bad_root(void)
{
    expect_open_error("bad_format.h5", "root attribute format is \"not-srkit\"");
    expect_open_error("bad_no_version.h5", "root attribute format_version is missing");
    expect_open_error("bad_version.h5", "root attribute format_version is 2");
    expect_open_error("bad_no_arch.h5", "root attribute arch is missing");
    expect_open_error("bad_config_json.h5", "root attribute config is not valid JSON");
    expect_open_error("bad_config_array.h5", "root attribute config is JSON but not an object");
    expect_open_error("plain.h5", "root attribute format is missing");
    /* the arch registry is sr_model_load's business: the file itself is well formed */
    sr_h5 *f = open_ok("bad_unknown_arch.h5");
    CU_ASSERT_STRING_EQUAL(sr_h5_arch(f), "no_such_arch");
    sr_h5_close(f);
}

static void test_bad_tensors(void)
{
    sr_tensor t;
    const char *p = test_fixture("bad_shape.h5");
    sr_h5 *f = open_ok("bad_shape.h5");
    ASSERT_ERR_PATH(sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, &t), SR_ERR_FORMAT,
                    "tensor proj.weight: stored shape [6, 7], expected [6, 8]", p);
    CU_ASSERT_PTR_NULL(t.data);
    /* rank mismatch too */
    ASSERT_ERR_PATH(sr_h5_tensor(f, "proj.bias", SR_F32, 2, (int64_t[]){6, 1}, &t), SR_ERR_FORMAT,
                    "tensor proj.bias: stored shape [6], expected [6, 1]", p);
    sr_h5_close(f);

    p = test_fixture("bad_nan.h5");
    f = open_ok("bad_nan.h5");
    ASSERT_ERR_PATH(sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, &t), SR_ERR_FORMAT,
                    "tensor proj.weight: NaN at flat index 19", p);
    /* also when asked for a narrower dtype */
    TEST_ASSERT_ERR(sr_h5_tensor(f, "proj.weight", SR_F16, 2, W_SHAPE, &t), SR_ERR_FORMAT,
                    "NaN at flat index 19");
    CU_ASSERT_EQUAL(sr_h5_tensor(f, "proj.bias", SR_F32, 1, B_SHAPE, &t), SR_OK);
    sr_tensor_free(&t);
    sr_h5_close(f);

    p = test_fixture("bad_inf.h5");
    f = open_ok("bad_inf.h5");
    ASSERT_ERR_PATH(sr_h5_tensor(f, "proj.weight", SR_I8, 2, W_SHAPE, &t), SR_ERR_FORMAT,
                    "tensor proj.weight: Inf at flat index 41", p);
    sr_h5_close(f);

    p = test_fixture("bad_missing_tensor.h5");
    f = open_ok("bad_missing_tensor.h5");
    CU_ASSERT(!sr_h5_has_tensor(f, "proj.bias"));
    ASSERT_ERR_PATH(sr_h5_tensor(f, "proj.bias", SR_F32, 1, B_SHAPE, &t), SR_ERR_FORMAT,
                    "tensor proj.bias is missing", p);
    sr_h5_close(f);

    p = test_fixture("bad_int8_no_scale.h5");
    f = open_ok("bad_int8_no_scale.h5");
    ASSERT_ERR_PATH(sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, &t), SR_ERR_FORMAT,
                    "scale tensor proj.weight_scale is missing", p);
    ASSERT_ERR_PATH(sr_h5_tensor(f, "proj.weight", SR_I8, 2, W_SHAPE, &t), SR_ERR_FORMAT,
                    "proj.weight_scale", p);
    sr_h5_close(f);

    /* plain.h5 has /weights/big = [1, 1e5] in f32: fine as f32 and bf16, not as f16 */
    p = test_fixture("plain.h5");
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(p, &f), SR_OK);
    CU_ASSERT_EQUAL(sr_h5_tensor(f, "big", SR_BF16, 1, (int64_t[]){2}, &t), SR_OK);
    sr_tensor_free(&t);
    ASSERT_ERR_PATH(sr_h5_tensor(f, "big", SR_F16, 1, (int64_t[]){2}, &t), SR_ERR_FORMAT,
                    "tensor big: value 100000 at flat index 1 is outside the f16 range", p);
    sr_h5_close(f);
}

static void test_bad_args(void)
{
    sr_h5 *f = open_ok("test_linear.h5");
    sr_tensor t;
    TEST_ASSERT_ERR(sr_h5_tensor(f, "proj..weight", SR_F32, 2, W_SHAPE, &t), SR_ERR_ARG,
                    "proj..weight");
    TEST_ASSERT_ERR(sr_h5_tensor(f, "proj/weight", SR_F32, 2, W_SHAPE, &t), SR_ERR_ARG,
                    "proj/weight");
    TEST_ASSERT_ERR(sr_h5_tensor(f, "proj.weight", SR_I32, 2, W_SHAPE, &t), SR_ERR_ARG, "i32");
    TEST_ASSERT_ERR(sr_h5_tensor(f, "proj.weight", SR_F32, 7, W_SHAPE, &t), SR_ERR_ARG,
                    "proj.weight");
    TEST_ASSERT_ERR(sr_h5_tensor(f, "proj.weight", SR_F32, 2, NULL, &t), SR_ERR_ARG, "proj.weight");
    TEST_ASSERT_ERR(sr_h5_tensor(f, NULL, SR_F32, 2, W_SHAPE, &t), SR_ERR_ARG, "name");
    TEST_ASSERT_ERR(sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, NULL), SR_ERR_ARG, "out");
    TEST_ASSERT_ERR(sr_h5_dataset(f, "tokenizer/pieces_data", SR_I8, &t), SR_ERR_ARG,
                    "not absolute");
    TEST_ASSERT_ERR(sr_h5_dataset(f, "/tokenizer/pieces_data", SR_F16, &t), SR_ERR_ARG, "f16");
    TEST_ASSERT_ERR(sr_h5_dataset(f, "/tokenizer/nope", SR_I64, &t), SR_ERR_FORMAT,
                    "/tokenizer/nope");
    TEST_ASSERT_ERR(sr_h5_dataset(f, "/tokenizer", SR_I64, &t), SR_ERR_FORMAT, "/tokenizer");
    TEST_ASSERT_ERR(sr_h5_dataset(f, "/weights/proj/weight", SR_I64, &t), SR_ERR_FORMAT,
                    "stored as f32, expected an integer type");
    sr_h5_close(f);
    TEST_ASSERT_ERR(sr_h5_open(NULL, &f), SR_ERR_ARG, "path");
    TEST_ASSERT_ERR(sr_h5_open(test_fixture("test_linear.h5"), NULL), SR_ERR_ARG, "out");
    char **names;
    size_t n;
    TEST_ASSERT_ERR(sr_h5_unused(NULL, &names, &n), SR_ERR_ARG, "file");
}

static void test_missing_and_not_hdf5(void)
{
    sr_h5 *f = NULL;
    const char *p = test_tmppath("does-not-exist.h5");
    TEST_ASSERT_ERR(sr_h5_open(p, &f), SR_ERR_IO, p);
    CU_ASSERT_PTR_NULL(f);
    TEST_ASSERT_ERR(sr_h5_open_plain(p, &f), SR_ERR_IO, p);
    TEST_ASSERT_ERR(sr_h5_open(test_tmpdir(), &f), SR_ERR_IO, "is a directory");

    const char *txt = test_tmppath("text.h5");
    FILE *fp = fopen(txt, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    fputs("this is not an HDF5 file\n", fp);
    fclose(fp);
    ASSERT_ERR_PATH(sr_h5_open(txt, &f), SR_ERR_FORMAT, "not a readable HDF5 file", txt);
    const char *empty = test_tmppath("empty.h5");
    fp = fopen(empty, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    fclose(fp);
    ASSERT_ERR_PATH(sr_h5_open(empty, &f), SR_ERR_FORMAT, "not a readable HDF5 file", empty);
}

/* Copy a fixture into the temp dir, then let edit() damage the bytes. The copy keeps the
 * fixture's digest header, so the digest check refuses it ("corrupt"); resealed_copy writes a
 * matching digest after the damage, so that libhdf5 and the loader's own checks meet it (a file
 * damaged before it was sealed, or by a writer bug). */
static const char *damaged_copy(const char *fixture, const char *name,
                                void (*edit)(unsigned char *buf, size_t *len, void *arg),
                                void *arg);
static const char *resealed_copy(const char *fixture, const char *name,
                                 void (*edit)(unsigned char *buf, size_t *len, void *arg),
                                 void *arg)
{
    const char *p = damaged_copy(fixture, name, edit, arg);
    sr_h5_seal(p); /* fails only where the damage took the user block: the check then refuses */
    return p;
}

static const char *damaged_copy(const char *fixture, const char *name,
                                void (*edit)(unsigned char *buf, size_t *len, void *arg),
                                void *arg)
{
    char *buf = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(sr_read_file(test_fixture(fixture), &buf, &len), SR_OK);
    edit((unsigned char *)buf, &len, arg);
    const char *p = test_tmppath(name);
    FILE *fp = fopen(p, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    CU_ASSERT_EQUAL(fwrite(buf, 1, len, fp), len);
    fclose(fp);
    free(buf);
    return p;
}

static void truncate_to(unsigned char *buf, size_t *len, void *arg)
{
    (void)buf;
    *len = (size_t)((double)*len * *(double *)arg);
}

typedef struct { double at, frac; uint32_t seed; } garbage_spec;

static void garbage(unsigned char *buf, size_t *len, void *arg)
{
    const garbage_spec *g = arg;
    size_t n = (size_t)((double)*len * g->frac), start = (size_t)((double)*len * g->at) - n / 2;
    uint32_t x = g->seed;
    for (size_t i = 0; i < n && start + i < *len; i++) {
        x = x * 1664525u + 1013904223u; /* LCG: fixed, reproducible garbage */
        buf[start + i] = (unsigned char)(x >> 24);
    }
}

/* Open, load both tensors, read the tokenizer, list unused, inspect: the first failure's
 * status (SR_OK if everything went through). Never crashes on a damaged file. */
static sr_status full_read(const char *p)
{
    sr_h5 *f = NULL;
    sr_tensor t;
    sr_status st = sr_h5_open(p, &f);
    if (!st) st = sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, &t);
    if (!st) { sr_tensor_free(&t); st = sr_h5_tensor(f, "proj.bias", SR_F32, 1, B_SHAPE, &t); }
    if (!st) { sr_tensor_free(&t); st = sr_h5_dataset(f, "/tokenizer/pieces_offsets", SR_I64, &t); }
    if (!st) { sr_tensor_free(&t); st = sr_h5_dataset(f, "/tokenizer/pieces_data", SR_I8, &t); }
    if (!st) sr_tensor_free(&t);
    if (!st) {
        char **names = NULL;
        size_t n = 0;
        st = sr_h5_unused(f, &names, &n);
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
    }
    sr_h5_close(f);
    if (!st) {
        char *txt = NULL;
        st = sr_model_inspect(p, &txt);
        free(txt);
    }
    return st;
}

static void test_truncated(void)
{
    double half = 0.5;
    const char *p = damaged_copy("test_linear.h5", "truncated.h5", truncate_to, &half);
    sr_h5 *f = NULL;
    char *whole = NULL;
    size_t wlen = 0;
    CU_ASSERT_EQUAL_FATAL(sr_read_file(test_fixture("test_linear.h5"), &whole, &wlen), SR_OK);
    free(whole);
    char want[128];
    snprintf(want, sizeof want, "corrupt: %zu bytes, its digest header says %zu (truncated)",
             (size_t)((double)wlen * half), wlen);
    ASSERT_ERR_PATH(sr_h5_open(p, &f), SR_ERR_FORMAT, want, p);
    ASSERT_ERR_PATH(sr_model_inspect(p, &(char *){NULL}), SR_ERR_FORMAT, "corrupt", p);
    ASSERT_ERR_PATH(sr_h5_open_plain(p, &f), SR_ERR_FORMAT, "HDF5", p); /* no digest check */
    /* the same cut sealed again: libhdf5 sees it and fails cleanly */
    p = resealed_copy("test_linear.h5", "truncated_sealed.h5", truncate_to, &half);
    ASSERT_ERR_PATH(sr_h5_open(p, &f), SR_ERR_FORMAT, "not a readable HDF5 file", p);
    ASSERT_ERR_PATH(sr_model_inspect(p, &(char *){NULL}), SR_ERR_FORMAT, "HDF5", p);
    /* every cut from 1/16 to 15/16 fails cleanly, sealed or not */
    for (int k = 1; k < 16; k++) {
        double frac = k / 16.0;
        char name[64];
        snprintf(name, sizeof name, "truncated_%02d.h5", k);
        p = damaged_copy("test_linear.h5", name, truncate_to, &frac);
        ASSERT_ERR_PATH(full_read(p), SR_ERR_FORMAT, "corrupt", p);
        snprintf(name, sizeof name, "truncated_sealed_%02d.h5", k);
        p = resealed_copy("test_linear.h5", name, truncate_to, &frac);
        ASSERT_ERR_PATH(full_read(p), SR_ERR_FORMAT, "", p);
    }
}

static void test_garbage(void)
{
    /* 1/6 of the file around its middle: the group symbol tables and heaps of /weights and
     * /tokenizer live there */
    garbage_spec g = {0.5, 1.0 / 6, 12345};
    const char *p = damaged_copy("test_linear.h5", "garbage.h5", garbage, &g);
    ASSERT_ERR_PATH(full_read(p), SR_ERR_FORMAT, "corrupt", p);
    p = resealed_copy("test_linear.h5", "garbage_sealed.h5", garbage, &g);
    ASSERT_ERR_PATH(full_read(p), SR_ERR_FORMAT, "", p);
    /* sealed after the damage (the digest cannot tell), so libhdf5 and the loader meet it: */
    /* smaller blocks of garbage all over the file: each read ends in OK (the damage hit
     * unused bytes) or FORMAT, never another status and never a crash */
    int n_format = 0, n_ok = 0;
    for (int k = 0; k < 48; k++) {
        garbage_spec gk = {(k + 0.5) / 48.0, 1.0 / 48, 777u + (uint32_t)k};
        char name[64];
        snprintf(name, sizeof name, "garbage_%02d.h5", k);
        p = damaged_copy("test_linear.h5", name, garbage, &gk);
        ASSERT_ERR_PATH(full_read(p), SR_ERR_FORMAT, "corrupt", p);
        p = resealed_copy("test_linear.h5", name, garbage, &gk);
        sr_status st = full_read(p);
        if (st == SR_ERR_FORMAT) {
            n_format++;
            CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), p));
        } else if (st == SR_OK) {
            n_ok++;
        } else {
            printf("\n      %s: status %d: %s", name, st, sr_last_error());
            CU_FAIL("damaged file: status other than OK / FORMAT");
        }
    }
    printf("\n      48 damaged copies: %d FORMAT, %d read through", n_format, n_ok);
    CU_ASSERT(n_format > 0);
}

static void flip_weight_bit(unsigned char *buf, size_t *len, void *arg)
{
    (void)arg;
    for (size_t i = 0; i + sizeof W_REF <= *len; i++)
        if (!memcmp(buf + i, W_REF, sizeof W_REF)) {
            buf[i + 40] ^= 0x01; /* lowest mantissa bit of element 10 */
            return;
        }
    CU_FAIL("weight bytes not found in the fixture");
}

/* One flipped bit in the raw weight bytes: the writer's Fletcher-32 checksum catches it, where
 * a plain contiguous dataset would load a slightly wrong weight without complaint. */
static void test_bit_flip(void)
{
    sr_h5 *f = NULL;
    const char *p = damaged_copy("test_linear.h5", "bitflip.h5", flip_weight_bit, NULL);
    ASSERT_ERR_PATH(sr_h5_open(p, &f), SR_ERR_FORMAT, "corrupt: the content's xxh3-128 digest does not match", p);
    /* sealed after the flip, the dataset's own checksum still catches it */
    p = resealed_copy("test_linear.h5", "bitflip_sealed.h5", flip_weight_bit, NULL);
    sr_tensor t;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open(p, &f), SR_OK);
    ASSERT_ERR_PATH(sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, &t), SR_ERR_FORMAT,
                    "tensor proj.weight: cannot read its data", p);
    CU_ASSERT_EQUAL(sr_h5_tensor(f, "proj.bias", SR_F32, 1, B_SHAPE, &t), SR_OK);
    sr_tensor_free(&t);
    sr_h5_close(f);
}

/* ---- the whole-file digest (core/digest.c) ---------------------------------------------------- */

typedef struct { size_t at; unsigned char mask; } flip_spec;

static void flip_at(unsigned char *buf, size_t *len, void *arg)
{
    const flip_spec *fs = arg;
    if (fs->at < *len) buf[fs->at] ^= fs->mask;
}

static void append_byte(unsigned char *buf, size_t *len, void *arg)
{
    (void)buf;
    (void)arg;
    (*len)++; /* the read buffer has a spare byte: sr_read_file NUL-terminates */
}

static void upper_hex(unsigned char *buf, size_t *len, void *arg)
{
    (void)arg;
    char *d = strstr((char *)buf, "\ndigest ");
    for (char *c = d ? d + 8 : NULL; c && *c && *c != '\n'; c++)
        if (*c >= 'a' && *c <= 'f') *c = (char)(*c - 'a' + 'A');
    (void)len;
}

static int digest_of(const char *p, int *has)
{
    *has = -1;
    return sr_h5_check_digest(p, has);
}

static void test_digest(void)
{
    int has = -1;
    sr_h5 *f = NULL;
    sr_model *m = NULL;
    /* every srkit-written fixture carries a matching digest; the model opens without a warning */
    const char *fixtures[] = {"test_linear.h5", "test_linear_int8.h5", "bad_unallocated.h5",
                              "whisper/rand.h5", "fastconformer/rand.h5", "voxtral/model.h5"};
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
        CU_ASSERT_EQUAL(digest_of(test_fixture(fixtures[i]), &has), SR_OK);
        CU_ASSERT_EQUAL(has, 1);
    }
    CU_ASSERT_EQUAL_FATAL(sr_h5_open(test_fixture("test_linear.h5"), &f), SR_OK);
    CU_ASSERT_PTR_NULL(sr_h5_warning(f));
    sr_h5_close(f);
    CU_ASSERT_EQUAL_FATAL(sr_model_load(test_fixture("test_linear.h5"), NULL, &m), SR_OK);
    CU_ASSERT_PTR_NULL(sr_model_warning(m));
    sr_model_free(m);

    /* no user block (other writers, srkit before the digest): loads, with a warning */
    const char *nod = test_fixture("test_linear_nodigest.h5");
    CU_ASSERT_EQUAL(digest_of(nod, &has), SR_OK);
    CU_ASSERT_EQUAL(has, 0);
    CU_ASSERT_EQUAL_FATAL(sr_model_load(nod, NULL, &m), SR_OK);
    CU_ASSERT_PTR_NOT_NULL(sr_model_warning(m));
    CU_ASSERT(sr_model_warning(m) && strstr(sr_model_warning(m), "no srkit digest"));
    sr_model_free(m);
    CU_ASSERT_EQUAL(digest_of(test_fixture("plain.h5"), &has), SR_OK); /* plain: none either */
    CU_ASSERT_EQUAL(has, 0);
    TEST_ASSERT_ERR(sr_h5_seal(test_tmppath("no_such_file.h5")), SR_ERR_IO, "no_such_file.h5");

    /* a zeroed block (written where the writer had no xxhash): a warning, then sealing it */
    flip_spec zero = {0, 0};
    const char *p = damaged_copy("test_linear.h5", "unsealed.h5", flip_at, &zero);
    FILE *fp = fopen(p, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    static const unsigned char zeros[512];
    CU_ASSERT_EQUAL(fwrite(zeros, 1, sizeof zeros, fp), sizeof zeros);
    fclose(fp);
    CU_ASSERT_EQUAL(digest_of(p, &has), SR_OK);
    CU_ASSERT_EQUAL(has, 0);
    CU_ASSERT_EQUAL_FATAL(sr_model_load(p, NULL, &m), SR_OK);
    CU_ASSERT_PTR_NOT_NULL(sr_model_warning(m));
    sr_model_free(m);
    CU_ASSERT_EQUAL(sr_h5_seal(p), SR_OK);
    CU_ASSERT_EQUAL(digest_of(p, &has), SR_OK);
    CU_ASSERT_EQUAL(has, 1);
    {   /* the C seal writes byte for byte what srkit_h5.py wrote */
        char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        CU_ASSERT_EQUAL_FATAL(sr_read_file(p, &a, &la), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_read_file(test_fixture("test_linear.h5"), &b, &lb), SR_OK);
        CU_ASSERT(la == lb && !memcmp(a, b, la));
        free(a);
        free(b);
    }
    /* a file without a user block cannot be sealed in place (srkit_h5.py seal adds one) */
    TEST_ASSERT_ERR(sr_h5_seal(nod), SR_ERR_FORMAT, "has no 512-byte srkit user block");

    /* one flipped bit anywhere: in the header's text, length, digest, in the HDF5 superblock,
     * in the data, in the last byte; and the header's magic itself */
    char *whole = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(sr_read_file(test_fixture("test_linear.h5"), &whole, &len), SR_OK);
    free(whole);
    const struct { size_t at; unsigned char mask; const char *needle; } flips[] = {
        {0, 0x10, "not a valid srkit digest"},   {3, 0x10, "not a valid srkit digest"},
        {20, 0x10, "not a valid srkit digest"},  {45, 0x01, "its digest header says"}, /* the length's last digit */
        {55, 0x01, "digest does not match"},     /* a hex digit of the digest, still hex */
        {120, 0x10, "not a valid srkit digest"}, {511, 0x10, "not a valid srkit digest"},
        {512 + 3, 0x10, "digest does not match"}, {600, 0x10, "digest does not match"},
        {len / 2, 0x10, "digest does not match"}, {len - 1, 0x10, "digest does not match"},
    };
    for (size_t i = 0; i < sizeof flips / sizeof *flips; i++) {
        flip_spec fs = {flips[i].at, flips[i].mask};
        char name[64];
        snprintf(name, sizeof name, "flip_%05zu.h5", flips[i].at);
        p = damaged_copy("test_linear.h5", name, flip_at, &fs);
        ASSERT_ERR_PATH(digest_of(p, &has), SR_ERR_FORMAT, flips[i].needle, p);
        CU_ASSERT_EQUAL(has, 0);
        ASSERT_ERR_PATH(sr_model_load(p, NULL, &m), SR_ERR_FORMAT, "corrupt", p);
        CU_ASSERT_PTR_NULL(m);
        ASSERT_ERR_PATH(sr_model_inspect(p, &(char *){NULL}), SR_ERR_FORMAT, "corrupt", p);
    }
    /* a byte appended, one cut off; a header with the same digest in upper-case hex (the
     * header is checked for exactly the writer's form) */
    p = damaged_copy("test_linear.h5", "appended.h5", append_byte, NULL);
    char want[128];
    snprintf(want, sizeof want, "corrupt: %zu bytes, its digest header says %zu (bytes appended)", len + 1, len);
    ASSERT_ERR_PATH(digest_of(p, &has), SR_ERR_FORMAT, want, p);
    double cut = (len - 1.0) / len;
    p = damaged_copy("test_linear.h5", "cut1.h5", truncate_to, &cut);
    ASSERT_ERR_PATH(digest_of(p, &has), SR_ERR_FORMAT, "(truncated)", p);
    p = damaged_copy("test_linear.h5", "upper.h5", upper_hex, NULL);
    ASSERT_ERR_PATH(digest_of(p, &has), SR_ERR_FORMAT, "not a valid srkit digest", p);
    /* shorter than a block: no digest to check, libhdf5's open refuses it */
    double tiny = 100.0 / len;
    p = damaged_copy("test_linear.h5", "tiny.h5", truncate_to, &tiny);
    ASSERT_ERR_PATH(sr_h5_open(p, &f), SR_ERR_FORMAT, "corrupt", p);
    TEST_ASSERT_ERR(sr_h5_check_digest(NULL, &has), SR_ERR_ARG, "NULL");
}

/* ---- plain files, unused tensors, threads ---------------------------------------------------- */

static void test_plain(void)
{
    sr_h5 *f = NULL;
    const char *p = test_fixture("plain.h5");
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(p, &f), SR_OK);
    CU_ASSERT_PTR_NULL(sr_h5_arch(f));
    CU_ASSERT_PTR_NULL(sr_h5_config(f));
    CU_ASSERT_STRING_EQUAL(sr_h5_root_attr(f, "note"), "plain h5py file");
    CU_ASSERT(has_ds(f, "/f64") == 1);
    CU_ASSERT(has_ds(f, "/group/nested") == 1);
    CU_ASSERT(has_ds(f, "/group") == 0);
    CU_ASSERT(has_ds(f, "/group/nested/deeper") == 0);
    CU_ASSERT_STRING_EQUAL(sr_h5_attr(f, "/group/nested", "unit"), "count");

    sr_tensor t;
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/f64", SR_F32, &t), SR_OK);
    const float f64[6] = {0.5f, -1.25f, 3.0f, 1e-3f, 2.0f, -7.5f};
    CU_ASSERT_EQUAL(t.ndim, 2);
    CU_ASSERT_EQUAL(t.shape[0], 2);
    CU_ASSERT_EQUAL(t.shape[1], 3);
    CU_ASSERT_EQUAL(memcmp(t.data, f64, sizeof f64), 0);
    CU_ASSERT_STRING_EQUAL(t.name, "/f64");
    sr_tensor_free(&t);
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/ids", SR_I64, &t), SR_OK);
    const int64_t ids[4] = {3, -1, 70000, (int64_t)1 << 40};
    CU_ASSERT_EQUAL(memcmp(t.data, ids, sizeof ids), 0);
    CU_ASSERT_EQUAL(t.nbytes, 32);
    sr_tensor_free(&t);
    ASSERT_ERR_PATH(sr_h5_dataset(f, "/ids", SR_I32, &t), SR_ERR_FORMAT,
                    "dataset /ids: value 1099511627776 at flat index 3 does not fit i32", p);
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/small_ids", SR_I32, &t), SR_OK);
    CU_ASSERT_EQUAL(((int32_t *)t.data)[2], 3);
    sr_tensor_free(&t);
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/small_ids", SR_F32, &t), SR_OK);
    CU_ASSERT_EQUAL(((float *)t.data)[1], 2.0f);
    sr_tensor_free(&t);
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/bytes", SR_I8, &t), SR_OK);
    CU_ASSERT_EQUAL(memcmp(t.data, "hi\xff", 3), 0);
    sr_tensor_free(&t);
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/half", SR_F32, &t), SR_OK);
    CU_ASSERT_EQUAL(((float *)t.data)[0], 1.0f);
    CU_ASSERT_EQUAL(((float *)t.data)[1], sr_f16_to_f32(0x2e66)); /* 0.1 as numpy stores it */
    CU_ASSERT_EQUAL(((float *)t.data)[2], -65504.0f);
    sr_tensor_free(&t);
    ASSERT_ERR_PATH(sr_h5_dataset(f, "/bad_half", SR_F32, &t), SR_ERR_FORMAT,
                    "dataset /bad_half: Inf at flat index 1", p);
    ASSERT_ERR_PATH(sr_h5_dataset(f, "/text", SR_F32, &t), SR_ERR_FORMAT,
                    "dataset /text: stored as string", p);
    ASSERT_ERR_PATH(sr_h5_dataset(f, "/f64", SR_I8, &t), SR_ERR_FORMAT, "dataset /f64", p);
    CU_ASSERT_EQUAL_FATAL(sr_h5_dataset(f, "/group/nested", SR_F32, &t), SR_OK);
    CU_ASSERT_EQUAL(t.shape[0], 3);
    CU_ASSERT_EQUAL(((float *)t.data)[5], 5.0f);
    sr_tensor_free(&t);
    /* /weights/big was never loaded */
    char **names = NULL;
    size_t n = 99;
    CU_ASSERT_EQUAL_FATAL(sr_h5_unused(f, &names, &n), SR_OK);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    CU_ASSERT_STRING_EQUAL(names[0], "big");
    free(names[0]);
    free(names);
    sr_h5_close(f);
}

static void expect_unused(sr_h5 *f, size_t want_n, const char *first)
{
    char **names = NULL;
    size_t n = 99;
    CU_ASSERT_EQUAL_FATAL(sr_h5_unused(f, &names, &n), SR_OK);
    CU_ASSERT_EQUAL(n, want_n);
    if (n && first) CU_ASSERT_STRING_EQUAL(names[0], first);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

static void test_unused(void)
{
    const char *files[] = {"test_linear.h5", "test_linear_int8.h5"};
    for (size_t i = 0; i < SR_ARRAY_LEN(files); i++) {
        sr_h5 *f = open_ok(files[i]);
        sr_tensor t;
        expect_unused(f, 2, "proj.bias"); /* sorted; an int8 scale is never listed */
        CU_ASSERT_EQUAL(sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, &t), SR_OK);
        sr_tensor_free(&t);
        expect_unused(f, 1, "proj.bias");
        /* a failed load does not count as use */
        CU_ASSERT_EQUAL(sr_h5_tensor(f, "proj.bias", SR_F32, 1, (int64_t[]){5}, &t), SR_ERR_FORMAT);
        expect_unused(f, 1, "proj.bias");
        CU_ASSERT_EQUAL(sr_h5_tensor(f, "proj.bias", SR_F32, 1, B_SHAPE, &t), SR_OK);
        sr_tensor_free(&t);
        CU_ASSERT_EQUAL(sr_h5_tensor(f, "proj.bias", SR_F32, 1, B_SHAPE, &t), SR_OK);
        sr_tensor_free(&t);
        expect_unused(f, 0, NULL);
        sr_h5_close(f);
    }
}

/* A tensor nobody loads is reported after everything else was loaded. */
static void test_unused_extra(void)
{
    sr_h5 *f = open_ok("bad_extra_tensor.h5");
    sr_tensor t;
    CU_ASSERT_EQUAL(sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, &t), SR_OK);
    sr_tensor_free(&t);
    CU_ASSERT_EQUAL(sr_h5_tensor(f, "proj.bias", SR_F32, 1, B_SHAPE, &t), SR_OK);
    sr_tensor_free(&t);
    expect_unused(f, 1, "extra.weight");
    sr_h5_close(f);
}

static void *thread_body(void *arg)
{
    int *fails = arg;
    for (int it = 0; it < 25; it++) {
        const char *name = (it & 1) ? "test_linear_bf16.h5" : "test_linear.h5";
        sr_h5 *f = NULL;
        sr_tensor t;
        if (sr_h5_open(test_fixture(name), &f)) { (*fails)++; continue; }
        if (sr_h5_tensor(f, "proj.weight", SR_F32, 2, W_SHAPE, &t)) (*fails)++;
        else if (!(it & 1) && memcmp(t.data, W_REF, sizeof W_REF)) (*fails)++;
        sr_tensor_free(&t);
        char *txt = NULL;
        if (sr_model_inspect(test_fixture(name), &txt)) (*fails)++;
        free(txt);
        sr_h5_close(f);
    }
    return NULL;
}

/* Files opened, read and inspected from 4 threads at once: the internal lock keeps HDF5 sane. */
static void test_threads(void)
{
    pthread_t th[4];
    int fails[4] = {0};
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, thread_body, &fails[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(fails[i], 0);
}

/* A /tokenizer group whose object header is unreadable: a lookup inside it fails, and that is
 * an error naming the path, not "no tokenizer" (the model used to load without its tokenizer
 * and print token ids). */
static void test_tokenizer_unreadable(void)
{
    const char *p = test_fixture("bad_tokenizer_header.h5");
    sr_h5 *f = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open(p, &f), SR_OK);
    int e = 7;
    TEST_ASSERT_ERR(sr_h5_has_dataset(f, "/tokenizer/pieces_data", &e), SR_ERR_FORMAT,
                    "/tokenizer/pieces_data: cannot look it up");
    CU_ASSERT_EQUAL(e, 0);
    CU_ASSERT(has_ds(f, "/weights/proj/weight") == 1); /* the rest of the file still reads */
    sr_h5_close(f);
    sr_model *m = NULL;
    TEST_ASSERT_ERR(sr_model_load(p, NULL, &m), SR_ERR_FORMAT, "bad_tokenizer_header.h5");
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT(strstr(sr_last_error(), "corrupt") != NULL);
}

/* A tensor whose storage is missing (a corrupt chunk index reads like this: libhdf5 returns the
 * fill value, zeros, without an error) is refused, naming the tensor. */
static void test_unallocated(void)
{
    sr_model *m = NULL;
    TEST_ASSERT_ERR(sr_model_load(test_fixture("bad_unallocated.h5"), NULL, &m), SR_ERR_FORMAT,
                    "proj.weight: its data is not stored");
    CU_ASSERT_PTR_NULL(m);
    /* complete single-chunk checksummed datasets (every srkit writer's layout) still load */
    CU_ASSERT_EQUAL(sr_model_load(test_fixture("test_linear.h5"), NULL, &m), SR_OK);
    sr_model_free(m);
}

/* A fixed-length root string with text after a NUL ("test_linear\0junk") is not taken for the
 * part before the NUL; a config with a duplicate key is refused. */
static void test_arch_nul(void)
{
    sr_model *m = NULL;
    TEST_ASSERT_ERR(sr_model_load(test_fixture("bad_arch_nul.h5"), NULL, &m), SR_ERR_FORMAT,
                    "root attribute arch has a NUL byte inside its text");
    CU_ASSERT_PTR_NULL(m);
    /* a config key given twice: which value counts is up to the JSON reader, so it is refused */
    TEST_ASSERT_ERR(sr_model_load(test_fixture("bad_config_dup.h5"), NULL, &m), SR_ERR_FORMAT,
                    "config.n_bands: the key appears more than once");
    CU_ASSERT_PTR_NULL(m);
    /* a key the backend does not read (a typo of chunk_ms) would leave a default in force */
    TEST_ASSERT_ERR(sr_model_load(test_fixture("bad_config_unknown.h5"), NULL, &m), SR_ERR_FORMAT,
                    "config.chunk_msec: not a key of arch test_linear");
    CU_ASSERT_PTR_NULL(m);
}

void test_register_core_hdf5(void)
{
    TEST_SUITE("core_hdf5",
               {"dtype_names", test_dtype_names},
               {"dtype_f16_known_values", test_dtype_f16_known},
               {"dtype_f16_exhaustive", test_dtype_f16_exhaustive},
               {"dtype_bf16", test_dtype_bf16},
               {"dtype_bulk_and_int8", test_dtype_bulk_and_int8},
               {"open_test_linear", test_open_test_linear},
               {"variants_vs_f32", test_variants_f32},
               {"variants_bitwise", test_variants_native},
               {"inspect", test_inspect},
               {"bad_root_attrs", test_bad_root},
               {"bad_tensors", test_bad_tensors},
               {"bad_args", test_bad_args},
               {"missing_and_not_hdf5", test_missing_and_not_hdf5},
               {"truncated", test_truncated},
               {"garbage", test_garbage},
               {"bit_flip", test_bit_flip},
               {"digest", test_digest},
               {"tokenizer_unreadable", test_tokenizer_unreadable},
               {"unallocated", test_unallocated},
               {"arch_nul", test_arch_nul},
               {"plain_file", test_plain},
               {"unused", test_unused},
               {"unused_extra", test_unused_extra},
               {"threads", test_threads});
}
