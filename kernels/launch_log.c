/*
 * launch_log.c — a step's kernel launches as data (launch_log.h): growable arrays of launches,
 * argument extents and argument bytes, and the comparisons the CUDA table's replayed recording
 * makes between two steps.
 */
#include "launch_log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

#define ARG_ALIGN 16 /* every argument's copy starts on 16 bytes (no kernel argument needs more) */

void sr_klog_clear(sr_klog *g)
{
    g->n = g->nargs = g->bytes = 0;
}

void sr_klog_free(sr_klog *g)
{
    if (!g) return;
    free(g->l);
    free(g->arg);
    free(g->blob);
    memset(g, 0, sizeof *g);
}

sr_status sr_klog_add(sr_klog *g, const void *func, const unsigned grid[3], const unsigned block[3],
                      size_t smem, int pdl, const void *const *args, const size_t *sizes, int nargs)
{
    if (!func) return sr_error(SR_ERR_ARG, "launch log: func is NULL");
    for (int d = 0; d < 3; d++)
        if (!grid[d] || !block[d])
            return sr_error(SR_ERR_ARG, "launch log: %s extent %d is 0", grid[d] ? "block" : "grid", d);
    if (nargs < 0 || (nargs > 0 && (!args || !sizes)))
        return sr_error(SR_ERR_ARG, "launch log: %d arguments%s", nargs,
                        nargs < 0 ? "" : " without their values or sizes");
    size_t bytes = g->bytes;
    for (int i = 0; i < nargs; i++) {
        if (!args[i] || !sizes[i])
            return sr_error(SR_ERR_ARG, "launch log: argument %d is %s", i,
                            args[i] ? "0 bytes" : "NULL");
        if (sizes[i] > SIZE_MAX / 2 - bytes - ARG_ALIGN)
            return sr_error(SR_ERR_ARG, "launch log: argument %d of %zu bytes", i, sizes[i]);
        bytes = (bytes + ARG_ALIGN - 1) / ARG_ALIGN * ARG_ALIGN + sizes[i];
    }
    if (sr_grow((void **)&g->l, &g->l_cap, g->n + 1, sizeof *g->l, 64) ||
        sr_grow((void **)&g->arg, &g->a_cap, g->nargs + (size_t)nargs, sizeof *g->arg, 64) ||
        sr_grow((void **)&g->blob, &g->b_cap, bytes, 1, 64)) /* a failure changes capacities only */
        return sr_error(SR_ERR_NOMEM, "launch log: launch %zu (%zu argument bytes)", g->n, bytes);

    sr_klaunch *L = &g->l[g->n];
    L->func = func;
    memcpy(L->grid, grid, sizeof L->grid);
    memcpy(L->block, block, sizeof L->block);
    L->smem = smem;
    L->pdl = pdl ? 1 : 0;
    L->arg0 = g->nargs;
    L->nargs = nargs;
    for (int i = 0; i < nargs; i++) {
        size_t off = (g->bytes + ARG_ALIGN - 1) / ARG_ALIGN * ARG_ALIGN;
        memset(g->blob + g->bytes, 0, off - g->bytes); /* padding compares equal */
        memcpy(g->blob + off, args[i], sizes[i]);
        g->arg[g->nargs].off = off;
        g->arg[g->nargs].size = sizes[i];
        g->nargs++;
        g->bytes = off + sizes[i];
    }
    g->n++;
    return SR_OK;
}

int sr_klog_same_shape(const sr_klog *a, const sr_klog *b)
{
    if (a->n != b->n || a->nargs != b->nargs) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const sr_klaunch *x = &a->l[i], *y = &b->l[i];
        if (x->func != y->func || x->pdl != y->pdl || x->nargs != y->nargs) return 0;
        for (int j = 0; j < x->nargs; j++)
            if (a->arg[x->arg0 + (size_t)j].size != b->arg[y->arg0 + (size_t)j].size) return 0;
    }
    return 1;
}

int sr_klog_same_launch(const sr_klog *a, const sr_klog *b, size_t i)
{
    const sr_klaunch *x = &a->l[i], *y = &b->l[i];
    if (memcmp(x->grid, y->grid, sizeof x->grid) || memcmp(x->block, y->block, sizeof x->block) ||
        x->smem != y->smem)
        return 0;
    for (int j = 0; j < x->nargs; j++) {
        const struct sr_karg *u = &a->arg[x->arg0 + (size_t)j], *v = &b->arg[y->arg0 + (size_t)j];
        if (memcmp(a->blob + u->off, b->blob + v->off, u->size)) return 0;
    }
    return 1;
}

void sr_klog_args(const sr_klog *g, size_t i, void **out)
{
    const sr_klaunch *L = &g->l[i];
    for (int j = 0; j < L->nargs; j++) out[j] = g->blob + g->arg[L->arg0 + (size_t)j].off;
}
