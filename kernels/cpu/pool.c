/*
 * pool.c — the worker pool of the CPU op set (cpu_impl.h): a job is n_parts calls of one
 * function; the caller and up to threads - 1 workers take parts from an atomic counter until
 * none is left, so a worker delayed by another process leaves its share to the others. Workers
 * start on first use; between jobs they poll for the next one for POOL_SPIN_NS, then sleep on a
 * condition variable (woken only when some worker sleeps); one job runs at a time (a
 * caller that finds the pool busy runs its parts alone). Once the caller finds every part taken
 * it withdraws the job and waits only for the workers inside a part, never for one that has not
 * woken up yet (on a loaded machine that wait would cost a scheduler slice per job).
 */
#include "../../core/internal.h"
#include "cpu_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define POOL_MAX_THREADS 64
#define POOL_SPIN_NS 50000 /* how long an idle worker polls for the next job before sleeping */

static inline void pool_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef struct {
    void (*fn)(void *ctx, int part);
    void *ctx;
    int n_parts;
    atomic_int next;
} pool_job;

static pthread_mutex_t pool_busy = PTHREAD_MUTEX_INITIALIZER; /* held by the running job */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;   /* guards the fields below */
static pthread_cond_t pool_go = PTHREAD_COND_INITIALIZER, pool_done = PTHREAD_COND_INITIALIZER;
static int pool_started;       /* workers running */
static unsigned long pool_gen; /* incremented per job */
static pool_job *pool_cur;
static int pool_want;          /* workers 0 .. want-1 may take part in the current job */
static int pool_inside;        /* workers inside the current job's parts */
static int pool_sleepers;      /* workers waiting on pool_go (the rest are spinning or busy) */
static atomic_ulong pool_gen_seen; /* pool_gen, readable without the lock (the spin) */
static atomic_int cpu_threads; /* 0 = default */

/* OPENBLAS_NUM_THREADS when set (> 0), else the online CPUs: the count the CPU table's OpenBLAS
 * defaults to, so sgemm and the op set use the same cores. */
static int default_threads(void)
{
    const char *e = getenv("OPENBLAS_NUM_THREADS");
    long n = e ? strtol(e, NULL, 10) : 0;
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) n = 1;
    return (int)SR_MIN(n, POOL_MAX_THREADS);
}

int sr_cpu_threads(void)
{
    int n = atomic_load(&cpu_threads);
    return n > 0 ? n : default_threads();
}

void sr_cpu_set_threads(int n)
{
    if (n > 0) atomic_store(&cpu_threads, SR_MIN(n, POOL_MAX_THREADS));
}

static void run_parts(pool_job *j)
{
    for (;;) {
        int p = atomic_fetch_add(&j->next, 1);
        if (p >= j->n_parts) return;
        j->fn(j->ctx, p);
    }
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&pool_mu);
    for (;;) {
        if (pool_gen == seen) {
            /* A batched step issues many small jobs back to back: poll for the next one for a
             * few tens of microseconds before sleeping, so the worker joins it at once instead
             * of a futex wake-up later (by which time the caller has often done every part). */
            pthread_mutex_unlock(&pool_mu);
            int64_t t0 = sr_now_ns();
            for (int i = 1; atomic_load_explicit(&pool_gen_seen, memory_order_acquire) == seen; i++) {
                pool_relax();
                if (!(i & 63) && sr_now_ns() - t0 > POOL_SPIN_NS) break;
            }
            pthread_mutex_lock(&pool_mu);
            pool_sleepers++;
            while (pool_gen == seen) pthread_cond_wait(&pool_go, &pool_mu);
            pool_sleepers--;
        }
        seen = pool_gen;
        pool_job *j = pool_cur;
        if (!j || id >= pool_want) continue; /* none, or the caller already took every part */
        pool_inside++;
        pthread_mutex_unlock(&pool_mu);
        run_parts(j);
        pthread_mutex_lock(&pool_mu);
        if (--pool_inside == 0) pthread_cond_signal(&pool_done);
    }
    return NULL;
}

void sr_cpu_parallel(int threads, int n_parts, void (*fn)(void *ctx, int part), void *ctx)
{
    if (n_parts <= 0) return;
    pool_job j = {.fn = fn, .ctx = ctx, .n_parts = n_parts};
    atomic_init(&j.next, 0);
    if (threads <= 0) threads = sr_cpu_threads();
    int helpers = SR_MIN(SR_MIN(threads, POOL_MAX_THREADS), n_parts) - 1;
    if (helpers > 0 && pthread_mutex_trylock(&pool_busy) == 0) {
        pthread_mutex_lock(&pool_mu);
        while (pool_started < helpers) {
            pthread_t t;
            pthread_attr_t at;
            pthread_attr_init(&at);
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            int rc = pthread_create(&t, &at, worker, (void *)(intptr_t)pool_started);
            pthread_attr_destroy(&at);
            if (rc) break; /* fewer helpers: the parts still all get done */
            pool_started++;
        }
        pool_cur = &j;
        pool_want = SR_MIN(helpers, pool_started);
        pool_gen++;
        atomic_store_explicit(&pool_gen_seen, pool_gen, memory_order_release);
        if (pool_sleepers) pthread_cond_broadcast(&pool_go);
        pthread_mutex_unlock(&pool_mu);
        run_parts(&j);
        pthread_mutex_lock(&pool_mu);
        pool_cur = NULL;
        while (pool_inside > 0) pthread_cond_wait(&pool_done, &pool_mu);
        pthread_mutex_unlock(&pool_mu);
        pthread_mutex_unlock(&pool_busy);
        return;
    }
    run_parts(&j);
}
