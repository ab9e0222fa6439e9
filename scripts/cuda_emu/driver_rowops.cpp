/* driver_rowops.cpp — the emulated CUDA rope, kv_write, kv_write2, rope_kv, conv_dw, zero, copy2d and act's copy (kernels/cuda/rowops.cu, run by
 * scripts/cuda_emu/run.sh) against the CPU table's: 1,000 sequences of 0 to 3 rows at scattered
 * slots and positions, 400 of them empty (several launches of the kernels' batch parameter, one
 * without rows), then two sequences over two calls with an f16 state; topk in its single-block
 * and split forms (indices and values bit for bit). kv_write: the pools'
 * bytes; rope and conv_dw: within kernels_cuda's 4e-6 (1 + |y|) (the same formulas; the host's
 * cosf / sinf here). Exit status 0 when all agree. */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
extern "C" {
#include "kernels.h"
#include "sr.h"
}
sr_status sr_cuda_rope(const sr_kbatch *b, int n_head, int hd, const float *inv_freq, float *x, int ldx);
sr_status sr_cuda_kv_write(sr_kpool *p, int layer, const sr_kbatch *b, const float *x, int ldx);
sr_status sr_cuda_kv_write2(sr_kpool *p, sr_kpool *p2, int layer, const sr_kbatch *b, const float *x, int ldx,
                            const float *x2, int ldx2);
sr_status sr_cuda_rope_kv(const sr_kbatch *b, int n_head, int n_kv_head, int hd, const float *inv_freq,
                          float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                          sr_kpool *K, sr_kpool *V, int layer);
sr_status sr_cuda_topk(int M, int N, int k, const float *x, int ldx, int32_t *idx, float *val);
void sr_cuda_zero(void *p, size_t bytes);
sr_status sr_cuda_copy2d(int M, int d, const float *x, int ldx, float *y, int ldy);
sr_status sr_cuda_act(sr_act act, size_t n, const float *x, float *y);
sr_status sr_cuda_conv_dw(const sr_kbatch *b, int C, int K, const float *x, int ldx, const float *w,
                          const float *bias, sr_kpool *state, int layer, float *y, int ldy);

static uint64_t rng = 11;
static float rnd()
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(uint32_t)(rng >> 40) / (double)(1u << 24) * 2.0 - 1.0);
}
static int rndi(int n) { return (int)((rnd() + 1.0f) * 0.5f * (float)n) % (n > 0 ? n : 1); }

static int close_to(const float *a, const float *b, size_t n, double tol, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - b[i]) <= tol * (1.0 + fabs((double)b[i])))) {
            printf("%s: element %zu: emulated %.9g, cpu %.9g\n", what, i, (double)a[i], (double)b[i]);
            return 0;
        }
    printf("%s: %zu values agree\n", what, n);
    return 1;
}

/* a pool pair (cpu, emulated) of the same shape, zeroed */
static void pools(const sr_kernels *c, sr_dtype dt, int L, int S, int R, int W, sr_kpool **a, sr_kpool **b)
{
    sr_kpool_create(c, dt, L, S, R, W, a);
    sr_kpool_create(c, dt, L, S, R, W, b);
}

int main()
{
    const sr_kernels *c = sr_kernels_cpu();
    int ok = 1;
    enum { NS = 1000 };
    std::vector<int> row0(NS + 1), slot(NS);
    std::vector<int64_t> pos(NS);
    for (int s = 0; s < NS; s++) {
        int n = s >= 400 && s < 800 ? 0 : rndi(4);
        row0[s + 1] = row0[s] + n;
        slot[s] = (s * 617) % NS;
        pos[s] = rndi(50);
    }
    const int M = row0[NS];
    sr_kbatch b = {NS, row0.data(), slot.data(), pos.data()};
    { /* rope */
        const int H = 2, hd = 8, ld = H * hd + 3;
        float inv[4];
        for (int i = 0; i < hd / 2; i++) inv[i] = powf(10000.0f, -2.0f * (float)i / (float)hd);
        std::vector<float> x((size_t)M * ld);
        for (auto &v : x) v = rnd();
        std::vector<float> y = x;
        ok &= c->rope(&b, H, hd, inv, x.data(), ld) == SR_OK && sr_cuda_rope(&b, H, hd, inv, y.data(), ld) == SR_OK;
        ok &= close_to(y.data(), x.data(), x.size(), 4e-6, "rope, 1,000 sequences");
    }
    { /* kv_write into a bf16 ring of 3 rows */
        const int W = 12, ld = W + 1;
        sr_kpool *pc, *pe;
        pools(c, SR_BF16, 2, NS, 3, W, &pc, &pe);
        std::vector<float> x((size_t)M * ld);
        for (auto &v : x) v = rnd();
        ok &= c->kv_write(pc, 1, &b, x.data(), ld) == SR_OK && sr_cuda_kv_write(pe, 1, &b, x.data(), ld) == SR_OK;
        int same = !memcmp(pc->data, pe->data, pc->bytes);
        printf("kv_write, 1,000 sequences: pool bytes %s\n", same ? "equal" : "DIFFER");
        ok &= same;
        sr_kpool_free(c, pc);
        sr_kpool_free(c, pe);
    }
    { /* kv_write2 into a bf16 ring of 3 rows and an f16 one of 2 (other width and stride): the
       * bytes of the CPU's two kv_writes */
        const int W1 = 12, W2 = 5, ld1 = W1 + 1, ld2 = W2 + 3;
        sr_kpool *pc1, *pe1, *pc2, *pe2;
        pools(c, SR_BF16, 2, NS, 3, W1, &pc1, &pe1);
        pools(c, SR_F16, 2, NS, 2, W2, &pc2, &pe2);
        std::vector<float> x1((size_t)M * ld1), x2((size_t)M * ld2);
        for (auto &v : x1) v = rnd();
        for (auto &v : x2) v = rnd();
        ok &= c->kv_write(pc1, 1, &b, x1.data(), ld1) == SR_OK && c->kv_write(pc2, 1, &b, x2.data(), ld2) == SR_OK;
        ok &= sr_cuda_kv_write2(pe1, pe2, 1, &b, x1.data(), ld1, x2.data(), ld2) == SR_OK;
        int same = !memcmp(pc1->data, pe1->data, pc1->bytes) && !memcmp(pc2->data, pe2->data, pc2->bytes);
        printf("kv_write2, 1,000 sequences: both pools' bytes %s\n", same ? "equal" : "DIFFER");
        ok &= same;
        for (sr_kpool *q : {pc1, pe1, pc2, pe2}) sr_kpool_free(c, q);
    }
    { /* rope_kv: the bits of rope (q and k side by side) then kv_write2, both emulated: q, both
       * pools (bf16 K of 3 ring rows, f16 V of 2), k and v left as they were; GQA 4 / 2 */
        const int H = 4, G = 2, hd = 8, qw = H * hd, kw = G * hd, ld = qw + 2 * kw + 1;
        float inv[4];
        for (int i = 0; i < hd / 2; i++) inv[i] = powf(10000.0f, -2.0f * (float)i / (float)hd);
        sr_kpool *k1, *k2, *v1, *v2;
        pools(c, SR_BF16, 2, NS, 3, kw, &k1, &k2);
        pools(c, SR_F16, 2, NS, 2, kw, &v1, &v2);
        std::vector<float> x((size_t)M * ld);
        for (auto &e : x) e = rnd();
        std::vector<float> y = x, x0 = x;
        ok &= sr_cuda_rope_kv(&b, H, G, hd, inv, x.data(), ld, x.data() + qw, ld, x.data() + qw + kw, ld, k1, v1, 1) == SR_OK;
        ok &= sr_cuda_rope(&b, H + G, hd, inv, y.data(), ld) == SR_OK &&
              sr_cuda_kv_write2(k2, v2, 1, &b, y.data() + qw, ld, y.data() + qw + kw, ld) == SR_OK;
        int same = !memcmp(k1->data, k2->data, k1->bytes) && !memcmp(v1->data, v2->data, v1->bytes);
        for (int r = 0; r < M && same; r++)
            same = !memcmp(&x[(size_t)r * ld], &y[(size_t)r * ld], (size_t)qw * sizeof(float)) &&
                   !memcmp(&x[(size_t)r * ld + qw], &x0[(size_t)r * ld + qw], (size_t)(2 * kw + 1) * sizeof(float));
        printf("rope_kv, 1,000 sequences: q and both pools %s\n", same ? "equal to rope then kv_write2" : "DIFFER");
        ok &= same;
        for (sr_kpool *p : {k1, k2, v1, v2}) sr_kpool_free(c, p);
    }
    for (int twoseq = 0; twoseq < 2; twoseq++) { /* conv_dw with state, two calls */
        const int C = 6, K = 4, ld = C + 2;
        const sr_dtype dt = twoseq ? SR_F16 : SR_F32;
        int r2[3] = {0, 4, 11}, s2[2] = {2, 0};
        int64_t p2[2] = {0, 0};
        sr_kbatch b2 = {2, r2, s2, p2};
        const sr_kbatch *bb = twoseq ? &b2 : &b;
        const int rows = twoseq ? 11 : M, slots = twoseq ? 3 : NS;
        sr_kpool *pc, *pe;
        pools(c, dt, 1, slots, K - 1, C, &pc, &pe);
        std::vector<float> w((size_t)C * K), bias(C);
        for (auto &v : w) v = rnd();
        for (auto &v : bias) v = rnd();
        for (int call = 0; call < 2; call++) {
            std::vector<float> x((size_t)rows * ld), yc((size_t)rows * ld), ye((size_t)rows * ld);
            for (auto &v : x) v = rnd();
            ok &= c->conv_dw(bb, C, K, x.data(), ld, w.data(), bias.data(), pc, 0, yc.data(), ld) == SR_OK;
            ok &= sr_cuda_conv_dw(bb, C, K, x.data(), ld, w.data(), bias.data(), pe, 0, ye.data(), ld) == SR_OK;
            ok &= close_to(ye.data(), yc.data(), ye.size(), 4e-6, twoseq ? "conv_dw, 2 sequences, f16 state" : "conv_dw, 1,000 sequences");
        }
        int same = !memcmp(pc->data, pe->data, pc->bytes);
        printf("conv_dw state bytes %s\n", same ? "equal" : "DIFFER");
        ok &= same;
        sr_kpool_free(c, pc);
        sr_kpool_free(c, pe);
    }
    /* topk: the single-block form and the split one (few rows over many columns: parts, then
     * their merge), indices and values bit for bit; the row's best value repeated in other
     * parts (the lower column wins), NaN, -0 and +0 */
    struct { int M, N, k; } tk[] = {{1, 131072, 1}, {2, 51865, 5}, {1, 4100, 64}, {3, 1000, 3}, {1, 4097, 1}};
    for (auto &t : tk) {
        const int ld = t.N + 5;
        std::vector<float> x((size_t)t.M * ld);
        for (auto &v : x) v = rnd();
        for (int r = 0; r < t.M; r++) {
            float *xr = x.data() + (size_t)r * ld;
            xr[t.N - 1] = xr[t.N / 2] = xr[7] = 3.0f; /* ties across parts */
            xr[t.N / 3] = NAN;
            xr[11] = -0.0f;
            xr[12] = 0.0f;
            if (t.N > 100000) xr[t.N - 3] = 5.0f; /* the best in the last part only */
        }
        std::vector<int32_t> ic((size_t)t.M * t.k), ie(ic.size());
        std::vector<float> vc(ic.size()), ve(ic.size());
        ok &= c->topk(t.M, t.N, t.k, x.data(), ld, ic.data(), vc.data()) == SR_OK;
        ok &= sr_cuda_topk(t.M, t.N, t.k, x.data(), ld, ie.data(), ve.data()) == SR_OK;
        const int same = ic == ie && !memcmp(vc.data(), ve.data(), vc.size() * sizeof(float));
        printf("topk M %d N %d k %d: %s\n", t.M, t.N, t.k, same ? "indices and values equal" : "DIFFER");
        ok &= same;
    }
    /* zero, copy2d and act's copy (kernels, so that a replayed recording holds them): zero at
     * every start and end within 16-byte lines (its head, 16-byte body and tail), the others
     * byte for byte (NaN payloads, signed zeros) with strides, the bytes around untouched */
    {
        std::vector<unsigned char> buf(200), want;
        int zok = 1;
        for (int a = 0; a < 20; a++)
            for (int n = 0; n < 70; n++) {
                for (size_t i = 0; i < buf.size(); i++) buf[i] = (unsigned char)(i * 7 + 1);
                want = buf;
                memset(want.data() + 32 + a, 0, (size_t)n);
                sr_cuda_zero(buf.data() + 32 + a, (size_t)n);
                zok &= buf == want;
            }
        const int M = 5, d = 13, ldx = 17, ldy = 19;
        std::vector<uint32_t> x((size_t)M * ldx), y((size_t)M * ldy, 0xdeadbeefu), yw(y);
        for (size_t i = 0; i < x.size(); i++) x[i] = (uint32_t)(i * 2654435761u) | 0x7f800001u * (i % 5 == 0);
        x[3] = 0x80000000u; /* -0 */
        for (int r = 0; r < M; r++)
            for (int j = 0; j < d; j++) yw[(size_t)r * ldy + j] = x[(size_t)r * ldx + j];
        zok &= sr_cuda_copy2d(M, d, (const float *)x.data(), ldx, (float *)y.data(), ldy) == SR_OK && y == yw;
        std::vector<uint32_t> z(x.size() + 3, 0xdeadbeefu), zw(z);
        memcpy(zw.data(), x.data(), x.size() * 4);
        zok &= sr_cuda_act(SR_ACT_NONE, x.size(), (const float *)x.data(), (float *)z.data()) == SR_OK && z == zw;
        printf("zero, copy2d, act's copy: %s\n", zok ? "the bytes as memset / memcpy" : "DIFFER");
        ok &= zok;
    }
    printf(ok ? "all agree\n" : "DIFFER\n");
    return !ok;
}
