/*
 * setting.h — a process-wide setting of the CUDA table (which bf16-product kernel, which form of
 * the attention kernel, whether steps are recorded as graphs): its environment variable, read
 * once, unless a call has set a value (tests, srkit bench). Header-only, so the host emulation
 * (scripts/cuda_emu) compiles the same text as nvcc.
 */
#ifndef SR_CUDA_SETTING_H
#define SR_CUDA_SETTING_H

#include <atomic>
#include <cstdlib>
#include <cstring>

#define SR_CUDA_SETTING_VALUES 6

struct sr_cuda_setting {
    const char *env;           /* the environment variable */
    const char *names[SR_CUDA_SETTING_VALUES]; /* its spelling of values 0, 1, ... (NULL: none) */
    int def;                   /* the value when it is unset or spelled otherwise */
    std::atomic<int> set;      /* a call's value; -1: none */
    std::atomic<int> from_env; /* -2 until the environment is read */
};

/* The setting's value before the call; v = a value (one with a name) sets it, any other v only
 * asks. Thread-safe (two first readers of the environment read the same). */
static inline int sr_cuda_setting_use(sr_cuda_setting &s, int v)
{
    int e = s.from_env.load();
    if (e == -2) {
        const char *x = getenv(s.env);
        e = s.def;
        for (int i = 0; x && i < SR_CUDA_SETTING_VALUES; i++)
            if (s.names[i] && !strcmp(x, s.names[i])) e = i;
        s.from_env.store(e);
    }
    const int old = s.set.load(), prev = old >= 0 ? old : e;
    if (v >= 0 && v < SR_CUDA_SETTING_VALUES && s.names[v]) s.set.store(v);
    return prev;
}

#endif /* SR_CUDA_SETTING_H */
