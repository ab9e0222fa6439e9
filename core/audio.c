/*
 * audio.c — audio file input/output and resampling (the audio section of sr.h).
 *
 * Loading: the path is opened with open(2) (so a missing or unreadable file reports errno's
 * text) and handed to libsndfile with sf_open_fd, which parses any container it supports
 * (WAV, FLAC, OGG Vorbis/Opus, MP3 where built in). Samples are read as float in blocks of
 * LOAD_BLOCK_FRAMES and the buffer grows geometrically as data actually arrives: the frame
 * count in the header is never trusted for allocation, because a corrupt or hostile header
 * can claim billions of frames in a tiny file. Each block is checked for NaN/Inf and
 * downmixed to mono by averaging the channels (summed in double so that no finite input can
 * overflow). A read that ends with a libsndfile error, or that decodes fewer frames than an
 * exact header count promised, is a truncated or corrupt file. Finally the mono signal is
 * resampled to the target rate.
 *
 * Resampling: libsamplerate's SRC_SINC_BEST_QUALITY band-limited sinc interpolation, run in
 * one call over the whole signal with end-of-input set, so the filter is flushed and the output
 * holds floor(n * rate_out / rate_in) samples (what libsamplerate emits for a full conversion).
 *
 * Writing: 16-bit PCM WAV through libsndfile with clipping enabled, so out-of-range floats
 * saturate instead of wrapping around.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <samplerate.h>
#include <sndfile.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Frames read per sf_readf_float call: small enough that a many-channel file needs only a
 * modest scratch block, large enough that the per-call overhead is negligible. */
#define LOAD_BLOCK_FRAMES 4096

/* libsndfile reports open failures through one process-global error code (sf_strerror(NULL)),
 * so opening and fetching that message is serialised to keep messages right under concurrent
 * loads. Reading from an open handle needs no lock: libsndfile is thread-safe per handle. */
static pthread_mutex_t sf_open_lock = PTHREAD_MUTEX_INITIALIZER;

/* errno text without strerror's shared static buffer. */
static const char *errno_text(int err, char *buf, size_t len)
{
    if (strerror_r(err, buf, len) != 0) snprintf(buf, len, "error %d", err);
    return buf;
}

/* sf_open_fd under the global lock on a duplicate of fd, which libsndfile owns (closed by it
 * on failure and by sf_close): since 1.0.30 sf_open_fd closes the descriptor it was given when
 * the open fails even with close_desc false (libsndfile issues 948 / 949), so a caller's
 * close(fd) after a failed open closed the number twice, and the second close could take a
 * descriptor another thread had just been given (audio_load/threads saw "Bad file descriptor"
 * there). The caller closes fd itself in every case. On failure copies libsndfile's message
 * into msg. */
static SNDFILE *open_sndfile(int fd, int mode, SF_INFO *info, char *msg, size_t len)
{
    char ebuf[128];
    int own = dup(fd);
    if (own < 0) {
        snprintf(msg, len, "dup: %s", errno_text(errno, ebuf, sizeof ebuf));
        return NULL;
    }
    pthread_mutex_lock(&sf_open_lock);
    SNDFILE *snd = sf_open_fd(own, mode, info, 1);
    if (!snd) snprintf(msg, len, "%s", sf_strerror(NULL));
    pthread_mutex_unlock(&sf_open_lock);
    return snd;
}

/* Whether the header's frame count is exact for this container. MP3 lengths come from
 * an estimate when the stream has no Xing/LAME header, and pipes report no length at all. */
static int frames_are_exact(const SF_INFO *info)
{
    if ((info->format & SF_FORMAT_TYPEMASK) == SF_FORMAT_MPEG) return 0;
    return info->seekable && info->frames > 0 && info->frames != SF_COUNT_MAX;
}

/* Grow *buf (capacity *cap floats) to hold at least need floats, doubling. */
static sr_status grow(float **buf, size_t *cap, size_t need, const char *path)
{
    const int r = sr_grow((void **)buf, cap, need, sizeof(float), 65536);
    if (r > 0) return sr_error(SR_ERR_NOMEM, "%s: audio too long to hold in memory", path);
    if (r < 0)
        return sr_error(SR_ERR_NOMEM, "%s: out of memory growing the sample buffer to %zu samples",
                        path, need);
    return SR_OK;
}

/* Read every frame of an open handle as mono float into *out (malloc'ed, *n samples). */
static sr_status read_mono(SNDFILE *snd, const SF_INFO *info, const char *path, float **out,
                           size_t *n)
{
    const int ch = info->channels;
    float *block = sr_malloc((size_t)LOAD_BLOCK_FRAMES * (size_t)ch * sizeof(float),
                             "audio read block");
    if (!block) return sr_error_prefix(SR_ERR_NOMEM, "%s", path);
    float *mono = NULL;
    size_t cap = 0, total = 0;
    sr_status st = SR_OK;
    for (;;) {
        sf_count_t got = sf_readf_float(snd, block, LOAD_BLOCK_FRAMES);
        if (got <= 0) break;
        st = grow(&mono, &cap, total + (size_t)got, path);
        if (st) break;
        for (sf_count_t f = 0; f < got && !st; f++) {
            double sum = 0.0;
            for (int c = 0; c < ch; c++) {
                float v = block[(size_t)f * (size_t)ch + (size_t)c];
                if (!isfinite(v)) {
                    st = sr_error(SR_ERR_FORMAT, "%s: sample %zu (channel %d) is %s", path,
                                  total + (size_t)f, c, isnan(v) ? "NaN" : "infinite");
                    break;
                }
                sum += v;
            }
            mono[total + (size_t)f] = (float)(sum / ch);
        }
        if (st) break;
        total += (size_t)got;
    }
    free(block);
    if (!st && sf_error(snd) != SF_ERR_NO_ERROR)
        st = sr_error(SR_ERR_FORMAT, "%s: decoding failed after %zu frames: %s", path, total,
                      sf_strerror(snd));
    if (!st && total == 0) st = sr_error(SR_ERR_FORMAT, "%s: no audio samples", path);
    if (!st && frames_are_exact(info) && (sf_count_t)total < info->frames)
        st = sr_error(SR_ERR_FORMAT,
                      "%s: truncated or corrupt: header declares %lld frames, only %zu decoded",
                      path, (long long)info->frames, total);
    if (st) {
        free(mono);
        return st;
    }
    /* Give back the unused tail of the geometric growth. */
    float *shrunk = realloc(mono, total * sizeof(float));
    *out = shrunk ? shrunk : mono;
    *n = total;
    return SR_OK;
}

/* Resample without argument checks (callers validated); see sr_audio_resample. */
static sr_status resample(const float *in, size_t n, int rate_in, int rate_out, float **out,
                          size_t *n_out)
{
    if (rate_in == rate_out || n == 0) {
        float *p = sr_malloc(n * sizeof(float), "resampled audio");
        if (!p) return SR_ERR_NOMEM;
        if (n) memcpy(p, in, n * sizeof(float));
        *out = p;
        *n_out = n;
        return SR_OK;
    }
    double ratio = (double)rate_out / (double)rate_in;
    if (!src_is_valid_ratio(ratio))
        return sr_error(SR_ERR_ARG, "resample %d Hz -> %d Hz: ratio %g outside libsamplerate's "
                        "range [1/256, 256]", rate_in, rate_out, ratio);
    if (n > (size_t)LONG_MAX / 256)
        return sr_error(SR_ERR_ARG, "resample: %zu samples is more than libsamplerate takes", n);
    /* floor(n * ratio) is what a full conversion emits; two spare slots absorb rounding. */
    size_t cap = (size_t)((double)n * ratio) + 2;
    float *p = sr_malloc(cap * sizeof(float), "resampled audio");
    if (!p) return SR_ERR_NOMEM;
    SRC_DATA d;
    memset(&d, 0, sizeof d);
    d.data_in = in;
    d.data_out = p;
    d.input_frames = (long)n;
    d.output_frames = (long)cap;
    d.src_ratio = ratio;
    d.end_of_input = 1;
    int err = src_simple(&d, SRC_SINC_BEST_QUALITY, 1);
    if (err) {
        free(p);
        /* Pointers, lengths and ratio were validated above, so what remains for libsamplerate
         * to fail on is its own allocation of filter state. */
        return sr_error(SR_ERR_NOMEM, "resample %d Hz -> %d Hz: libsamplerate: %s", rate_in, rate_out,
                        src_strerror(err));
    }
    *out = p;
    *n_out = (size_t)d.output_frames_gen;
    return SR_OK;
}

sr_status sr_audio_load(const char *path, int target_rate, sr_audio *out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_audio_load: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return sr_error(SR_ERR_ARG, "sr_audio_load: path is NULL");
    if (target_rate < 0)
        return sr_error(SR_ERR_ARG, "sr_audio_load: %s: target_rate %d is negative", path,
                        target_rate);

    char ebuf[256];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return sr_error(SR_ERR_IO, "%s: %s", path, errno_text(errno, ebuf, sizeof ebuf));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return sr_error(SR_ERR_IO, "%s: %s", path, errno_text(e, ebuf, sizeof ebuf));
    }
    /* open(2) succeeds on directories; reading one is an I/O error, not a format error. */
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return sr_error(SR_ERR_IO, "%s: %s", path, errno_text(EISDIR, ebuf, sizeof ebuf));
    }
    if (S_ISREG(sb.st_mode) && sb.st_size == 0) {
        close(fd);
        return sr_error(SR_ERR_FORMAT, "%s: empty file (0 bytes), no audio samples", path);
    }

    SF_INFO info;
    memset(&info, 0, sizeof info);
    char msg[256];
    SNDFILE *snd = open_sndfile(fd, SFM_READ, &info, msg, sizeof msg);
    if (!snd) {
        close(fd);
        return sr_error(SR_ERR_FORMAT, "%s: not a readable audio file: %s", path, msg);
    }
    sr_status st = SR_OK;
    if (info.channels <= 0 || info.samplerate <= 0)
        st = sr_error(SR_ERR_FORMAT, "%s: header has %d channels at %d Hz", path, info.channels,
                      info.samplerate);
    float *mono = NULL;
    size_t n = 0;
    if (!st) st = read_mono(snd, &info, path, &mono, &n);
    sf_close(snd);
    close(fd);
    if (st) return st;

    int rate = info.samplerate;
    if (target_rate != 0 && target_rate != rate) {
        float *res = NULL;
        size_t n_res = 0;
        st = resample(mono, n, rate, target_rate, &res, &n_res);
        free(mono);
        if (st) return sr_error_prefix(st, "%s", path);
        mono = res;
        n = n_res;
        rate = target_rate;
        if (n == 0) {
            free(mono);
            return sr_error(SR_ERR_FORMAT, "%s: no audio samples after resampling to %d Hz",
                            path, target_rate);
        }
    }
    out->samples = mono;
    out->n = n;
    out->sample_rate = rate;
    return SR_OK;
}

sr_status sr_audio_resample(const float *in, size_t n, int rate_in, int rate_out, float **out,
                            size_t *n_out)
{
    if (!out || !n_out) return sr_error(SR_ERR_ARG, "sr_audio_resample: out or n_out is NULL");
    *out = NULL;
    *n_out = 0;
    if (!in && n > 0) return sr_error(SR_ERR_ARG, "sr_audio_resample: in is NULL with n = %zu", n);
    if (rate_in <= 0 || rate_out <= 0)
        return sr_error(SR_ERR_ARG, "sr_audio_resample: rate_in %d / rate_out %d must be positive",
                        rate_in, rate_out);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(in[i]))
            return sr_error(SR_ERR_ARG, "sr_audio_resample: in[%zu] is %s", i,
                            isnan(in[i]) ? "NaN" : "infinite");
    return resample(in, n, rate_in, rate_out, out, n_out);
}

sr_status sr_audio_write_wav(const char *path, const float *samples, size_t n, int sample_rate)
{
    if (!path) return sr_error(SR_ERR_ARG, "sr_audio_write_wav: path is NULL");
    if (!samples && n > 0)
        return sr_error(SR_ERR_ARG, "sr_audio_write_wav: %s: samples is NULL with n = %zu", path, n);
    if (sample_rate <= 0)
        return sr_error(SR_ERR_ARG, "sr_audio_write_wav: %s: sample_rate %d must be positive",
                        path, sample_rate);
    /* 16-bit WAV addresses at most 4 GiB of data. */
    if (n > (size_t)0x7FFFFFFF)
        return sr_error(SR_ERR_ARG, "sr_audio_write_wav: %s: %zu samples exceed the WAV limit",
                        path, n);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(samples[i]))
            return sr_error(SR_ERR_ARG, "sr_audio_write_wav: %s: samples[%zu] is %s", path, i,
                            isnan(samples[i]) ? "NaN" : "infinite");

    char ebuf[256];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return sr_error(SR_ERR_IO, "%s: %s", path, errno_text(errno, ebuf, sizeof ebuf));
    SF_INFO info;
    memset(&info, 0, sizeof info);
    info.channels = 1;
    info.samplerate = sample_rate;
    info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    char msg[256];
    SNDFILE *snd = open_sndfile(fd, SFM_WRITE, &info, msg, sizeof msg);
    if (!snd) {
        close(fd);
        return sr_error(SR_ERR_IO, "%s: cannot write WAV: %s", path, msg);
    }
    /* Without clipping libsndfile wraps values beyond [-1, 1] around to the other sign. */
    sf_command(snd, SFC_SET_CLIPPING, NULL, SF_TRUE);
    sr_status st = SR_OK;
    sf_count_t wrote = n ? sf_writef_float(snd, samples, (sf_count_t)n) : 0;
    if (wrote != (sf_count_t)n)
        st = sr_error(SR_ERR_IO, "%s: wrote %lld of %zu samples: %s", path, (long long)wrote, n,
                      sf_strerror(snd));
    if (sf_close(snd) != 0 && !st) st = sr_error(SR_ERR_IO, "%s: closing the WAV failed", path);
    if (close(fd) != 0 && !st)
        st = sr_error(SR_ERR_IO, "%s: %s", path, errno_text(errno, ebuf, sizeof ebuf));
    return st;
}

void sr_audio_free(sr_audio *a)
{
    if (!a) return;
    free(a->samples);
    memset(a, 0, sizeof *a);
}
