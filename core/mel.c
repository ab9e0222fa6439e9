/*
 * mel.c — the two feature front-ends: Whisper log-mel (openai-whisper log_mel_spectrogram) and
 * NeMo mel (FilterbankFeatures), offline and streaming, in float32 like the references.
 *
 * Algorithm, per frame t (hop H, FFT size N, pad P = N/2, window w of win_length W centred in N):
 *   1. NeMo only: pre-emphasis y[0] = x[0], y[i] = x[i] - a*x[i-1] over the whole signal.
 *   2. Centre padding: frame t covers padded samples [t*H, t*H + N), i.e. signal samples
 *      i = t*H - P + j, j in [0, N). Out-of-range i is reflected (Whisper, torch "reflect":
 *      -i on the left, 2(n-1) - i on the right, folded again for very short signals) or zero
 *      (NeMo, "constant").
 *   3. Multiply by the window (periodic Hann for Whisper, symmetric Hann zero-padded to N for
 *      NeMo), real FFT of size N (FFTW r2c, float32), power |X_k|^2 computed as (sqrt(re^2 +
 *      im^2))^2 because both references take the magnitude first and square it after.
 *   4. Mel energies e_m = sum_k F[m][k] |X_k|^2 with the Slaney filterbank F (librosa
 *      filters.mel, htk=False, norm="slaney"), accumulated in double and rounded to float.
 *   5. Raw log: Whisper log10(max(e, 1e-10)); NeMo ln(e + 2^-24).
 * Utterance-global steps, after all frames:
 *   Whisper: drop the last STFT frame (n/H frames remain), clamp at (max over all values - 8),
 *            then (v + 4) / 4.
 *   NeMo:    n/H + 1 frames; the first n/H are valid. per_feature: per mel bin, subtract the
 *            mean and divide by (unbiased std + 1e-5), both over valid frames; then frames at or
 *            past n/H are set to 0.
 *
 * Streaming runs steps 1-5 on a sliding sample buffer through the same frame routine as the
 * offline path, so every frame is bit-identical to the offline one. A frame is emitted once every
 * sample it reads is in, it does not touch the right padding, and it cannot be the frame the
 * reference drops or masks (see frame_need). Global steps use a policy documented in
 * docs/features.md: Whisper clamps with a fixed ceiling (config.log_mel_max) or the running max
 * of the frames emitted so far; NeMo per_feature streaming is SR_ERR_UNSUPPORTED.
 *
 * Thread-safety: FFTW planning is not thread-safe, so plans are made in sr_mel_create under a
 * static mutex; execution uses the new-array interface on per-call / per-stream buffers, so one
 * sr_mel is shared read-only by any number of threads.
 */
#include "internal.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

struct sr_mel {
    sr_mel_config cfg;     /* filters pointer cleared: the copy below is used */
    int n_bins;            /* n_fft / 2 + 1 */
    int pad;               /* n_fft / 2, the centre padding on each side */
    float *window;         /* [n_fft] window zero-padded and centred in the FFT frame */
    float *filters;        /* [n_mels, n_bins] */
    int *f_lo, *f_hi;      /* per mel bin: first and one-past-last nonzero filter column */
    fftwf_plan plan;       /* r2c of size n_fft, planned on aligned buffers */
};

struct sr_mel_stream {
    const sr_mel *m;
    float *buf;            /* samples [base, base + len) (pre-emphasized for NeMo) */
    size_t cap;            /* capacity of buf in samples */
    size_t base, len;
    size_t count;          /* samples fed so far */
    long t_next;           /* next frame index to emit */
    float prev;            /* last raw sample (pre-emphasis state) */
    float run_max;         /* Whisper running max of raw log10 values emitted so far */
    int finished;
    float *fin;            /* FFT input [n_fft] (fftwf_malloc) */
    fftwf_complex *fout;   /* FFT output [n_bins] (fftwf_malloc) */
    float *power;          /* [n_bins] */
};

static pthread_mutex_t plan_mutex = PTHREAD_MUTEX_INITIALIZER;

/* Extra room in the stream buffer beyond one frame span, so large feeds move in big pieces. */
#define STREAM_CHUNK 4096

void sr_mel_config_init(sr_mel_config *c, sr_mel_kind kind)
{
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->sample_rate = 16000;
    c->win_length = 400;
    c->hop_length = 160;
    c->n_mels = 80;
    c->log_mel_max = -1e38f; /* "unset": running max in streaming */
    c->fixed_max = 0;
    if (kind == SR_MEL_NEMO) {
        c->n_fft = 512;
        c->preemph = 0.97f;
        c->normalize = SR_NORM_PER_FEATURE;
    } else {
        c->n_fft = 400;
        c->preemph = 0.0f;
        c->normalize = SR_NORM_NONE;
    }
}

/* ---- Slaney mel filterbank (librosa.filters.mel, htk=False, norm="slaney") ----------------- */

/* Slaney's auditory scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above. */
#define SLANEY_F_SP (200.0 / 3.0)
#define SLANEY_MIN_LOG_HZ 1000.0
#define SLANEY_MIN_LOG_MEL (SLANEY_MIN_LOG_HZ / SLANEY_F_SP)

static double slaney_logstep(void) { return log(6.4) / 27.0; }

static double hz_to_mel(double f)
{
    if (f >= SLANEY_MIN_LOG_HZ) return SLANEY_MIN_LOG_MEL + log(f / SLANEY_MIN_LOG_HZ) / slaney_logstep();
    return f / SLANEY_F_SP;
}

static double mel_to_hz(double m)
{
    if (m >= SLANEY_MIN_LOG_MEL) return SLANEY_MIN_LOG_HZ * exp(slaney_logstep() * (m - SLANEY_MIN_LOG_MEL));
    return SLANEY_F_SP * m;
}

/* Triangles between n_mels + 2 points equally spaced in mel from 0 to sr/2, evaluated at the
 * FFT bin frequencies k * sr / n_fft, each scaled by 2 / (upper edge - lower edge) in Hz so that
 * every filter has unit area. Computed in double (as librosa) and rounded to float. The point
 * positions follow numpy's linspace (start + i * step, last point exact) for bit-level parity. */
static sr_status slaney_filters(int sr, int n_fft, int n_mels, float *out)
{
    int n_bins = n_fft / 2 + 1, n_pts = n_mels + 2;
    double *pts = sr_malloc(sizeof(double) * (size_t)n_pts, "mel filter points");
    double *fft_f = sr_malloc(sizeof(double) * (size_t)n_bins, "fft frequencies");
    if (!pts || !fft_f) {
        free(pts);
        free(fft_f);
        return SR_ERR_NOMEM;
    }
    double mel_lo = hz_to_mel(0.0), mel_hi = hz_to_mel(sr / 2.0);
    double step = (mel_hi - mel_lo) / (n_pts - 1);
    for (int i = 0; i < n_pts; i++) pts[i] = mel_to_hz(i * step + mel_lo);
    pts[n_pts - 1] = mel_to_hz(mel_hi);
    double bin_hz = 1.0 / (n_fft * (1.0 / sr)); /* numpy rfftfreq */
    for (int k = 0; k < n_bins; k++) fft_f[k] = k * bin_hz;
    for (int m = 0; m < n_mels; m++) {
        double d_lo = pts[m + 1] - pts[m], d_hi = pts[m + 2] - pts[m + 1];
        double enorm = 2.0 / (pts[m + 2] - pts[m]);
        for (int k = 0; k < n_bins; k++) {
            double lower = -(pts[m] - fft_f[k]) / d_lo;
            double upper = (pts[m + 2] - fft_f[k]) / d_hi;
            double w = lower < upper ? lower : upper;
            if (w < 0.0) w = 0.0;
            out[(size_t)m * n_bins + k] = (float)(w * enorm);
        }
    }
    free(pts);
    free(fft_f);
    return SR_OK;
}

/* ---- create / free --------------------------------------------------------------------------- */

static sr_status validate_config(const sr_mel_config *c)
{
    if (c->kind != SR_MEL_WHISPER && c->kind != SR_MEL_NEMO)
        return sr_error(SR_ERR_ARG, "mel config: kind: unknown value %d", (int)c->kind);
    if (c->sample_rate <= 0)
        return sr_error(SR_ERR_ARG, "mel config: sample_rate: must be > 0, got %d", c->sample_rate);
    if (c->n_fft < 2 || c->n_fft > (1 << 16))
        return sr_error(SR_ERR_ARG, "mel config: n_fft: must be in [2, 65536], got %d", c->n_fft);
    if (c->win_length <= 0)
        return sr_error(SR_ERR_ARG, "mel config: win_length: must be > 0, got %d", c->win_length);
    if (c->n_fft < c->win_length)
        return sr_error(SR_ERR_ARG, "mel config: n_fft (%d) must be >= win_length (%d)", c->n_fft,
                        c->win_length);
    if (c->hop_length <= 0)
        return sr_error(SR_ERR_ARG, "mel config: hop_length: must be > 0, got %d", c->hop_length);
    if (c->n_mels <= 0 || c->n_mels > 4096)
        return sr_error(SR_ERR_ARG, "mel config: n_mels: must be in [1, 4096], got %d", c->n_mels);
    if (!isfinite(c->preemph) || c->preemph < 0.0f || c->preemph >= 1.0f)
        return sr_error(SR_ERR_ARG, "mel config: preemph: must be in [0, 1), got %g", (double)c->preemph);
    if (c->normalize != SR_NORM_NONE && c->normalize != SR_NORM_PER_FEATURE)
        return sr_error(SR_ERR_ARG, "mel config: normalize: unknown value %d", (int)c->normalize);
    if (c->kind == SR_MEL_WHISPER && c->normalize != SR_NORM_NONE)
        return sr_error(SR_ERR_ARG, "mel config: normalize: whisper features take no normalization");
    if (isnan(c->log_mel_max))
        return sr_error(SR_ERR_ARG, "mel config: log_mel_max: NaN");
    if (c->fixed_max && !(c->log_mel_max > -1e30f))
        return sr_error(SR_ERR_ARG, "mel config: fixed_max is set but log_mel_max is unset (%g)",
                        (double)c->log_mel_max);
    return SR_OK;
}

sr_status sr_mel_create(const sr_mel_config *c, sr_mel **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_mel_create: out is NULL");
    *out = NULL;
    if (!c) return sr_error(SR_ERR_ARG, "sr_mel_create: config is NULL");
    sr_status st = validate_config(c);
    if (st) return st;

    sr_mel *m = sr_calloc(1, sizeof *m, "sr_mel");
    if (!m) return SR_ERR_NOMEM;
    m->cfg = *c;
    m->cfg.filters = NULL;
    m->n_bins = c->n_fft / 2 + 1;
    m->pad = c->n_fft / 2;
    size_t nf = (size_t)c->n_mels * (size_t)m->n_bins;
    m->window = sr_calloc((size_t)c->n_fft, sizeof(float), "mel window");
    m->filters = sr_malloc(nf * sizeof(float), "mel filters");
    m->f_lo = sr_malloc(sizeof(int) * (size_t)c->n_mels, "mel filter ranges");
    m->f_hi = sr_malloc(sizeof(int) * (size_t)c->n_mels, "mel filter ranges");
    if (!m->window || !m->filters || !m->f_lo || !m->f_hi) {
        sr_mel_free(m);
        return SR_ERR_NOMEM;
    }

    if (c->filters) {
        for (size_t i = 0; i < nf; i++) {
            float v = c->filters[i];
            if (!isfinite(v) || v < 0.0f) {
                size_t nb = (size_t)m->n_bins;
                sr_mel_free(m);
                return sr_error(SR_ERR_ARG,
                                "mel config: filters [%d, %zu]: element [%zu, %zu] is %g (must be finite "
                                "and >= 0)",
                                c->n_mels, nb, i / nb, i % nb, (double)v);
            }
            m->filters[i] = v;
        }
    } else if ((st = slaney_filters(c->sample_rate, c->n_fft, c->n_mels, m->filters))) {
        sr_mel_free(m);
        return st;
    }
    for (int r = 0; r < c->n_mels; r++) {
        const float *f = m->filters + (size_t)r * m->n_bins;
        int lo = 0, hi = m->n_bins;
        while (lo < hi && f[lo] == 0.0f) lo++;
        while (hi > lo && f[hi - 1] == 0.0f) hi--;
        m->f_lo[r] = lo;
        m->f_hi[r] = hi;
    }

    /* Whisper: torch.hann_window(W) (periodic): 0.5 - 0.5 cos(2 pi i / W).
     * NeMo: torch.hann_window(W, periodic=False): 0.5 - 0.5 cos(2 pi i / (W - 1)).
     * Evaluated in float32 in torch's order (i * step, cos, * -0.5, + 0.5) so the window matches
     * torch's to the last bit or two. torch.stft centres a shorter window in the frame:
     * (n_fft - W) / 2 zeros on the left. */
    int W = c->win_length, off = (c->n_fft - W) / 2;
    double denom = c->kind == SR_MEL_WHISPER ? (double)W : (double)(W > 1 ? W - 1 : 1);
    float step = (float)(2.0 * 3.14159265358979323846 / denom);
    for (int i = 0; i < W; i++) {
        float a = (float)i * step;
        m->window[off + i] = W == 1 ? 1.0f : cosf(a) * -0.5f + 0.5f;
    }

    float *in = fftwf_malloc(sizeof(float) * (size_t)c->n_fft);
    fftwf_complex *o = fftwf_malloc(sizeof(fftwf_complex) * (size_t)m->n_bins);
    if (in && o) {
        pthread_mutex_lock(&plan_mutex);
        m->plan = fftwf_plan_dft_r2c_1d(c->n_fft, in, o, FFTW_ESTIMATE);
        pthread_mutex_unlock(&plan_mutex);
    }
    fftwf_free(in);
    fftwf_free(o);
    if (!m->plan) {
        sr_mel_free(m);
        return sr_error(SR_ERR_NOMEM, "sr_mel_create: FFTW plan for n_fft %d failed", c->n_fft);
    }
    *out = m;
    return SR_OK;
}

void sr_mel_free(sr_mel *m)
{
    if (!m) return;
    if (m->plan) {
        pthread_mutex_lock(&plan_mutex);
        fftwf_destroy_plan(m->plan);
        pthread_mutex_unlock(&plan_mutex);
    }
    free(m->window);
    free(m->filters);
    free(m->f_lo);
    free(m->f_hi);
    free(m);
}

int sr_mel_n_mels(const sr_mel *m) { return m ? m->cfg.n_mels : 0; }

const float *sr_mel_filters(const sr_mel *m) { return m ? m->filters : NULL; }

/* ---- per-frame computation ------------------------------------------------------------------- */

/* FFT work buffers; one set per call or per stream (FFTW new-array execution). */
typedef struct {
    float *fin;
    fftwf_complex *fout;
    float *power;
} frame_work;

static sr_status work_alloc(const sr_mel *m, frame_work *w)
{
    w->fin = fftwf_malloc(sizeof(float) * (size_t)m->cfg.n_fft);
    w->fout = fftwf_malloc(sizeof(fftwf_complex) * (size_t)m->n_bins);
    w->power = malloc(sizeof(float) * (size_t)m->n_bins);
    if (!w->fin || !w->fout || !w->power) {
        fftwf_free(w->fin);
        fftwf_free(w->fout);
        free(w->power);
        memset(w, 0, sizeof *w);
        return sr_error(SR_ERR_NOMEM, "out of memory for mel FFT buffers (n_fft %d)", m->cfg.n_fft);
    }
    return SR_OK;
}

static void work_free(frame_work *w)
{
    fftwf_free(w->fin);
    fftwf_free(w->fout);
    free(w->power);
}

/* Index of the signal sample that torch's reflect padding puts at position i (any integer) of a
 * signal of n samples: mirror at both ends without repeating the edge, folded as often as needed
 * (torch itself requires pad < n; folding keeps very short signals defined). */
static long reflect_index(long i, long n)
{
    if (n == 1) return 0;
    long period = 2 * (n - 1);
    i %= period;
    if (i < 0) i += period;
    return i < n ? i : period - i;
}

/* Earliest sample count at which frame t may be emitted while more audio can still come:
 * every sample it reads must be in without right padding, and the frame must not be the one the
 * reference drops (Whisper: frame n/H) or masks (NeMo: frames >= n/H), i.e. n >= (t+1)*H. */
static size_t frame_need(const sr_mel *m, long t)
{
    long H = m->cfg.hop_length, N = m->cfg.n_fft, P = m->pad;
    long need = t * H + N - P;
    if ((t + 1) * H > need) need = (t + 1) * H;
    if (m->cfg.kind == SR_MEL_WHISPER && t * H < P && P - t * H + 1 > need) need = P - t * H + 1;
    return (size_t)need;
}

/* Frames the reference produces (and keeps) for n samples; NeMo counts the masked last one. */
static long total_frames(const sr_mel *m, size_t n)
{
    long f = (long)(n / (size_t)m->cfg.hop_length);
    return m->cfg.kind == SR_MEL_NEMO ? f + 1 : f;
}

/* Compute the raw log-mel of frame t (steps 2-5 of the header) into out[n_mels]. src holds the
 * (pre-emphasized) samples [base, n) of a signal of n samples so far, which is all that padding
 * may see. Callers guarantee every sample the frame reads lies in [base, n): offline base is 0;
 * the stream keeps samples from t_next*H - P on, and a frame that reflects at the right edge is
 * computed only at finish, when its mirrored samples are >= n - 1 + H - N + P > t_next*H - P. */
static void compute_frame(const sr_mel *m, frame_work *w, const float *src, size_t base, size_t n,
                          long t, float *out)
{
    const sr_mel_config *c = &m->cfg;
    long start = t * (long)c->hop_length - m->pad;
    int whisper = c->kind == SR_MEL_WHISPER;
    for (int j = 0; j < c->n_fft; j++) {
        long i = start + j;
        float v;
        if (i >= 0 && i < (long)n) {
            v = src[i - (long)base];
        } else if (whisper) {
            v = src[reflect_index(i, (long)n) - (long)base];
        } else {
            v = 0.0f;
        }
        w->fin[j] = v * m->window[j];
    }
    fftwf_execute_dft_r2c(m->plan, w->fin, w->fout);
    for (int k = 0; k < m->n_bins; k++) {
        float re = w->fout[k][0], im = w->fout[k][1];
        float mag = sqrtf(re * re + im * im);
        w->power[k] = mag * mag;
    }
    for (int r = 0; r < c->n_mels; r++) {
        const float *f = m->filters + (size_t)r * m->n_bins;
        double acc = 0.0;
        for (int k = m->f_lo[r]; k < m->f_hi[r]; k++) acc += (double)f[k] * (double)w->power[k];
        float e = (float)acc;
        if (whisper) {
            out[r] = log10f(e > 1e-10f ? e : 1e-10f);
        } else {
            out[r] = logf(e + 0x1p-24f);
        }
    }
}

/* Whisper's last step on one value: clamp at ceiling - 8, then (v + 4) / 4. */
static float whisper_scale(float v, float ceiling)
{
    float floor_v = ceiling - 8.0f;
    if (v < floor_v) v = floor_v;
    return (v + 4.0f) / 4.0f;
}

static sr_status check_pcm(const float *pcm, size_t n, const char *fn)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(pcm[i]))
            return sr_error(SR_ERR_ARG, "%s: pcm[%zu] is %s", fn, i, isnan(pcm[i]) ? "NaN" : "Inf");
    return SR_OK;
}

/* NeMo per_feature: per mel bin, (x - mean) / (std + 1e-5) over the valid frames, with the
 * unbiased std (0 when only one frame is valid, as NeMo's NaN guard gives). */
static void nemo_normalize(float *x, long valid, int n_mels)
{
    for (int r = 0; r < n_mels; r++) {
        double sum = 0.0;
        for (long t = 0; t < valid; t++) sum += x[(size_t)t * n_mels + r];
        float mean = (float)(sum / (double)valid);
        double ss = 0.0;
        for (long t = 0; t < valid; t++) {
            double d = (double)x[(size_t)t * n_mels + r] - (double)mean;
            ss += d * d;
        }
        float sd = valid > 1 ? (float)sqrt(ss / (double)(valid - 1)) : 0.0f;
        sd += 1e-5f;
        for (long t = 0; t < valid; t++) {
            float *p = &x[(size_t)t * n_mels + r];
            *p = (*p - mean) / sd;
        }
    }
}

sr_status sr_mel_compute(const sr_mel *m, const float *pcm, size_t n, float **out, int *n_frames)
{
    if (!out || !n_frames) return sr_error(SR_ERR_ARG, "sr_mel_compute: out / n_frames is NULL");
    *out = NULL;
    *n_frames = 0;
    if (!m) return sr_error(SR_ERR_ARG, "sr_mel_compute: mel is NULL");
    if (n == 0) return sr_error(SR_ERR_ARG, "sr_mel_compute: pcm: empty audio (0 samples)");
    if (!pcm) return sr_error(SR_ERR_ARG, "sr_mel_compute: pcm is NULL");
    if (n / (size_t)m->cfg.hop_length >= (size_t)0x7ffffffe)
        return sr_error(SR_ERR_ARG, "sr_mel_compute: pcm: %zu samples give too many frames for an int", n);
    sr_status st = check_pcm(pcm, n, "sr_mel_compute");
    if (st) return st;

    const sr_mel_config *c = &m->cfg;
    int nm = c->n_mels;
    long T = total_frames(m, n);
    long valid = (long)(n / (size_t)c->hop_length);
    if (c->kind == SR_MEL_NEMO && c->normalize == SR_NORM_PER_FEATURE && valid < 1)
        return sr_error(SR_ERR_ARG,
                        "sr_mel_compute: pcm: %zu samples is shorter than one hop (%d): per_feature "
                        "normalization needs at least one valid frame",
                        n, c->hop_length);

    float *res = sr_calloc((size_t)(T > 0 ? T : 1) * (size_t)nm, sizeof(float), "mel features");
    float *pre = NULL;
    frame_work w = {0};
    if (!res) return SR_ERR_NOMEM;
    if ((st = work_alloc(m, &w))) {
        free(res);
        return st;
    }
    const float *src = pcm;
    if (c->kind == SR_MEL_NEMO && c->preemph > 0.0f) {
        pre = sr_malloc(sizeof(float) * n, "pre-emphasis buffer");
        if (!pre) {
            free(res);
            work_free(&w);
            return SR_ERR_NOMEM;
        }
        pre[0] = pcm[0];
        for (size_t i = 1; i < n; i++) {
            float prod = c->preemph * pcm[i - 1];
            pre[i] = pcm[i] - prod;
        }
        src = pre;
    }

    /* Whisper keeps every STFT frame but the last; NeMo computes the valid ones, the rest stay 0. */
    long n_comp = c->kind == SR_MEL_WHISPER ? T : valid;
    for (long t = 0; t < n_comp; t++) compute_frame(m, &w, src, 0, n, t, res + (size_t)t * nm);

    if (c->kind == SR_MEL_WHISPER) {
        float ceiling = c->log_mel_max;
        if (!c->fixed_max) {
            ceiling = -INFINITY;
            for (size_t i = 0; i < (size_t)T * nm; i++)
                if (res[i] > ceiling) ceiling = res[i];
        }
        for (size_t i = 0; i < (size_t)T * nm; i++) res[i] = whisper_scale(res[i], ceiling);
    } else if (c->normalize == SR_NORM_PER_FEATURE) {
        nemo_normalize(res, valid, nm);
    }
    free(pre);
    work_free(&w);
    *out = res;
    *n_frames = (int)T;
    return SR_OK;
}

/* ---- streaming ------------------------------------------------------------------------------- */

sr_status sr_mel_stream_open(const sr_mel *m, sr_mel_stream **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_mel_stream_open: out is NULL");
    *out = NULL;
    if (!m) return sr_error(SR_ERR_ARG, "sr_mel_stream_open: mel is NULL");
    if (m->cfg.kind == SR_MEL_NEMO && m->cfg.normalize == SR_NORM_PER_FEATURE)
        return sr_error(SR_ERR_UNSUPPORTED,
                        "sr_mel_stream_open: normalize: per_feature needs whole-utterance statistics "
                        "and is not streamable; NeMo streaming models use normalize NA");
    sr_mel_stream *s = sr_calloc(1, sizeof *s, "sr_mel_stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    /* A pending frame spans < n_fft + hop buffered samples (see sr_mel_stream_feed). */
    s->cap = (size_t)m->cfg.n_fft + (size_t)m->cfg.hop_length + STREAM_CHUNK;
    s->buf = sr_malloc(sizeof(float) * s->cap, "mel stream buffer");
    frame_work w = {0};
    sr_status st = s->buf ? work_alloc(m, &w) : SR_ERR_NOMEM;
    if (st) {
        free(s->buf);
        free(s);
        return st;
    }
    s->fin = w.fin;
    s->fout = w.fout;
    s->power = w.power;
    sr_mel_stream_reset(s);
    *out = s;
    return SR_OK;
}

void sr_mel_stream_reset(sr_mel_stream *s)
{
    if (!s) return;
    s->base = s->len = s->count = 0;
    s->t_next = 0;
    s->prev = 0.0f;
    s->run_max = -INFINITY;
    s->finished = 0;
}

void sr_mel_stream_close(sr_mel_stream *s)
{
    if (!s) return;
    frame_work w = {s->fin, s->fout, s->power};
    work_free(&w);
    free(s->buf);
    free(s);
}

/* Frames a feed can emit once count samples are in: every t >= t_next with frame_need <= count
 * (frame_need is nondecreasing in t). */
static long feed_frames(const sr_mel_stream *s, size_t count)
{
    long t = s->t_next;
    while (frame_need(s->m, t) <= count) t++;
    return t - s->t_next;
}

int sr_mel_stream_pending(const sr_mel_stream *s, size_t n)
{
    if (!s || s->finished) return 0;
    /* The frames the whole utterance would have if it ended after these n samples bound both
     * what the feed emits and what a finish right after it emits. */
    long left = total_frames(s->m, s->count + n) - s->t_next;
    if (left < 0) left = 0;
    return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

/* Turn raw frame values into output features (Whisper clamp policy; NeMo NA passes through). */
static void stream_post(sr_mel_stream *s, float *frame)
{
    const sr_mel_config *c = &s->m->cfg;
    int nm = c->n_mels;
    if (c->kind != SR_MEL_WHISPER) return;
    float ceiling = c->log_mel_max;
    if (!(ceiling > -1e30f)) {
        for (int r = 0; r < nm; r++)
            if (frame[r] > s->run_max) s->run_max = frame[r];
        ceiling = s->run_max;
    }
    for (int r = 0; r < nm; r++) frame[r] = whisper_scale(frame[r], ceiling);
}

/* Emit every frame computable from the buffer with count samples, then drop the samples no
 * later frame reads. */
static void stream_emit(sr_mel_stream *s, float *out, int *n_out)
{
    const sr_mel *m = s->m;
    frame_work w = {s->fin, s->fout, s->power};
    while (frame_need(m, s->t_next) <= s->count) {
        float *frame = out + (size_t)(*n_out) * m->cfg.n_mels;
        compute_frame(m, &w, s->buf, s->base, s->count, s->t_next, frame);
        stream_post(s, frame);
        s->t_next++;
        (*n_out)++;
    }
    long keep_from = s->t_next * (long)m->cfg.hop_length - m->pad;
    if (keep_from > (long)s->base) {
        size_t drop = (size_t)keep_from - s->base;
        if (drop > s->len) drop = s->len;
        memmove(s->buf, s->buf + drop, sizeof(float) * (s->len - drop));
        s->len -= drop;
        s->base += drop;
    }
}

sr_status sr_mel_stream_feed(sr_mel_stream *s, const float *pcm, size_t n, float *out, int max_frames,
                             int *n_out)
{
    if (!n_out) return sr_error(SR_ERR_ARG, "sr_mel_stream_feed: n_out is NULL");
    *n_out = 0;
    if (!s) return sr_error(SR_ERR_ARG, "sr_mel_stream_feed: stream is NULL");
    if (s->finished) return sr_error(SR_ERR_ARG, "sr_mel_stream_feed: stream already finished (reset it)");
    if (n == 0) return SR_OK;
    if (!pcm) return sr_error(SR_ERR_ARG, "sr_mel_stream_feed: pcm is NULL");
    sr_status st = check_pcm(pcm, n, "sr_mel_stream_feed");
    if (st) return st;
    long want = feed_frames(s, s->count + n);
    if (want > 0 && !out) return sr_error(SR_ERR_ARG, "sr_mel_stream_feed: out is NULL");
    if (want > (long)max_frames)
        return sr_error(SR_ERR_ARG, "sr_mel_stream_feed: max_frames %d < %ld frames this feed produces",
                        max_frames, want);

    const sr_mel_config *c = &s->m->cfg;
    int preemph = c->kind == SR_MEL_NEMO && c->preemph > 0.0f;
    size_t done = 0;
    while (done < n) {
        /* After stream_emit the buffer holds < n_fft + hop samples, so there is room here. */
        size_t room = s->cap - s->len, take = n - done;
        if (take > room) take = room;
        float *dst = s->buf + s->len;
        for (size_t i = 0; i < take; i++) {
            float x = pcm[done + i];
            if (preemph) {
                float prod = c->preemph * s->prev;
                dst[i] = s->count + i == 0 ? x : x - prod;
            } else {
                dst[i] = x;
            }
            s->prev = x;
        }
        s->len += take;
        s->count += take;
        done += take;
        stream_emit(s, out, n_out);
    }
    return SR_OK;
}

sr_status sr_mel_stream_finish(sr_mel_stream *s, float *out, int max_frames, int *n_out)
{
    if (!n_out) return sr_error(SR_ERR_ARG, "sr_mel_stream_finish: n_out is NULL");
    *n_out = 0;
    if (!s) return sr_error(SR_ERR_ARG, "sr_mel_stream_finish: stream is NULL");
    if (s->finished) return sr_error(SR_ERR_ARG, "sr_mel_stream_finish: stream already finished (reset it)");
    const sr_mel *m = s->m;
    long T = s->count ? total_frames(m, s->count) : 0; /* an empty stream yields no frame */
    long want = T - s->t_next;
    if (want < 0) want = 0;
    if (want > 0 && !out) return sr_error(SR_ERR_ARG, "sr_mel_stream_finish: out is NULL");
    if (want > (long)max_frames)
        return sr_error(SR_ERR_ARG, "sr_mel_stream_finish: max_frames %d < %ld remaining frames",
                        max_frames, want);
    s->finished = 1;
    long valid = (long)(s->count / (size_t)m->cfg.hop_length);
    int nm = m->cfg.n_mels;
    frame_work w = {s->fin, s->fout, s->power};
    for (; s->t_next < T; s->t_next++) {
        float *frame = out + (size_t)(*n_out) * nm;
        if (s->t_next < valid) {
            compute_frame(m, &w, s->buf, s->base, s->count, s->t_next, frame);
            stream_post(s, frame);
        } else {
            memset(frame, 0, sizeof(float) * (size_t)nm); /* NeMo's masked frame */
        }
        (*n_out)++;
    }
    return SR_OK;
}
