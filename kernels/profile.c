/*
 * profile.c — a kernel table that counts and times every call of another (SRKIT_PROFILE=1 or
 * "sync", read by sr_kernels_select): per op, the calls and the host wall time spent inside
 * them. Asynchronous tables (CUDA) return from an op once it is queued, so plain mode measures
 * what the host pays per call (launch and argument upload, and the waits of copies, which
 * collect the device time queued before them; copies also count their bytes); "sync"
 * synchronizes after every op so that each op's time includes its own device time (slower,
 * serialized: for finding the expensive ops, not for throughput). The device has no profiler of its own here (no nsys), so this is how
 * `srkit bench` shows where a step's time goes. Counters are atomic; one profiled table per
 * process (the first base table asked for; the tests and the CLI use one device at a time).
 */
#include "../core/internal.h"
#include "kernels.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    P_ALLOC, P_FREE, P_UPLOAD, P_DOWNLOAD, P_SYNC, P_SGEMM, P_ZERO, P_COPY2D, P_TRANSPOSE, P_COPY_ROWS,
    P_WEIGHT_CREATE, P_WEIGHT_FREE, P_GEMM, P_NORM, P_ACT, P_GLU, P_ADD, P_SCALE, P_GATHER, P_ROPE,
    P_CONV2D_S2, P_CONV_DW, P_BATCHNORM, P_LSTM_CELL, P_SOFTMAX, P_LOGSOFTMAX, P_TOPK,
    P_KV_WRITE, P_KV_WRITE2, P_ROPE_KV, P_ATTN, P_GRAPH_BEGIN, P_GRAPH_END, P_COUNT
};
static const char *const p_names[P_COUNT] = {
    "alloc", "free", "upload", "download", "sync", "sgemm", "zero", "copy2d", "transpose", "copy_rows",
    "weight_create", "weight_free", "gemm", "norm", "act", "glu", "add", "scale", "gather", "rope",
    "conv2d_s2", "conv_dw", "batchnorm", "lstm_cell", "softmax", "logsoftmax", "topk",
    "kv_write", "kv_write2", "rope_kv", "attn", "graph_begin", "graph_end"};

static const sr_kernels *base;
static int sync_each;
static sr_kernels prof;
static atomic_uint_least64_t p_calls[P_COUNT], p_ns[P_COUNT], p_bytes[P_COUNT];

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void p_done(int op, uint64_t t0)
{
    if (sync_each && op != P_SYNC) (void)base->sync();
    atomic_fetch_add(&p_calls[op], 1);
    atomic_fetch_add(&p_ns[op], now_ns() - t0);
}

/* status-returning op: time the call */
#define TIMED(op, call)                                                                        \
    do {                                                                                       \
        uint64_t t0_ = now_ns();                                                               \
        sr_status st_ = (call);                                                                \
        p_done(op, t0_);                                                                       \
        return st_;                                                                            \
    } while (0)

static void *p_alloc(size_t bytes)
{
    uint64_t t0 = now_ns();
    void *p = base->alloc(bytes);
    p_done(P_ALLOC, t0);
    return p;
}
static void p_free(void *p)
{
    uint64_t t0 = now_ns();
    base->free(p);
    p_done(P_FREE, t0);
}
static sr_status p_upload(void *d, const void *s, size_t n)
{
    atomic_fetch_add(&p_bytes[P_UPLOAD], n);
    TIMED(P_UPLOAD, base->upload(d, s, n));
}
static sr_status p_download(void *d, const void *s, size_t n)
{
    atomic_fetch_add(&p_bytes[P_DOWNLOAD], n);
    TIMED(P_DOWNLOAD, base->download(d, s, n));
}
static sr_status p_sync(void) { TIMED(P_SYNC, base->sync()); }
static sr_status p_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc)
{
    TIMED(P_SGEMM, base->sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
}
static void p_set_threads(int n) { base->set_threads(n); }
static void p_zero(void *p, size_t bytes)
{
    uint64_t t0 = now_ns();
    base->zero(p, bytes);
    p_done(P_ZERO, t0);
}
static sr_status p_copy2d(int M, int d, const float *x, int ldx, float *y, int ldy)
{
    TIMED(P_COPY2D, base->copy2d(M, d, x, ldx, y, ldy));
}
static sr_status p_transpose(int n, int M, int d, const float *x, int ldx, float *y, int ldy)
{
    TIMED(P_TRANSPOSE, base->transpose(n, M, d, x, ldx, y, ldy));
}
static sr_status p_copy_rows(int n, int d, const float *const *src, float *y, int ldy)
{
    TIMED(P_COPY_ROWS, base->copy_rows(n, d, src, y, ldy));
}
static sr_status p_weight_create(const void *host, sr_dtype dt, int n, int k, const float *scale,
                                 sr_kmul mul, sr_kweight **out)
{
    TIMED(P_WEIGHT_CREATE, base->weight_create(host, dt, n, k, scale, mul, out));
}
static void p_weight_free(sr_kweight *w)
{
    uint64_t t0 = now_ns();
    base->weight_free(w);
    p_done(P_WEIGHT_FREE, t0);
}
static sr_status p_gemm(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                        sr_act act, float alpha, float beta, float *y, int ldy)
{
    TIMED(P_GEMM, base->gemm(M, x, ldx, W, bias, act, alpha, beta, y, ldy));
}
static sr_status p_norm(sr_norm_kind kind, int M, int d, const float *x, int ldx, const float *g,
                        const float *b, float eps, const float *mul, int ld_mul, float *y, int ldy)
{
    TIMED(P_NORM, base->norm(kind, M, d, x, ldx, g, b, eps, mul, ld_mul, y, ldy));
}
static sr_status p_act(sr_act act, size_t n, const float *x, float *y) { TIMED(P_ACT, base->act(act, n, x, y)); }
static sr_status p_glu(sr_glu kind, int M, int d, const float *a, int lda, const float *b, int ldb,
                       float *y, int ldy)
{
    TIMED(P_GLU, base->glu(kind, M, d, a, lda, b, ldb, y, ldy));
}
static sr_status p_add(int M, int d, const float *x, int ldx, float alpha, float *y, int ldy)
{
    TIMED(P_ADD, base->add(M, d, x, ldx, alpha, y, ldy));
}
static sr_status p_scale(int M, int d, float s, float *y, int ldy) { TIMED(P_SCALE, base->scale(M, d, s, y, ldy)); }
static sr_status p_gather(const sr_kweight *E, const int32_t *ids, int n, float *y, int ldy)
{
    TIMED(P_GATHER, base->gather(E, ids, n, y, ldy));
}
static sr_status p_rope(const sr_kbatch *b, int n_head, int hd, const float *inv_freq, float *x, int ldx)
{
    TIMED(P_ROPE, base->rope(b, n_head, hd, inv_freq, x, ldx));
}
static sr_status p_conv2d_s2(int n, int C, int T, int F, const float *in, size_t in_img_stride,
                             size_t in_plane_stride, const float *w, const float *b, int relu, float *out)
{
    TIMED(P_CONV2D_S2, base->conv2d_s2(n, C, T, F, in, in_img_stride, in_plane_stride, w, b, relu, out));
}
static sr_status p_conv_dw(const sr_kbatch *b, int C, int K, const float *x, int ldx, const float *w,
                           const float *bias, sr_kpool *state, int layer, float *y, int ldy)
{
    TIMED(P_CONV_DW, base->conv_dw(b, C, K, x, ldx, w, bias, state, layer, y, ldy));
}
static sr_status p_batchnorm(int M, int C, const float *x, int ldx, const float *mean, const float *var,
                             const float *g, const float *bias, float eps, float *y, int ldy)
{
    TIMED(P_BATCHNORM, base->batchnorm(M, C, x, ldx, mean, var, g, bias, eps, y, ldy));
}
static sr_status p_lstm_cell(int M, int H, const float *gates, int ldg, float *c, int ldc, float *h, int ldh)
{
    TIMED(P_LSTM_CELL, base->lstm_cell(M, H, gates, ldg, c, ldc, h, ldh));
}
static sr_status p_softmax(int M, int N, float *x, int ldx) { TIMED(P_SOFTMAX, base->softmax(M, N, x, ldx)); }
static sr_status p_logsoftmax(int M, int N, const float *x, int ldx, float *y, int ldy)
{
    TIMED(P_LOGSOFTMAX, base->logsoftmax(M, N, x, ldx, y, ldy));
}
static sr_status p_topk(int M, int N, int k, const float *x, int ldx, int32_t *idx, float *val)
{
    TIMED(P_TOPK, base->topk(M, N, k, x, ldx, idx, val));
}
static sr_status p_kv_write(sr_kpool *p, int layer, const sr_kbatch *b, const float *x, int ldx)
{
    TIMED(P_KV_WRITE, base->kv_write(p, layer, b, x, ldx));
}
static sr_status p_kv_write2(sr_kpool *p, sr_kpool *p2, int layer, const sr_kbatch *b, const float *x,
                             int ldx, const float *x2, int ldx2)
{
    TIMED(P_KV_WRITE2, base->kv_write2(p, p2, layer, b, x, ldx, x2, ldx2));
}
static sr_status p_rope_kv(const sr_kbatch *b, int n_head, int n_kv_head, int hd, const float *inv_freq,
                           float *q, int ldq, const float *k, int ldk, const float *v, int ldv, sr_kpool *K,
                           sr_kpool *V, int layer)
{
    TIMED(P_ROPE_KV, base->rope_kv(b, n_head, n_kv_head, hd, inv_freq, q, ldq, k, ldk, v, ldv, K, V, layer));
}
static sr_status p_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq, const sr_kpool *K,
                        const sr_kpool *V, int layer, float *out, int ldo)
{
    TIMED(P_ATTN, base->attn(a, b, q, ldq, K, V, layer, out, ldo));
}

/* graph_end's time is the host's update and launch of the recording (its ops' calls, recorded,
 * count as themselves) */
static sr_status p_graph_begin(sr_kgraph **g) { TIMED(P_GRAPH_BEGIN, base->graph_begin(g)); }
static sr_status p_graph_end(sr_kgraph *g, int run) { TIMED(P_GRAPH_END, base->graph_end(g, run)); }

static pthread_mutex_t p_lock = PTHREAD_MUTEX_INITIALIZER;

sr_status sr_kernels_profiled(const sr_kernels *b, int sync_after_each, const sr_kernels **out)
{
    if (!b || !out) return sr_error(SR_ERR_ARG, "sr_kernels_profiled: table or out is NULL");
    pthread_mutex_lock(&p_lock);
    if (base && base != b) {
        pthread_mutex_unlock(&p_lock);
        *out = NULL;
        return sr_error(SR_ERR_UNSUPPORTED, "SRKIT_PROFILE: the %s table is profiled already; one "
                        "device per process (asked for %s)", base->name, b->name);
    }
    if (!base) {
        sr_kernels t = *b; /* name, host_visible, mem: the base's */
        t.alloc = b->alloc ? p_alloc : NULL;
        t.free = b->free ? p_free : NULL;
        t.upload = b->upload ? p_upload : NULL;
        t.download = b->download ? p_download : NULL;
        t.sync = b->sync ? p_sync : NULL;
        t.sgemm = b->sgemm ? p_sgemm : NULL;
        t.set_threads = b->set_threads ? p_set_threads : NULL;
#define WRAP(f) t.f = b->f ? p_##f : NULL
        WRAP(zero); WRAP(copy2d); WRAP(transpose); WRAP(copy_rows); WRAP(weight_create);
        WRAP(weight_free);
        WRAP(gemm); WRAP(norm); WRAP(act); WRAP(glu); WRAP(add); WRAP(scale); WRAP(gather);
        WRAP(rope); WRAP(conv2d_s2); WRAP(conv_dw); WRAP(batchnorm);
        WRAP(lstm_cell); WRAP(softmax); WRAP(logsoftmax); WRAP(topk); WRAP(kv_write); WRAP(kv_write2); WRAP(rope_kv); WRAP(attn);
#undef WRAP
        /* "sync" waits after every op, which a recording cannot hold: no recording then */
        t.graph_begin = b->graph_begin && !sync_after_each ? p_graph_begin : NULL;
        t.graph_end = b->graph_end && !sync_after_each ? p_graph_end : NULL;
        t.graph_free = b->graph_free;
        prof = t;
        sync_each = sync_after_each != 0;
        base = b;
    }
    pthread_mutex_unlock(&p_lock);
    *out = &prof;
    return SR_OK;
}

int sr_kernels_profile_read(sr_kprof_entry *out, int cap)
{
    int n = 0;
    for (int i = 0; i < P_COUNT; i++) {
        uint64_t c = atomic_load(&p_calls[i]);
        if (!c) continue;
        if (out && n < cap) {
            out[n].op = p_names[i];
            out[n].calls = c;
            out[n].seconds = (double)atomic_load(&p_ns[i]) * 1e-9;
            out[n].bytes = atomic_load(&p_bytes[i]);
        }
        n++;
    }
    return n;
}

void sr_kernels_profile_reset(void)
{
    for (int i = 0; i < P_COUNT; i++) {
        atomic_store(&p_calls[i], 0);
        atomic_store(&p_ns[i], 0);
        atomic_store(&p_bytes[i], 0);
    }
}
