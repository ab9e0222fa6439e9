/* driver_gemm.cpp — the emulated CUDA gemm of bf16 products (kernels/cuda/gemm.cu, both
 * tensor-core forms: wmma and the register-direct mma, run by scripts/cuda_emu/run.sh) against the
 * double reference over the bf16 operands, within the f32 summation bound of kernels_gemm_bf16,
 * and a row alone against the same row in the batch, bit for bit; the CPU table's bf16
 * products alongside. Weights bf16, and i8 (q exact in bf16, the row's scale after the sum;
 * the mma form whichever is selected, so both selections give the same bits). Shapes cover
 * the direct-x path (M <= 16), the staged one, several row tiles, k blocks cut at kpad (half a
 * 32-wide block), N not a multiple of 16, bias, GELU, alpha / beta, x rows at an odd stride and
 * on 16 bytes (the direct path's vector loads), x with ties between two bf16, subnormals, the
 * smallest normal and signed zeros. SR_EMU_DUMP=file writes every result there, to compare two
 * versions of gemm.cu bit for bit (build each, run each, cmp). Exit status 0 when every check
 * holds. */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
extern "C" {
#include "kernels.h"
#include "sr.h"
#include "dtype.h"
}
sr_status sr_cuda_weight_create(const void *host, sr_dtype dt, int n, int k, const float *scale,
                                sr_kmul mul, sr_kweight **out);
sr_status sr_cuda_gemm(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                       sr_act act, float alpha, float beta, float *y, int ldy);
extern "C" int sr_cuda_gemm_kernel(int v);
extern "C" int sr_cuda_gemm_cols(int v);

static uint64_t rng = 5;
static float rnd()
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(uint32_t)(rng >> 40) / (double)(1u << 24) * 2.0 - 1.0);
}
static float xb(float v) /* an activation as its bf16 operand (subnormals to zero, nearest even) */
{
    if (fabsf(v) < 1.17549435e-38f) v = copysignf(0.0f, v);
    return sr_bf16_to_f32(sr_f32_to_bf16(v));
}

int main()
{
    const sr_kernels *c = sr_kernels_cpu();
    struct { int M, N, K, act, bias; float alpha, beta; } cs[] = {
        {1, 100, 1104, 0, 0, 1.0f, 0.0f}, {5, 70, 33, 0, 1, 1.0f, 1.0f},  {16, 48, 64, 1, 1, 0.5f, 0.0f},
        {17, 40, 130, 0, 0, 1.0f, 1.0f},  {40, 24, 256, 0, 1, 1.0f, 0.0f}, {70, 33, 1100, 1, 1, 1.0f, 0.0f},
        {3, 8, 16, 0, 0, 1.0f, 0.0f}};
    int bad = 0;
    /* SR_EMU_DUMP=file: every result of the run written there, to compare two versions of the
     * kernels bit for bit (cmp) */
    FILE *dump = getenv("SR_EMU_DUMP") ? fopen(getenv("SR_EMU_DUMP"), "wb") : nullptr;
    /* rows at an odd stride (the kernel reads x one float at a time) and at a stride of 4 floats
     * (16-byte rows: its vector loads) */
    for (int aligned = 0; aligned < 2; aligned++)
    for (int wi8 = 0; wi8 < 2; wi8++)
    for (auto &t : cs) {
        const int M = t.M, N = t.N, K = t.K, ldx = aligned ? (K + 3) / 4 * 4 + 4 : K + 3, ldy = N + 2;
        const sr_dtype dt = wi8 ? SR_I8 : SR_BF16;
        std::vector<uint16_t> w((size_t)N * K);
        std::vector<int8_t> w8((size_t)N * K);
        std::vector<float> wv((size_t)N * K), scale(N); /* the weights' values; i8: q */
        for (size_t i = 0; i < w.size(); i++) {
            w[i] = sr_f32_to_bf16(0.5f * rnd());
            w8[i] = (int8_t)(127.0f * rnd());
            wv[i] = wi8 ? (float)w8[i] : sr_bf16_to_f32(w[i]);
        }
        for (auto &v : scale) v = 0.01f * rnd();
        std::vector<float> x((size_t)M * ldx), bias(N), y0((size_t)M * ldy);
        /* with operands that test the rounding: ties between two bf16 (to even, either way),
         * subnormals (to zero of their sign), the smallest normal, signed zeros */
        for (size_t i = 0; i < x.size(); i++) {
            const uint32_t b = (uint32_t)sr_f32_to_bf16(rnd()) << 16;
            switch (i % 13) {
            case 3: x[i] = __builtin_bit_cast(float, b | 0x8000u); break;      /* a tie */
            case 5: x[i] = __builtin_bit_cast(float, (b | 0x8000u) + 0x10000u); break; /* the other parity */
            case 7: x[i] = (i & 16 ? -1.0f : 1.0f) * 1.0e-39f * (1.0f + rnd()); break;
            case 9: x[i] = (i & 16 ? -1.0f : 1.0f) * 1.17549435e-38f; break;
            case 11: x[i] = i & 16 ? -0.0f : 0.0f; break;
            default: x[i] = rnd();
            }
        }
        for (auto &v : bias) v = rnd();
        for (auto &v : y0) v = rnd();
        sr_kweight *Wg = nullptr, *Wc = nullptr;
        const void *host = wi8 ? (const void *)w8.data() : (const void *)w.data();
        const float *sc = wi8 ? scale.data() : nullptr;
        if (sr_cuda_weight_create(host, dt, N, K, sc, SR_KMUL_BF16, &Wg) ||
            c->weight_create(host, dt, N, K, sc, SR_KMUL_BF16, &Wc)) {
            printf("weight_create failed: %s\n", sr_last_error());
            return 1;
        }
        std::vector<float> first; /* i8: the first selection's results, which the second repeats */
        std::vector<float> mma16; /* the mma form's results with 16 columns a block */
        const sr_act act = t.act ? SR_ACT_GELU : SR_ACT_NONE;
        const float *bp = t.bias ? bias.data() : nullptr;
        std::vector<float> yc = y0;
        c->gemm(M, x.data(), ldx, Wc, bp, act, t.alpha, t.beta, yc.data(), ldy);
        for (int kern = 0; kern < 2; kern++) {
            sr_cuda_gemm_kernel(kern);
            std::vector<float> yg = y0, y1 = y0;
            sr_status st = sr_cuda_gemm(M, x.data(), ldx, Wg, bp, act, t.alpha, t.beta, yg.data(), ldy);
            int worst = 0, alone = 0;
            double wd = 0;
            for (int m = 0; m < M && !st; m++) {
                /* the row alone, bit for bit the row in the batch */
                st = sr_cuda_gemm(1, x.data() + (size_t)m * ldx, ldx, Wg, bp, act, t.alpha, t.beta,
                                  y1.data() + (size_t)m * ldy, ldy);
                alone += memcmp(y1.data() + (size_t)m * ldy, yg.data() + (size_t)m * ldy, N * sizeof(float)) != 0;
                for (int n = 0; n < N; n++) {
                    double s = 0, a = 0;
                    for (int k = 0; k < K; k++) {
                        double p = (double)xb(x[(size_t)m * ldx + k]) * wv[(size_t)n * K + k];
                        s += p;
                        a += fabs(p);
                    }
                    const double f = wi8 ? fabs((double)scale[n]) : 1.0;
                    if (wi8) s *= scale[n];
                    double pre = s + (bp ? bp[n] : 0.0), e_pre = (K + 3) * ldexp(1.0, -24) * a * f + ldexp(1.0, -24) * fabs(pre);
                    double v = pre, slope = 1;
                    if (act == SR_ACT_GELU) {
                        v = 0.5 * pre * (1 + erf(pre / sqrt(2.0)));
                        slope = 1.2;
                    }
                    double want = t.alpha * v + t.beta * y0[(size_t)m * ldy + n];
                    double tol = fabs(t.alpha) * (slope * e_pre + 5e-7 * (1 + fabs(pre))) +
                                 2 * ldexp(1.0, -24) * (fabs(t.alpha * v) + fabs(t.beta * y0[(size_t)m * ldy + n])) + 1e-30;
                    double dg = fabs(yg[(size_t)m * ldy + n] - want), dc = fabs(yc[(size_t)m * ldy + n] - want);
                    worst += dg > tol || dc > tol;
                    wd = fmax(wd, dg / tol);
                }
            }
            if (dump) fwrite(yg.data(), sizeof(float), yg.size(), dump);
            int again = 0; /* i8: the same bits under either selection (the mma form both times) */
            if (wi8 && kern == 0) first = yg;
            if (wi8 && kern == 1) again = memcmp(first.data(), yg.data(), yg.size() * sizeof(float)) != 0;
            if (kern == 1) mma16 = yg;
            printf("%s M %3d N %3d K %4d ldx %4d act %d bias %d alpha %.1f beta %.1f, %s: %s, %d outside the bound "
                   "(worst %.2f of it), %d rows differ alone%s\n", wi8 ? "i8  " : "bf16", M, N, K, ldx, t.act,
                   t.bias, t.alpha, t.beta, kern ? "mma " : "wmma", st ? sr_last_error() : "ok", worst, wd,
                   alone, again ? ", NOT the bits of the other selection" : "");
            bad += (st != SR_OK) + worst + alone + again;
        }
        /* the mma form with 32 columns a block (staged x, M > 16) and with 8 (x read by the
         * kernel, M <= 16): the 16-column bits */
        sr_cuda_gemm_kernel(1);
        for (int cols : {1, 3}) {
            const int prev_cols = sr_cuda_gemm_cols(cols);
            std::vector<float> yk = y0;
            sr_status stk = sr_cuda_gemm(M, x.data(), ldx, Wg, t.bias ? bias.data() : nullptr,
                                         t.act ? SR_ACT_GELU : SR_ACT_NONE, t.alpha, t.beta, yk.data(), ldy);
            sr_cuda_gemm_cols(prev_cols);
            int dk = stk != SR_OK || memcmp(yk.data(), mma16.data(), yk.size() * sizeof(float)) != 0;
            printf("%s M %3d N %3d K %4d, mma with %d columns a block%s: %s\n", wi8 ? "i8  " : "bf16", M, N,
                   K, cols == 1 ? 32 : 8, (cols == 1) == (M > 16) ? "" : " (asked; 16 at this M)",
                   stk ? sr_last_error() : dk ? "NOT the bits of 16 columns" : "the bits of 16 columns");
            bad += dk;
        }
        c->weight_free(Wc);
    }
    if (dump) fclose(dump);
    printf(bad ? "FAILED\n" : "all within the bound, rows alone bit for bit\n");
    return bad != 0;
}
