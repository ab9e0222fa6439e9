/*
 * launch_log.h — a step's kernel launches kept as data: for each launch its kernel, grid, block,
 * shared memory, whether it may overlap the one before (PDL), and a copy of its argument values.
 * The CUDA table's replayed recording (SRKIT_CUDA_GRAPH=replay, kernels/cuda/cuda.cu) keeps the
 * launches of a recorded step in one, and compares it with the log its executable graph was made
 * or last patched from: the same kernels in the same order with arguments of the same sizes (the
 * same shape) let the graph be run again with only the launches whose values differ set anew;
 * another shape makes a new graph. Plain C with no CUDA in it, so the CPU suite tests it
 * (kernels_launch_log). Not thread-safe: a log belongs to the thread recording into it.
 */
#ifndef SR_LAUNCH_LOG_H
#define SR_LAUNCH_LOG_H

#include <stddef.h>

#include "../core/sr.h"

/* One launch; its arguments are args[arg0 .. arg0 + nargs) of its log. */
typedef struct sr_klaunch {
    const void *func;    /* the kernel (its host-side handle) */
    unsigned grid[3];    /* blocks in x, y, z */
    unsigned block[3];   /* threads in x, y, z */
    size_t smem;         /* dynamic shared memory, bytes */
    int pdl;             /* 1: launched overlapping the kernel ahead (PDL), else 0 */
    size_t arg0;         /* its first argument's index in the log's arg */
    int nargs;
} sr_klaunch;

/* The launches of one step, in order; every array grows as needed and is kept by
 * sr_klog_clear. A zeroed struct is an empty log. */
typedef struct sr_klog {
    sr_klaunch *l;           /* [n] */
    size_t n, l_cap;
    struct sr_karg {
        size_t off;          /* the argument's offset in blob (a multiple of 16) */
        size_t size;         /* its bytes */
    } *arg;                  /* [nargs] */
    size_t nargs, a_cap;
    unsigned char *blob;     /* [bytes]: the argument values */
    size_t bytes, b_cap;
} sr_klog;

/* Empties g, keeping its memory for the next step. */
void sr_klog_clear(sr_klog *g);
/* Frees g's arrays and empties it; NULL is a no-op. */
void sr_klog_free(sr_klog *g);

/* Appends a launch of func with grid and block (3 extents each, none 0), smem bytes of dynamic
 * shared memory, pdl 0 / 1, and nargs >= 0 arguments: args[i] points at argument i's value of
 * sizes[i] > 0 bytes (copied; the pointers need not outlive the call). Returns SR_OK;
 * SR_ERR_ARG naming the field (NULL func, a 0 extent, a negative count, a NULL or 0-byte
 * argument), SR_ERR_NOMEM: then g is as before the call. */
sr_status sr_klog_add(sr_klog *g, const void *func, const unsigned grid[3], const unsigned block[3],
                      size_t smem, int pdl, const void *const *args, const size_t *sizes, int nargs);

/* 1 if a and b have the same shape: as many launches, and launch i of each the same kernel, pdl
 * and argument count and sizes, for every i; else 0. Grids, blocks, shared memory and the
 * argument values may differ (an executable graph's kernel node takes new ones of each). */
int sr_klog_same_shape(const sr_klog *a, const sr_klog *b);

/* For logs of the same shape: 1 if launch i is the same in both (grid, block, shared memory and
 * every argument's bytes), else 0. */
int sr_klog_same_launch(const sr_klog *a, const sr_klog *b, size_t i);

/* Pointers to launch i's argument values in g's blob, into out[0 .. nargs): what a kernel
 * node's parameters are (valid until g next grows or is cleared). */
void sr_klog_args(const sr_klog *g, size_t i, void **out);

#endif /* SR_LAUNCH_LOG_H */
