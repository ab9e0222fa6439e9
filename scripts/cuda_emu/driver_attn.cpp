/* driver_attn.cpp — the emulated CUDA attention (sr_cuda_attn from kernels/cuda/attn.cu, run by
 * scripts/cuda_emu/run.sh) against the CPU table's attn, bit for bit: two slots of different
 * history in one pool pair, a sequence of one row over its whole ring and one of nq rows over
 * random ranges (its second row's empty), per case (dtype, heads, K/V heads, head_dim, ring rows, positions, rel-pos,
 * nq), in each form: narrow, wide, grouped (GQA without rel-pos whose scores fit; the others
 * fall back to narrow), split (the 8,200-key ring's weights in five rounds of shared memory)
 * and rows (up to 4 rows of a sequence a block, without rel-pos; cut at 1,920 union keys). Exit status 0 when every output element has the CPU's bits. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <algorithm>
#include <vector>
#include <cstdint>
extern "C" {
#include "kernels.h"
#include "sr.h"
}
sr_status sr_cuda_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq,
                       const sr_kpool *K, const sr_kpool *V, int layer, float *out, int ldo);
extern "C" int sr_cuda_attn_form(int v);
static uint64_t rng = 7;
static float rnd() { rng = rng * 6364136223846793005ULL + 1442695040888963407ULL; return (float)((double)(uint32_t)(rng >> 40) / (double)(1u << 24) * 2.0 - 1.0); }
static int rndi(int n) { return (int)((rnd() + 1.0f) * 0.5f * (float)n) % (n > 0 ? n : 1); }
int main()
{
    const sr_kernels *c = sr_kernels_cpu();
    /* span > 0: every row's range is its last span keys (the rows form cut where two rows'
     * union outgrows its scores' shared memory, 1,920 keys) */
    struct { sr_dtype dt; int H, G, hd, rows, npos, rel, nq, span; } cs[] = {
        {SR_BF16, 8, 2, 128, 800, 1000, 0, 3}, {SR_F32, 6, 6, 64, 700, 700, 0, 3},
        {SR_F16, 2, 1, 200, 300, 350, 0, 3},   {SR_F32, 2, 2, 300, 200, 250, 0, 3},
        {SR_BF16, 2, 1, 64, 8200, 8300, 0, 3}, {SR_F32, 4, 4, 16, 20, 31, 1, 3},
        {SR_BF16, 4, 4, 128, 80, 100, 1, 3},   {SR_F16, 4, 2, 16, 20, 31, 0, 3},
        {SR_F32, 2, 1, 64, 600, 640, 0, 300} /* 301 rows: two launches of ATTN_ROWS */,
        /* the grouped form's shapes: 4 query heads a K/V head (Voxtral's decoder) over a wrapped
         * ring, 8 a head, 2 a head of head_dim 200 (a second column pass) */
        {SR_BF16, 8, 2, 128, 200, 260, 0, 5}, {SR_F32, 8, 1, 32, 100, 130, 0, 4},
        {SR_F16, 4, 2, 200, 150, 170, 0, 3},
        /* the rows form's groups cut at 1,920 keys: ranges of 1,920 in a ring of 2,600 */
        {SR_F32, 2, 2, 64, 2600, 2700, 0, 6, 1920}};
    int total_bad = 0;
    for (auto &k : cs) {
        int w = k.H * k.hd, kw = k.G * k.hd, slots = 2;
        sr_kpool *K, *V;
        sr_kpool_create(c, k.dt, 1, slots, k.rows, kw, &K);
        sr_kpool_create(c, k.dt, 1, slots, k.rows, kw, &V);
        int64_t have[2];
        for (int sl = 0; sl < slots; sl++) {
            int n = k.npos - 7 * sl, row0[2] = {0, n}, slot[1] = {sl};
            int64_t pos[1] = {0};
            have[sl] = n;
            sr_kbatch b = {1, row0, slot, pos};
            std::vector<float> kk((size_t)n * kw), vv((size_t)n * kw);
            for (auto &x : kk) x = rnd();
            for (auto &x : vv) x = rnd();
            c->kv_write(K, 0, &b, kk.data(), kw);
            c->kv_write(V, 0, &b, vv.data(), kw);
        }
        const int M = 1 + k.nq;
        int row0[3] = {0, 1, M}, slot[2] = {1, 0};
        int64_t pos[2] = {have[1] - 1, have[0] - k.nq};
        std::vector<int64_t> lo(M), hi(M);
        for (int s = 0, r = 0; s < 2; s++)
            for (int i = 0; i < row0[s + 1] - row0[s]; i++, r++) {
                int64_t p = pos[s] + i, oldest = have[slot[s]] - k.rows;
                if (oldest < 0) oldest = 0;
                hi[r] = p + 1;
                lo[r] = s == 0 ? oldest : hi[r] - 1 - rndi(k.rows - 1);
                if (lo[r] < oldest) lo[r] = oldest;
                if (k.rel && lo[r] < hi[r] - k.rows) lo[r] = hi[r] - k.rows;
                if (k.span) lo[r] = std::max(oldest, hi[r] - k.span);
                if (s == 1 && i == 1) lo[r] = hi[r]; /* an empty range: a zero row */
            }
        sr_kbatch b = {2, row0, slot, pos};
        sr_kattn a = {};
        a.n_head = k.H; a.n_kv_head = k.G; a.head_dim = k.hd; a.scale = 0.125f; a.lo = lo.data(); a.hi = hi.data();
        std::vector<float> relv, u, v;
        if (k.rel) {
            int nrel = 2 * k.rows + 1;
            relv.resize((size_t)nrel * w); u.resize(w); v.resize(w);
            for (auto &x : relv) x = rnd();
            for (auto &x : u) x = 0.5f * rnd();
            for (auto &x : v) x = 0.5f * rnd();
            a.rel = relv.data(); a.rel_max = k.rows; a.rel_min = -k.rows; a.pos_u = u.data(); a.pos_v = v.data();
        }
        int ld = w + 5;
        std::vector<float> q((size_t)M * ld), oc((size_t)M * ld, 1.0f), oe((size_t)M * ld, 2.0f);
        for (auto &x : q) x = rnd();
        sr_status s1 = c->attn(&a, &b, q.data(), ld, K, V, 0, oc.data(), ld);
        static const int forms[] = {0, 1, 3, 4, 5};
        for (int form : forms) { /* narrow, wide, grouped, split, rows (where they apply): the same bits */
            sr_cuda_attn_form(form);
            std::fill(oe.begin(), oe.end(), 2.0f);
            sr_status s2 = sr_cuda_attn(&a, &b, q.data(), ld, K, V, 0, oe.data(), ld);
            int bad = 0;
            double md = 0;
            for (int r = 0; r < M; r++)
                for (int j = 0; j < w; j++) {
                    float x = oc[(size_t)r * ld + j], y = oe[(size_t)r * ld + j];
                    if (memcmp(&x, &y, 4)) { bad++; md = fmax(md, fabs((double)x - y)); }
                }
            printf("%-6s dtype %-4s heads %d/%d head_dim %3d ring %4d rel %d rows %3d: %d of %d differ (max %.3g)%s\n",
                   form == 5 ? "rows" : form == 4 ? "split" : form == 3 ? "groupd" : form ? "wide" : "narrow", sr_dtype_name(k.dt), k.H, k.G, k.hd, k.rows, k.rel, M, bad,
                   M * w, md, s1 || s2 ? " (an error)" : "");
            total_bad += bad + (s1 != 0) + (s2 != 0);
        }
        sr_kpool_free(c, K);
        sr_kpool_free(c, V);
    }
    printf(total_bad ? "DIFFER\n" : "all bit for bit\n");
    return total_bad != 0;
}
