/*
 * profile.c — a kernel table that counts and times every call of another (SRKIT_PROFILE=1, sync
 * or device, read by sr_kernels_select): per op, the calls and the host wall time spent inside
 * them, and per gemm weight shape (attn head layout) and row-count class the same.
 * Asynchronous tables (CUDA) return from an op once it is queued, so plain mode measures what
 * the host pays per call (launch and argument upload, and the waits of copies, which collect
 * the device time queued before them; copies also count their bytes); "sync" synchronizes
 * after every op so that each op's time includes its own device time (slower, serialized, and
 * each wait adds its own cost to a call); "device" brackets every op that queues work with two
 * of the base table's marks (CUDA events) and adds the device time between them to the op,
 * read when a copy or sync has waited anyway: the step stays pipelined, so the figures are the
 * kernels' own time where the host keeps ahead of the device. The device has no profiler of its
 * own here (no nsys), so this is how `srkit bench` shows where a step's time goes. Counters are
 * atomic; one profiled table per process (the first base table asked for; the tests and the
 * CLI use one device at a time).
 */
#include "../core/internal.h"
#include "kernels.h"

#include <limits.h>
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
static atomic_int mode; /* SR_KPROF_* */
static sr_kernels prof;
static atomic_uint_least64_t p_calls[P_COUNT], p_ns[P_COUNT], p_bytes[P_COUNT], p_timed[P_COUNT],
    p_dev_ns[P_COUNT];

/* gemm calls by weight shape and row-count class (sr_kprof_gemm), in order of first call;
 * g_lock also guards the attn classes below */
#define GEMM_SHAPES 128
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static sr_kprof_gemm g_shape[GEMM_SHAPES];
static int g_n;
static const int m_class[][2] = {{1, 1}, {2, 4}, {5, 16}, {17, 64}, {65, 256}, {257, INT_MAX}};
/* attn's classes of keys a row (a call's mean, rounded up) */
static const int k_class[][2] = {{1, 128}, {129, 512}, {513, 2048}, {2049, INT_MAX}};

/* attn calls by head layout, row-count and key-count class (sr_kprof_attn), in order of first
 * call */
#define ATTN_SHAPES 64
static sr_kprof_attn a_shape[ATTN_SHAPES];
static int a_n;

/* device mode: the marks around each timed op call not read yet, oldest first */
#define PENDING 4096
typedef struct {
    void *a, *b;
    int op, shape; /* shape: index in g_shape (gemm) or a_shape (attn), or -1 */
} pending;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pending pend[PENDING];
static int pend_n;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t p_done(int op, uint64_t t0)
{
    if (atomic_load(&mode) == SR_KPROF_SYNC && op != P_SYNC) (void)base->sync();
    const uint64_t ns = now_ns() - t0;
    atomic_fetch_add(&p_calls[op], 1);
    atomic_fetch_add(&p_ns[op], ns);
    return ns;
}

/* Reads the first n pending marks (mark_ms waits for each one's end) into their ops and shapes,
 * and gives them back. Called with q_lock held. */
static void q_read(int n)
{
    for (int i = 0; i < n; i++) {
        double ms = base->mark_ms(pend[i].a, pend[i].b);
        if (ms >= 0) {
            uint64_t ns = (uint64_t)(ms * 1e6 + 0.5);
            atomic_fetch_add(&p_timed[pend[i].op], 1);
            atomic_fetch_add(&p_dev_ns[pend[i].op], ns);
            const int sh = pend[i].shape;
            pthread_mutex_lock(&g_lock);
            if (pend[i].op == P_GEMM && sh >= 0 && sh < g_n) { /* (not if a reset came between) */
                g_shape[sh].timed++;
                g_shape[sh].device_seconds += (double)ns * 1e-9;
            } else if (pend[i].op == P_ATTN && sh >= 0 && sh < a_n) {
                a_shape[sh].timed++;
                a_shape[sh].device_seconds += (double)ns * 1e-9;
            }
            pthread_mutex_unlock(&g_lock);
        }
        base->mark_free(pend[i].a);
        base->mark_free(pend[i].b);
    }
    memmove(pend, pend + n, (size_t)(pend_n - n) * sizeof pend[0]);
    pend_n -= n;
}

static void q_read_all(void)
{
    pthread_mutex_lock(&q_lock);
    q_read(pend_n);
    pthread_mutex_unlock(&q_lock);
}

/* The mark before an op's call (device mode; NULL otherwise or when none was made). */
static void *p_mark(void) { return atomic_load(&mode) == SR_KPROF_DEVICE ? base->mark() : NULL; }

/* After the call: its end mark, and the pair queued for reading (when the queue is full, its
 * older half is read first: those marks are the likeliest reached). */
static void p_marked(int op, int shape, void *a)
{
    if (!a) return;
    void *b = base->mark();
    if (!b) {
        base->mark_free(a);
        return;
    }
    pthread_mutex_lock(&q_lock);
    if (pend_n == PENDING) q_read(PENDING / 2);
    pend[pend_n++] = (pending){.a = a, .b = b, .op = op, .shape = shape};
    pthread_mutex_unlock(&q_lock);
}

/* status-returning op that queues device work: time the call (and mark it) */
#define TIMED(op, call)                                                                        \
    do {                                                                                       \
        void *m0_ = p_mark();                                                                  \
        uint64_t t0_ = now_ns();                                                               \
        sr_status st_ = (call);                                                                \
        p_done(op, t0_);                                                                       \
        p_marked(op, -1, m0_);                                                                 \
        return st_;                                                                            \
    } while (0)

/* a host-side call (memory, copies, waits): timed, not marked */
#define HOSTED(op, call)                                                                       \
    do {                                                                                       \
        uint64_t t0_ = now_ns();                                                               \
        sr_status st_ = (call);                                                                \
        p_done(op, t0_);                                                                       \
        return st_;                                                                            \
    } while (0)

/* the row-count class of M >= 1 (an index in m_class) */
static int row_class(int64_t M)
{
    int c = 0;
    while (M > m_class[c][1]) c++;
    return c;
}

/* g_shape's index of W's shape at M rows (a new class appended; -1 when all are taken) */
static int gemm_shape(int M, const sr_kweight *W)
{
    if (M < 1 || !W) return -1;
    const int c = row_class(M);
    pthread_mutex_lock(&g_lock);
    int i = 0;
    while (i < g_n && !(g_shape[i].n == W->n && g_shape[i].k == W->k && g_shape[i].dtype == W->dtype &&
                        g_shape[i].mul == W->mul && g_shape[i].m_lo == m_class[c][0]))
        i++;
    if (i == g_n && g_n < GEMM_SHAPES)
        g_shape[g_n++] = (sr_kprof_gemm){.n = W->n, .k = W->k, .dtype = W->dtype, .mul = W->mul,
                                         .m_lo = m_class[c][0], .m_hi = m_class[c][1],
                                         .weight_bytes = W->bytes};
    pthread_mutex_unlock(&g_lock);
    return i < g_n ? i : -1;
}

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
    HOSTED(P_UPLOAD, base->upload(d, s, n));
}
static sr_status p_download(void *d, const void *s, size_t n)
{
    atomic_fetch_add(&p_bytes[P_DOWNLOAD], n);
    const uint64_t t0 = now_ns();
    const sr_status st = base->download(d, s, n);
    p_done(P_DOWNLOAD, t0);
    if (atomic_load(&mode) == SR_KPROF_DEVICE) q_read_all(); /* reached: the copy waited */
    return st;
}
static sr_status p_sync(void)
{
    const uint64_t t0 = now_ns();
    const sr_status st = base->sync();
    p_done(P_SYNC, t0);
    if (atomic_load(&mode) == SR_KPROF_DEVICE) q_read_all();
    return st;
}
static sr_status p_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc)
{
    TIMED(P_SGEMM, base->sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
}
static void p_set_threads(int n) { base->set_threads(n); }
static void p_zero(void *p, size_t bytes)
{
    void *m0 = p_mark();
    uint64_t t0 = now_ns();
    base->zero(p, bytes);
    p_done(P_ZERO, t0);
    p_marked(P_ZERO, -1, m0);
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
    HOSTED(P_WEIGHT_CREATE, base->weight_create(host, dt, n, k, scale, mul, out));
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
    void *m0 = p_mark();
    const uint64_t t0 = now_ns();
    const sr_status st = base->gemm(M, x, ldx, W, bias, act, alpha, beta, y, ldy);
    const uint64_t ns = p_done(P_GEMM, t0);
    const int sh = st ? -1 : gemm_shape(M, W); /* (a refused call's arguments are not read) */
    if (sh >= 0) {
        pthread_mutex_lock(&g_lock);
        g_shape[sh].calls++;
        g_shape[sh].rows += (uint64_t)M;
        g_shape[sh].seconds += (double)ns * 1e-9;
        pthread_mutex_unlock(&g_lock);
    }
    p_marked(P_GEMM, sh, m0);
    return st;
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
/* a_shape's index of a done attn call's class, its rows and (row, key) pairs counted in (-1:
 * every class taken) */
static int attn_shape(const sr_kattn *a, const sr_kbatch *b, const sr_kpool *K, const sr_kpool *V)
{
    if (!a || !b || !K || !V || !a->lo || !a->hi || !b->row0 || b->n_seq < 1) return -1;
    const int64_t rows = b->row0[b->n_seq];
    if (rows < 1 || rows > INT_MAX) return -1;
    uint64_t keys = 0;
    for (int64_t r = 0; r < rows; r++)
        if (a->hi[r] > a->lo[r]) keys += (uint64_t)(a->hi[r] - a->lo[r]);
    const int c = row_class(rows), rel = a->rel != NULL;
    const uint64_t per_row = (keys + (uint64_t)rows - 1) / (uint64_t)rows;
    int kc = 0;
    while (kc < 3 && per_row > (uint64_t)k_class[kc][1]) kc++;
    pthread_mutex_lock(&g_lock);
    int i = 0;
    while (i < a_n && !(a_shape[i].n_head == a->n_head && a_shape[i].n_kv_head == a->n_kv_head &&
                        a_shape[i].head_dim == a->head_dim && a_shape[i].rel == rel &&
                        a_shape[i].k_dtype == K->dtype && a_shape[i].v_dtype == V->dtype &&
                        a_shape[i].m_lo == m_class[c][0] && a_shape[i].k_lo == k_class[kc][0]))
        i++;
    if (i == a_n && a_n < ATTN_SHAPES)
        a_shape[a_n++] = (sr_kprof_attn){.n_head = a->n_head, .n_kv_head = a->n_kv_head,
                                         .head_dim = a->head_dim, .rel = rel, .k_dtype = K->dtype,
                                         .v_dtype = V->dtype, .m_lo = m_class[c][0],
                                         .m_hi = m_class[c][1], .k_lo = k_class[kc][0],
                                         .k_hi = k_class[kc][1]};
    if (i < a_n) {
        a_shape[i].calls++;
        a_shape[i].rows += (uint64_t)rows;
        a_shape[i].keys += keys;
        a_shape[i].kv_bytes += (double)keys * (double)a->n_kv_head * (double)a->head_dim *
                               (double)(sr_dtype_size(K->dtype) + sr_dtype_size(V->dtype));
    }
    pthread_mutex_unlock(&g_lock);
    return i < a_n ? i : -1;
}

static sr_status p_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq, const sr_kpool *K,
                        const sr_kpool *V, int layer, float *out, int ldo)
{
    void *m0 = p_mark();
    const uint64_t t0 = now_ns();
    const sr_status st = base->attn(a, b, q, ldq, K, V, layer, out, ldo);
    const uint64_t ns = p_done(P_ATTN, t0);
    const int sh = st ? -1 : attn_shape(a, b, K, V);
    if (sh >= 0) {
        pthread_mutex_lock(&g_lock);
        a_shape[sh].seconds += (double)ns * 1e-9;
        pthread_mutex_unlock(&g_lock);
    }
    p_marked(P_ATTN, sh, m0);
    return st;
}

/* graph_end's time is the host's update and launch of the recording (its ops' calls, recorded,
 * count as themselves). Under sync and device nothing is recorded (a recording holds neither
 * the waits nor the marks): graph_begin and graph_end then return SR_OK and the ops run as
 * called, which the contract allows a table. forwarded: whether this thread's graph_begin went
 * to the base and started a recording (so its graph_end goes there too, whatever the mode
 * meanwhile). */
static _Thread_local int forwarded;
static sr_status p_graph_begin(sr_kgraph **g)
{
    if (atomic_load(&mode) != SR_KPROF_HOST) return SR_OK;
    const uint64_t t0 = now_ns();
    const sr_status st = base->graph_begin(g);
    p_done(P_GRAPH_BEGIN, t0);
    forwarded = st == SR_OK;
    return st;
}
static sr_status p_graph_end(sr_kgraph *g, int run)
{
    if (!forwarded) return SR_OK;
    forwarded = 0;
    HOSTED(P_GRAPH_END, base->graph_end(g, run));
}

static pthread_mutex_t p_lock = PTHREAD_MUTEX_INITIALIZER;

sr_status sr_kernels_profiled(const sr_kernels *b, int m, const sr_kernels **out)
{
    if (!b || !out) return sr_error(SR_ERR_ARG, "sr_kernels_profiled: table or out is NULL");
    *out = NULL;
    if (m != SR_KPROF_HOST && m != SR_KPROF_SYNC && m != SR_KPROF_DEVICE)
        return sr_error(SR_ERR_ARG, "sr_kernels_profiled: mode %d (0 host, 1 sync, 2 device)", m);
    if (m == SR_KPROF_DEVICE && (!b->mark || !b->mark_ms || !b->mark_free))
        return sr_error(SR_ERR_UNSUPPORTED, "SRKIT_PROFILE=device: the %s table has no device "
                        "time marks", b->name);
    pthread_mutex_lock(&p_lock);
    if (base && base != b) {
        pthread_mutex_unlock(&p_lock);
        return sr_error(SR_ERR_UNSUPPORTED, "SRKIT_PROFILE: the %s table is profiled already; one "
                        "device per process (asked for %s)", base->name, b->name);
    }
    if (!base) {
        sr_kernels t = *b; /* name, host_visible, mem, the marks: the base's */
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
        WRAP(graph_begin); WRAP(graph_end);
#undef WRAP
        t.graph_free = b->graph_free;
        prof = t;
        base = b;
    }
    if (atomic_load(&mode) == SR_KPROF_DEVICE && m != SR_KPROF_DEVICE) q_read_all();
    atomic_store(&mode, m);
    pthread_mutex_unlock(&p_lock);
    *out = &prof;
    return SR_OK;
}

int sr_kernels_profile_read(sr_kprof_entry *out, int cap)
{
    if (base && atomic_load(&mode) == SR_KPROF_DEVICE) q_read_all();
    int n = 0;
    for (int i = 0; i < P_COUNT; i++) {
        uint64_t c = atomic_load(&p_calls[i]);
        if (!c) continue;
        if (out && n < cap)
            out[n] = (sr_kprof_entry){.op = p_names[i], .calls = c,
                                      .seconds = (double)atomic_load(&p_ns[i]) * 1e-9,
                                      .bytes = atomic_load(&p_bytes[i]),
                                      .timed = atomic_load(&p_timed[i]),
                                      .device_seconds = (double)atomic_load(&p_dev_ns[i]) * 1e-9};
        n++;
    }
    return n;
}

/* The first cap of the *count classes at src (es bytes each) into out, after the pending marks;
 * returns *count. */
static int read_classes(void *out, int cap, const void *src, const int *count, size_t es)
{
    if (base && atomic_load(&mode) == SR_KPROF_DEVICE) q_read_all();
    pthread_mutex_lock(&g_lock);
    const int n = *count;
    if (out && cap > 0) memcpy(out, src, (size_t)SR_MIN(n, cap) * es);
    pthread_mutex_unlock(&g_lock);
    return n;
}

int sr_kernels_profile_gemm_read(sr_kprof_gemm *out, int cap)
{
    return read_classes(out, cap, g_shape, &g_n, sizeof g_shape[0]);
}

int sr_kernels_profile_attn_read(sr_kprof_attn *out, int cap)
{
    return read_classes(out, cap, a_shape, &a_n, sizeof a_shape[0]);
}

void sr_kernels_profile_reset(void)
{
    if (base && atomic_load(&mode) == SR_KPROF_DEVICE) q_read_all(); /* then dropped with the rest */
    for (int i = 0; i < P_COUNT; i++) {
        atomic_store(&p_calls[i], 0);
        atomic_store(&p_ns[i], 0);
        atomic_store(&p_bytes[i], 0);
        atomic_store(&p_timed[i], 0);
        atomic_store(&p_dev_ns[i], 0);
    }
    pthread_mutex_lock(&g_lock);
    g_n = 0;
    a_n = 0;
    pthread_mutex_unlock(&g_lock);
}

void sr_kernels_profile_unbind(void)
{
    pthread_mutex_lock(&p_lock);
    sr_kernels_profile_reset();
    base = NULL;
    atomic_store(&mode, SR_KPROF_HOST);
    pthread_mutex_unlock(&p_lock);
}
