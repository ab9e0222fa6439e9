/*
 * guard.c — "cpu-guard": the CPU table's ops over memory the host cannot touch outside them, a
 * stand-in for a device on a machine without one. A backend is ready for the CUDA table when
 * every access of its per-chunk path to activations, caches and weights goes through the
 * table (ops, upload, download): that is what this table enforces, with the MMU.
 *
 * Every block of table memory (alloc, the pools made from it, weights) is its own anonymous
 * mapping kept PROT_NONE. An op, upload, download or zero takes the table's lock, opens every
 * block (PROT_READ | PROT_WRITE), checks that each data pointer it was given lies in a block
 * (a host pointer handed to an op is refused with SR_ERR_ARG naming the op and argument, as
 * the CUDA table's SRKIT_CUDA_CHECK=1 does), runs the CPU op, closes every block and unlocks.
 * So a backend that reads or writes table memory on the host faults at that very line (SIGSEGV;
 * under a debugger or ASan the backtrace names it), and one that gives the table host memory
 * gets an error naming the op. The results are the CPU table's, bit for bit.
 *
 * Recording (graph_begin / graph_end) holds the table's contract as the CUDA table's graphs
 * do, on the CPU: while a thread records, its upload, download, sync, sgemm and weight_create
 * fail with SR_ERR_ARG naming the call, and an alloc, free or weight_free makes graph_end fail
 * naming it; the ops themselves run as they are called (a recorded op's arguments are its own
 * either way, and its results are only visible in table memory, which the host cannot read).
 * So a backend whose recorded sequence would break a CUDA capture fails its tests here.
 *
 * For tests and porting only: ops are serialized by the lock and every call re-protects every
 * block (mprotect per block), so it is slow for big models. Selected with device "cpu-guard"
 * (sr_kernels_select; not a config value). Linux / POSIX mmap.
 */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#endif
#include "../../core/internal.h"
#include "cpu_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    char *base;
    size_t len;
} block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block *blocks;
static size_t n_blocks, cap_blocks;

static size_t page_round(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

/* A new PROT_NONE block of at least bytes (lock held by the caller or not needed). */
static void *block_new(size_t bytes)
{
    size_t len = page_round(bytes ? bytes : 1);
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (n_blocks == cap_blocks) {
        size_t cap = cap_blocks ? 2 * cap_blocks : 64;
        block *t = realloc(blocks, cap * sizeof *t);
        if (!t) {
            munmap(p, len);
            return NULL;
        }
        blocks = t;
        cap_blocks = cap;
    }
    blocks[n_blocks++] = (block){p, len};
    return p;
}

static void block_drop(void *p)
{
    for (size_t i = 0; i < n_blocks; i++)
        if (blocks[i].base == p) {
            munmap(p, blocks[i].len);
            blocks[i] = blocks[--n_blocks];
            return;
        }
}

/* 1 when p points into a block; NULL passes (the op's own checks decide). */
static int in_block(const void *p)
{
    if (!p) return 1;
    const char *c = p;
    for (size_t i = 0; i < n_blocks; i++)
        if (c >= blocks[i].base && c < blocks[i].base + blocks[i].len) return 1;
    return 0;
}

static void set_all(int prot)
{
    for (size_t i = 0; i < n_blocks; i++) mprotect(blocks[i].base, blocks[i].len, prot);
}

static void open_all(void)
{
    pthread_mutex_lock(&mu);
    set_all(PROT_READ | PROT_WRITE);
}

static void close_all(void)
{
    set_all(PROT_NONE);
    pthread_mutex_unlock(&mu);
}

/* Inside an op (blocks open, lock held): SR_ERR_ARG when a data pointer is not table memory. */
#define TABLE_MEM(p, op, arg)                                                                  \
    do {                                                                                       \
        if (!in_block(p)) {                                                                    \
            close_all();                                                                       \
            return sr_error(SR_ERR_ARG, "cpu-guard %s: %s (%p) is not table memory", op, arg,  \
                            (const void *)(p));                                                \
        }                                                                                      \
    } while (0)

/* ---- memory ---------------------------------------------------------------------------- */

/* ---- recording ----------------------------------------------------------------------------- */

struct sr_kgraph {
    int site; /* a record exists per call site; nothing to keep on the CPU */
};
static _Thread_local sr_kgraph *rec;          /* this thread's recording, NULL when none */
static _Thread_local const char *rec_refused; /* a status-less call refused meanwhile */
static atomic_ullong rec_runs;

/* A status-less call refused while recording: graph_end reports the first one, by name. */
static void refuse_later(const char *what)
{
    if (!rec_refused) rec_refused = what;
}

static sr_status refused(const char *what)
{
    return sr_error(SR_ERR_ARG, "cpu-guard %s: called while recording a graph (between "
                    "graph_begin and graph_end only ops may be called)", what);
}

static sr_status g_graph_begin(sr_kgraph **g)
{
    if (!g) return sr_error(SR_ERR_ARG, "cpu-guard graph_begin: g is NULL");
    if (rec) return sr_error(SR_ERR_ARG, "cpu-guard graph_begin: this thread is recording "
                             "already (one recording at a time: graph_end first)");
    if (!*g && !(*g = calloc(1, sizeof **g)))
        return sr_error(SR_ERR_NOMEM, "cpu-guard graph_begin: a record");
    rec = *g;
    rec_refused = NULL;
    return SR_OK;
}

static sr_status g_graph_end(sr_kgraph *g, int run)
{
    sr_kgraph *r = rec;
    const char *why = rec_refused;
    rec = NULL;
    rec_refused = NULL;
    if (!run) return SR_OK;
    if (!r) return sr_error(SR_ERR_ARG, "cpu-guard graph_end: no graph_begin on this thread");
    if (g != r) return sr_error(SR_ERR_ARG, "cpu-guard graph_end: g is not the record this "
                                "thread's graph_begin started (the recording is dropped)");
    if (why) return refused(why);
    atomic_fetch_add(&rec_runs, 1);
    return SR_OK;
}

static void g_graph_free(sr_kgraph *g) { free(g); }

unsigned long long sr_kernels_cpu_guard_recordings(void) { return atomic_load(&rec_runs); }

/* ---- memory ---------------------------------------------------------------------------------- */

static void *g_alloc(size_t bytes)
{
    if (rec) {
        refuse_later("alloc");
        return NULL;
    }
    pthread_mutex_lock(&mu);
    void *p = block_new(bytes);
    pthread_mutex_unlock(&mu);
    return p;
}

static void g_free(void *p)
{
    if (!p) return;
    if (rec) {
        refuse_later("free");
        return;
    }
    pthread_mutex_lock(&mu);
    block_drop(p);
    pthread_mutex_unlock(&mu);
}

static sr_status g_upload(void *dst, const void *src, size_t bytes)
{
    if (rec) return refused("upload");
    open_all();
    TABLE_MEM(dst, "upload", "dst");
    sr_status st = sr_kernels_cpu()->upload(dst, src, bytes);
    close_all();
    return st;
}

static sr_status g_download(void *dst, const void *src, size_t bytes)
{
    if (rec) return refused("download");
    open_all();
    TABLE_MEM(src, "download", "src");
    sr_status st = sr_kernels_cpu()->download(dst, src, bytes);
    close_all();
    return st;
}

static sr_status g_sync(void) { return rec ? refused("sync") : SR_OK; }

static void g_zero(void *p, size_t bytes)
{
    open_all();
    if (in_block(p)) sr_kernels_cpu()->zero(p, bytes);
    close_all();
}

/* ---- weights: the CPU's panels moved into blocks --------------------------------------- */

static sr_status g_weight_create(const void *host, sr_dtype dt, int n, int k, const float *scale,
                                 sr_kmul mul, sr_kweight **out)
{
    if (rec) {
        if (out) *out = NULL;
        return refused("weight_create");
    }
    sr_kweight *W = NULL;
    sr_status st = sr_cpu_weight_create(host, dt, n, k, scale, mul, &W);
    if (st) return st;
    size_t sb = sr_cpu_weight_scale_bytes(W), db = W->bytes - sb;
    pthread_mutex_lock(&mu);
    void *d = block_new(db), *s = sb ? block_new(sb) : NULL;
    if (!d || (sb && !s)) {
        if (d) block_drop(d);
        if (s) block_drop(s);
        pthread_mutex_unlock(&mu);
        sr_cpu_weight_free(W);
        *out = NULL;
        return sr_error(SR_ERR_NOMEM, "cpu-guard weight_create: %zu bytes", db + sb);
    }
    set_all(PROT_READ | PROT_WRITE);
    memcpy(d, W->data, db);
    if (sb) memcpy(s, W->scale, sb);
    set_all(PROT_NONE);
    pthread_mutex_unlock(&mu);
    free(W->data);
    free(W->scale);
    W->data = d;
    W->scale = s;
    *out = W;
    return SR_OK;
}

static void g_weight_free(sr_kweight *W)
{
    if (!W) return;
    if (rec) {
        refuse_later("weight_free");
        return;
    }
    g_free(W->data);
    g_free(W->scale);
    free(W);
}

/* ---- the ops: checked, opened, run, closed ---------------------------------------------- */

static sr_status g_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (rec) return refused("sgemm");
    open_all();
    TABLE_MEM(A, "sgemm", "A");
    TABLE_MEM(B, "sgemm", "B");
    TABLE_MEM(C, "sgemm", "C");
    sr_status st = sr_kernels_cpu()->sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    close_all();
    return st;
}

static sr_status g_copy2d(int M, int d, const float *x, int ldx, float *y, int ldy)
{
    open_all();
    TABLE_MEM(x, "copy2d", "x");
    TABLE_MEM(y, "copy2d", "y");
    sr_status st = sr_kernels_cpu()->copy2d(M, d, x, ldx, y, ldy);
    close_all();
    return st;
}

static sr_status g_copy_rows(int n, int d, const float *const *src, float *y, int ldy)
{
    open_all();
    if (src && y && n > 0 && d > 0) { /* (bad arguments: the CPU op's checks say which) */
        for (int i = 0; i < n; i++)
            if (src[i]) TABLE_MEM(src[i], "copy_rows", "src[i]");
        TABLE_MEM(y, "copy_rows", "y");
    }
    sr_status st = sr_kernels_cpu()->copy_rows(n, d, src, y, ldy);
    close_all();
    return st;
}

static sr_status g_transpose(int n, int M, int d, const float *x, int ldx, float *y, int ldy)
{
    open_all();
    TABLE_MEM(x, "transpose", "x");
    TABLE_MEM(y, "transpose", "y");
    sr_status st = sr_kernels_cpu()->transpose(n, M, d, x, ldx, y, ldy);
    close_all();
    return st;
}

static sr_status g_gemm(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                        sr_act act, float alpha, float beta, float *y, int ldy)
{
    open_all();
    TABLE_MEM(x, "gemm", "x");
    TABLE_MEM(bias, "gemm", "bias");
    TABLE_MEM(y, "gemm", "y");
    if (W) TABLE_MEM(W->data, "gemm", "W->data");
    sr_status st = sr_cpu_gemm(M, x, ldx, W, bias, act, alpha, beta, y, ldy);
    close_all();
    return st;
}

static sr_status g_gather(const sr_kweight *E, const int32_t *ids, int n, float *y, int ldy)
{
    open_all();
    TABLE_MEM(y, "gather", "y");
    if (E) TABLE_MEM(E->data, "gather", "E->data");
    sr_status st = sr_cpu_gather(E, ids, n, y, ldy);
    close_all();
    return st;
}

static sr_status g_norm(sr_norm_kind kind, int M, int d, const float *x, int ldx, const float *g,
                        const float *b, float eps, const float *mul, int ld_mul, float *y, int ldy)
{
    open_all();
    TABLE_MEM(x, "norm", "x");
    TABLE_MEM(g, "norm", "g");
    TABLE_MEM(b, "norm", "b");
    TABLE_MEM(mul, "norm", "mul");
    TABLE_MEM(y, "norm", "y");
    sr_status st = sr_cpu_norm(kind, M, d, x, ldx, g, b, eps, mul, ld_mul, y, ldy);
    close_all();
    return st;
}

static sr_status g_act(sr_act act, size_t n, const float *x, float *y)
{
    open_all();
    TABLE_MEM(x, "act", "x");
    TABLE_MEM(y, "act", "y");
    sr_status st = sr_cpu_act(act, n, x, y);
    close_all();
    return st;
}

static sr_status g_glu(sr_glu kind, int M, int d, const float *a, int lda, const float *b, int ldb,
                       float *y, int ldy)
{
    open_all();
    TABLE_MEM(a, "glu", "a");
    TABLE_MEM(b, "glu", "b");
    TABLE_MEM(y, "glu", "y");
    sr_status st = sr_cpu_glu(kind, M, d, a, lda, b, ldb, y, ldy);
    close_all();
    return st;
}

static sr_status g_add(int M, int d, const float *x, int ldx, float alpha, float *y, int ldy)
{
    open_all();
    TABLE_MEM(x, "add", "x");
    TABLE_MEM(y, "add", "y");
    sr_status st = sr_cpu_add(M, d, x, ldx, alpha, y, ldy);
    close_all();
    return st;
}

static sr_status g_scale(int M, int d, float s, float *y, int ldy)
{
    open_all();
    TABLE_MEM(y, "scale", "y");
    sr_status st = sr_cpu_scale(M, d, s, y, ldy);
    close_all();
    return st;
}

static sr_status g_rope(const sr_kbatch *b, int n_head, int hd, const float *inv_freq, float *x,
                        int ldx)
{
    open_all();
    TABLE_MEM(inv_freq, "rope", "inv_freq");
    TABLE_MEM(x, "rope", "x");
    sr_status st = sr_cpu_rope(b, n_head, hd, inv_freq, x, ldx);
    close_all();
    return st;
}

static sr_status g_conv2d_s2(int n, int C, int T, int F, const float *in, size_t in_img_stride,
                             size_t in_plane_stride, const float *w, const float *b, int relu,
                             float *out)
{
    open_all();
    TABLE_MEM(in, "conv2d_s2", "in");
    TABLE_MEM(w, "conv2d_s2", "w");
    TABLE_MEM(b, "conv2d_s2", "b");
    TABLE_MEM(out, "conv2d_s2", "out");
    sr_status st = sr_cpu_conv2d_s2(n, C, T, F, in, in_img_stride, in_plane_stride, w, b, relu, out);
    close_all();
    return st;
}

static sr_status g_conv_dw(const sr_kbatch *b, int C, int K, const float *x, int ldx,
                           const float *w, const float *bias, sr_kpool *state, int layer, float *y,
                           int ldy)
{
    open_all();
    TABLE_MEM(x, "conv_dw", "x");
    TABLE_MEM(w, "conv_dw", "w");
    TABLE_MEM(bias, "conv_dw", "bias");
    TABLE_MEM(y, "conv_dw", "y");
    if (state) TABLE_MEM(state->data, "conv_dw", "state->data");
    sr_status st = sr_cpu_conv_dw(b, C, K, x, ldx, w, bias, state, layer, y, ldy);
    close_all();
    return st;
}

static sr_status g_batchnorm(int M, int C, const float *x, int ldx, const float *mean,
                             const float *var, const float *g, const float *bias, float eps,
                             float *y, int ldy)
{
    open_all();
    TABLE_MEM(x, "batchnorm", "x");
    TABLE_MEM(mean, "batchnorm", "mean");
    TABLE_MEM(var, "batchnorm", "var");
    TABLE_MEM(g, "batchnorm", "g");
    TABLE_MEM(bias, "batchnorm", "bias");
    TABLE_MEM(y, "batchnorm", "y");
    sr_status st = sr_cpu_batchnorm(M, C, x, ldx, mean, var, g, bias, eps, y, ldy);
    close_all();
    return st;
}

static sr_status g_lstm_cell(int M, int H, const float *gates, int ldg, float *c, int ldc, float *h,
                             int ldh)
{
    open_all();
    TABLE_MEM(gates, "lstm_cell", "gates");
    TABLE_MEM(c, "lstm_cell", "c");
    TABLE_MEM(h, "lstm_cell", "h");
    sr_status st = sr_cpu_lstm_cell(M, H, gates, ldg, c, ldc, h, ldh);
    close_all();
    return st;
}

static sr_status g_softmax(int M, int N, float *x, int ldx)
{
    open_all();
    TABLE_MEM(x, "softmax", "x");
    sr_status st = sr_cpu_softmax(M, N, x, ldx);
    close_all();
    return st;
}

static sr_status g_logsoftmax(int M, int N, const float *x, int ldx, float *y, int ldy)
{
    open_all();
    TABLE_MEM(x, "logsoftmax", "x");
    TABLE_MEM(y, "logsoftmax", "y");
    sr_status st = sr_cpu_logsoftmax(M, N, x, ldx, y, ldy);
    close_all();
    return st;
}

static sr_status g_topk(int M, int N, int k, const float *x, int ldx, int32_t *idx, float *val)
{
    open_all();
    TABLE_MEM(x, "topk", "x");
    TABLE_MEM(idx, "topk", "idx");
    TABLE_MEM(val, "topk", "val");
    sr_status st = sr_cpu_topk(M, N, k, x, ldx, idx, val);
    close_all();
    return st;
}

static sr_status g_kv_write(sr_kpool *p, int layer, const sr_kbatch *b, const float *x, int ldx)
{
    open_all();
    TABLE_MEM(x, "kv_write", "x");
    if (p) TABLE_MEM(p->data, "kv_write", "p->data");
    sr_status st = sr_cpu_kv_write(p, layer, b, x, ldx);
    close_all();
    return st;
}

static sr_status g_kv_write2(sr_kpool *p, sr_kpool *p2, int layer, const sr_kbatch *b,
                             const float *x, int ldx, const float *x2, int ldx2)
{
    open_all();
    TABLE_MEM(x, "kv_write2", "x");
    TABLE_MEM(x2, "kv_write2", "x2");
    if (p) TABLE_MEM(p->data, "kv_write2", "p->data");
    if (p2) TABLE_MEM(p2->data, "kv_write2", "p2->data");
    sr_status st = sr_cpu_kv_write2(p, p2, layer, b, x, ldx, x2, ldx2);
    close_all();
    return st;
}

static sr_status g_rope_kv(const sr_kbatch *b, int n_head, int n_kv_head, int hd,
                           const float *inv_freq, float *q, int ldq, const float *k, int ldk,
                           const float *v, int ldv, sr_kpool *K, sr_kpool *V, int layer)
{
    open_all();
    TABLE_MEM(inv_freq, "rope_kv", "inv_freq");
    TABLE_MEM(q, "rope_kv", "q");
    TABLE_MEM(k, "rope_kv", "k");
    TABLE_MEM(v, "rope_kv", "v");
    if (K) TABLE_MEM(K->data, "rope_kv", "K->data");
    if (V) TABLE_MEM(V->data, "rope_kv", "V->data");
    sr_status st = sr_cpu_rope_kv(b, n_head, n_kv_head, hd, inv_freq, q, ldq, k, ldk, v, ldv, K, V, layer);
    close_all();
    return st;
}

static sr_status g_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq,
                        const sr_kpool *K, const sr_kpool *V, int layer, float *out, int ldo)
{
    open_all();
    TABLE_MEM(q, "attn", "q");
    TABLE_MEM(out, "attn", "out");
    if (K) TABLE_MEM(K->data, "attn", "K->data");
    if (V) TABLE_MEM(V->data, "attn", "V->data");
    if (a) {
        TABLE_MEM(a->rel, "attn", "rel");
        TABLE_MEM(a->pos_u, "attn", "pos_u");
        TABLE_MEM(a->pos_v, "attn", "pos_v");
    }
    sr_status st = sr_cpu_attn(a, b, q, ldq, K, V, layer, out, ldo);
    close_all();
    return st;
}

static void g_set_threads(int n) { sr_kernels_cpu()->set_threads(n); }

static const sr_kernels guard_table = {
    .name = "cpu-guard",
    .alloc = g_alloc,
    .free = g_free,
    .upload = g_upload,
    .download = g_download,
    .sync = g_sync,
    .sgemm = g_sgemm,
    .set_threads = g_set_threads,
    .zero = g_zero,
    .copy2d = g_copy2d,
    .transpose = g_transpose,
    .copy_rows = g_copy_rows,
    .weight_create = g_weight_create,
    .weight_free = g_weight_free,
    .gemm = g_gemm,
    .norm = g_norm,
    .act = g_act,
    .glu = g_glu,
    .add = g_add,
    .scale = g_scale,
    .gather = g_gather,
    .rope = g_rope,
    .conv2d_s2 = g_conv2d_s2,
    .conv_dw = g_conv_dw,
    .batchnorm = g_batchnorm,
    .lstm_cell = g_lstm_cell,
    .softmax = g_softmax,
    .logsoftmax = g_logsoftmax,
    .topk = g_topk,
    .kv_write = g_kv_write,
    .kv_write2 = g_kv_write2,
    .rope_kv = g_rope_kv,
    .attn = g_attn,
    .graph_begin = g_graph_begin,
    .graph_end = g_graph_end,
    .graph_free = g_graph_free,
};

const sr_kernels *sr_kernels_cpu_guard(void) { return &guard_table; }
