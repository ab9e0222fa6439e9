/*
 * test_audio.c — suite core_audio: sr_audio_load / sr_audio_resample / sr_audio_write_wav.
 *
 * Signals are generated in the test and written with sr_audio_write_wav or directly with
 * libsndfile (stereo, float, FLAC, OGG, MP3), so every case runs without shared data; the two
 * real files under ../shared/data are checked for their known lengths when present.
 * Frequencies are measured from linearly interpolated upward zero crossings (mean period over
 * the whole tone) and tone levels with the Goertzel algorithm (one DFT bin at an arbitrary
 * frequency: s[n] = x[n] + 2 cos(w) s[n-1] - s[n-2], power = s1^2 + s2^2 - 2 cos(w) s1 s2).
 */
#include <math.h>
#include <pthread.h>
#include <sndfile.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test.h"

static const double PI = 3.14159265358979323846;

/* n samples of amp * sin(2 pi f t) at rate. */
static float *make_sine(size_t n, double f, int rate, double amp)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(amp * sin(2 * PI * f * (double)i / rate));
    return x;
}

/* Frequency from the mean spacing of upward zero crossings in x[from, to). */
static double zero_cross_freq(const float *x, size_t from, size_t to, int rate)
{
    double first = -1, last = -1;
    int count = 0;
    for (size_t i = from + 1; i < to; i++) {
        if (x[i - 1] < 0 && x[i] >= 0) {
            double t = (double)(i - 1) + x[i - 1] / (double)(x[i - 1] - x[i]);
            if (first < 0) first = t;
            last = t;
            count++;
        }
    }
    if (count < 2) return 0;
    return (count - 1) * (double)rate / (last - first);
}

/* Amplitude of the component at f in x[from, to) (Goertzel; exact for a bin-centred tone,
 * within a few per cent otherwise, which is all the level checks need). */
static double goertzel_amp(const float *x, size_t from, size_t to, double f, int rate)
{
    double w = 2 * PI * f / rate, c = 2 * cos(w), s1 = 0, s2 = 0;
    for (size_t i = from; i < to; i++) {
        double s = x[i] + c * s1 - s2;
        s2 = s1;
        s1 = s;
    }
    double p = s1 * s1 + s2 * s2 - c * s1 * s2;
    return 2 * sqrt(p > 0 ? p : 0) / (double)(to - from);
}

static double rms(const float *x, size_t from, size_t to)
{
    double s = 0;
    for (size_t i = from; i < to; i++) s += (double)x[i] * x[i];
    return sqrt(s / (double)(to - from));
}

/* Write frames with libsndfile in any format; returns 0 when the build cannot write it. */
static int write_sf(const char *path, int format, int channels, int rate, const float *inter,
                    size_t frames)
{
    SF_INFO info;
    memset(&info, 0, sizeof info);
    info.channels = channels;
    info.samplerate = rate;
    info.format = format;
    if (!sf_format_check(&info)) return 0;
    SNDFILE *s = sf_open(path, SFM_WRITE, &info);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(sf_writef_float(s, inter, (sf_count_t)frames), (sf_count_t)frames);
    CU_ASSERT_EQUAL(sf_close(s), 0);
    return 1;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    if (n) CU_ASSERT_EQUAL(fwrite(data, 1, n, f), n);
    fclose(f);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len);
    CU_ASSERT_EQUAL(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* ---- round trip ---------------------------------------------------------------------------- */

static void test_roundtrip_wav(void)
{
    const size_t n = 16000;
    float *x = make_sine(n, 440, 16000, 0.9);
    x[0] = 1.0f;
    x[1] = -1.0f;
    const char *p = test_tmppath("roundtrip.wav");
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(p, x, n, 16000), SR_OK);
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 0, &a), SR_OK);
    CU_ASSERT_EQUAL(a.n, n);
    CU_ASSERT_EQUAL(a.sample_rate, 16000);
    /* libsndfile writes x * 32767 rounded and reads back k / 32768: the scale mismatch adds at
     * most |x| / 32768 to the half-step rounding error, so 1.5 / 32768 bounds it. */
    double d = test_max_abs_diff(x, a.samples, n);
    CU_ASSERT(d <= 1.5 / 32768);
    /* target_rate equal to the file's rate must not resample. */
    sr_audio b;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 16000, &b), SR_OK);
    CU_ASSERT_EQUAL(b.n, n);
    CU_ASSERT_EQUAL(test_max_abs_diff(a.samples, b.samples, n), 0.0);
    sr_audio_free(&a);
    sr_audio_free(&b);
    CU_ASSERT_PTR_NULL(a.samples);
    CU_ASSERT_EQUAL(a.n, 0);
    sr_audio_free(&a); /* zeroed struct: no-op */
    sr_audio_free(NULL);
    free(x);
}

static void test_write_clips(void)
{
    /* Out-of-range samples saturate to full scale; without clipping they would wrap to the
     * opposite sign. */
    float x[4] = {1.5f, -1.5f, 3.0f, 0.25f};
    const char *p = test_tmppath("clip.wav");
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(p, x, 4, 8000), SR_OK);
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 0, &a), SR_OK);
    CU_ASSERT_EQUAL(a.n, 4);
    CU_ASSERT_EQUAL(a.sample_rate, 8000);
    CU_ASSERT(a.samples[0] > 0.999f && a.samples[0] <= 1.0f);
    CU_ASSERT(a.samples[1] >= -1.0f && a.samples[1] < -0.999f);
    CU_ASSERT(a.samples[2] > 0.999f);
    CU_ASSERT(fabsf(a.samples[3] - 0.25f) <= 1.5f / 32768);
    sr_audio_free(&a);
}

static void test_float_wav_not_clipped(void)
{
    /* Loading clips nothing: a float WAV keeps values beyond [-1, 1] exactly. */
    float x[3] = {1.75f, -2.5f, 0.125f};
    const char *p = test_tmppath("float_big.wav");
    CU_ASSERT_FATAL(write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 1, 16000, x, 3));
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 0, &a), SR_OK);
    CU_ASSERT_EQUAL(a.n, 3);
    CU_ASSERT_EQUAL(test_max_abs_diff(x, a.samples, 3), 0.0);
    sr_audio_free(&a);
}

/* ---- resampling ---------------------------------------------------------------------------- */

/* Resample one second of a tone and check length, frequency and level. */
static void check_resampled_tone(int rate_in, double f)
{
    const int rate_out = 16000;
    const size_t n = (size_t)rate_in;
    float *x = make_sine(n, f, rate_in, 0.5);
    float *y = NULL;
    size_t ny = 0;
    CU_ASSERT_EQUAL_FATAL(sr_audio_resample(x, n, rate_in, rate_out, &y, &ny), SR_OK);
    double want = (double)n * rate_out / rate_in;
    CU_ASSERT(fabs((double)ny - want) <= 1.0);
    /* Skip the filter's edge transients: 10 ms at each end. */
    size_t lo = rate_out / 100, hi = ny - rate_out / 100;
    double fy = zero_cross_freq(y, lo, hi, rate_out);
    CU_ASSERT(fabs(fy - f) < 0.001);
    double amp = goertzel_amp(y, lo, hi, f, rate_out);
    CU_ASSERT(fabs(amp - 0.5) < 0.001); /* passband gain within 0.2 % */
    if (fabs(fy - f) >= 0.001 || fabs(amp - 0.5) >= 0.001)
        printf("\n      %d->%d Hz: %zu samples, tone %.4f Hz (want %.1f), amplitude %.5f\n", rate_in,
               rate_out, ny, fy, f, amp);
    free(x);
    free(y);
}

static void test_resample_44100_to_16000(void) { check_resampled_tone(44100, 1000); }
static void test_resample_8000_to_16000(void) { check_resampled_tone(8000, 440); }

static void test_resample_antialias(void)
{
    /* 44.1 kHz -> 16 kHz: a 10 kHz tone lies above the new Nyquist (8 kHz) and must be
     * removed, not folded to 6 kHz; a 3 kHz tone beside it must pass unchanged. */
    const size_t n = 44100;
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(0.4 * sin(2 * PI * 3000 * i / 44100.0) + 0.4 * sin(2 * PI * 10000 * i / 44100.0));
    float *y = NULL;
    size_t ny = 0;
    CU_ASSERT_EQUAL_FATAL(sr_audio_resample(x, n, 44100, 16000, &y, &ny), SR_OK);
    double pass = goertzel_amp(y, 160, ny - 160, 3000, 16000);
    double alias = goertzel_amp(y, 160, ny - 160, 6000, 16000);
    CU_ASSERT(fabs(pass - 0.4) < 0.0004);
    CU_ASSERT(alias < 0.4 * 1e-4); /* below -80 dB (measured about -155 dB) */
    free(x);
    free(y);
}

static void test_resample_identity_and_empty(void)
{
    float x[5] = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f};
    float *y = NULL;
    size_t ny = 99;
    CU_ASSERT_EQUAL_FATAL(sr_audio_resample(x, 5, 22050, 22050, &y, &ny), SR_OK);
    CU_ASSERT_EQUAL(ny, 5);
    CU_ASSERT_EQUAL(test_max_abs_diff(x, y, 5), 0.0);
    free(y);
    CU_ASSERT_EQUAL_FATAL(sr_audio_resample(NULL, 0, 8000, 16000, &y, &ny), SR_OK);
    CU_ASSERT_EQUAL(ny, 0);
    free(y);
}

static void test_load_resamples(void)
{
    /* A 44.1 kHz file loaded at 16 kHz: same path as the tone test, through the loader. */
    const size_t n = 44100 / 2;
    float *x = make_sine(n, 1000, 44100, 0.5);
    const char *p = test_tmppath("tone44k.wav");
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(p, x, n, 44100), SR_OK);
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 16000, &a), SR_OK);
    CU_ASSERT_EQUAL(a.sample_rate, 16000);
    CU_ASSERT(fabs((double)a.n - n * 16000.0 / 44100) <= 1.0);
    CU_ASSERT(fabs(zero_cross_freq(a.samples, 160, a.n - 160, 16000) - 1000) < 0.001);
    sr_audio_free(&a);
    free(x);
}

/* ---- channels ------------------------------------------------------------------------------ */

static void test_stereo_downmix(void)
{
    const size_t n = 4000;
    float *s = make_sine(n, 300, 16000, 0.7);
    float *st = malloc(2 * n * sizeof(float));
    /* Float samples so that the averages are exact. */
    for (size_t i = 0; i < n; i++) { st[2 * i] = s[i]; st[2 * i + 1] = -s[i]; }
    const char *p1 = test_tmppath("stereo_cancel.wav");
    CU_ASSERT_FATAL(write_sf(p1, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 2, 16000, st, n));
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p1, 0, &a), SR_OK);
    CU_ASSERT_EQUAL(a.n, n);
    CU_ASSERT_EQUAL(rms(a.samples, 0, a.n), 0.0);
    sr_audio_free(&a);

    for (size_t i = 0; i < n; i++) st[2 * i] = st[2 * i + 1] = s[i];
    const char *p2 = test_tmppath("stereo_same.wav");
    CU_ASSERT_FATAL(write_sf(p2, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 2, 16000, st, n));
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p2, 0, &a), SR_OK);
    CU_ASSERT_EQUAL(a.n, n);
    CU_ASSERT_EQUAL(test_max_abs_diff(a.samples, s, n), 0.0);
    sr_audio_free(&a);

    /* Three channels at 0.25, 0.5, 0.75 average to 0.5 (all exactly representable). */
    float tri[3 * 10];
    for (int i = 0; i < 10; i++) { tri[3 * i] = 0.25f; tri[3 * i + 1] = 0.5f; tri[3 * i + 2] = 0.75f; }
    const char *p3 = test_tmppath("three.wav");
    CU_ASSERT_FATAL(write_sf(p3, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 3, 16000, tri, 10));
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p3, 0, &a), SR_OK);
    CU_ASSERT_EQUAL(a.n, 10);
    for (size_t i = 0; i < a.n; i++) CU_ASSERT_EQUAL(a.samples[i], 0.5f);
    sr_audio_free(&a);
    free(s);
    free(st);
}

/* ---- formats ------------------------------------------------------------------------------- */

static void test_flac_generated(void)
{
    const size_t n = 12345;
    float *x = make_sine(n, 500, 16000, 0.5);
    const char *p = test_tmppath("gen.flac");
    CU_ASSERT_FATAL(write_sf(p, SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 1, 16000, x, n));
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 0, &a), SR_OK);
    CU_ASSERT_EQUAL(a.n, n);
    /* FLAC is lossless: only the 16-bit quantisation remains (see test_roundtrip_wav). */
    CU_ASSERT(test_max_abs_diff(x, a.samples, n) <= 1.5 / 32768);
    sr_audio_free(&a);
    free(x);
}

static void test_flac_shared(void)
{
    const char *p = test_shared("librispeech-sample/61-70968-0000.flac");
    if (!p) { TEST_SKIP("../shared/data/librispeech-sample not present"); return; }
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 16000, &a), SR_OK);
    CU_ASSERT_EQUAL(a.sample_rate, 16000);
    CU_ASSERT_EQUAL(a.n, 78480); /* 4.905 s */
    CU_ASSERT(rms(a.samples, 0, a.n) > 0.01);
    sr_audio_free(&a);
}

static void test_jfk_duration(void)
{
    const char *p = test_shared("speech-samples/jfk.wav");
    if (!p) { TEST_SKIP("../shared/data/speech-samples not present"); return; }
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 16000, &a), SR_OK);
    CU_ASSERT_EQUAL(a.sample_rate, 16000);
    CU_ASSERT_EQUAL(a.n, 176000); /* 11.0 s */
    CU_ASSERT(rms(a.samples, 0, a.n) > 0.01);
    sr_audio_free(&a);
}

/* A lossy codec keeps length (both store it exactly here), frequency and roughly the level. */
static void check_lossy(const char *name, int format)
{
    const size_t n = 24000;
    float *x = make_sine(n, 440, 16000, 0.5);
    const char *p = test_tmppath(name);
    if (!write_sf(p, format, 1, 16000, x, n)) {
        char why[128];
        snprintf(why, sizeof why, "this libsndfile cannot write %s", name);
        TEST_SKIP(why);
        free(x);
        return;
    }
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 0, &a), SR_OK);
    CU_ASSERT_EQUAL(a.sample_rate, 16000);
    CU_ASSERT_EQUAL(a.n, n);
    CU_ASSERT(fabs(zero_cross_freq(a.samples, 1600, a.n - 1600, 16000) - 440) < 0.01);
    CU_ASSERT(fabs(goertzel_amp(a.samples, 1600, a.n - 1600, 440, 16000) - 0.5) < 0.005);
    sr_audio_free(&a);
    free(x);
}

static void test_ogg_vorbis(void) { check_lossy("tone.ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS); }
static void test_mp3(void) { check_lossy("tone.mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III); }

/* ---- errors -------------------------------------------------------------------------------- */

static void test_err_args(void)
{
    sr_audio a;
    TEST_ASSERT_ERR(sr_audio_load(NULL, 0, &a), SR_ERR_ARG, "path");
    CU_ASSERT_PTR_NULL(a.samples);
    TEST_ASSERT_ERR(sr_audio_load("x.wav", 0, NULL), SR_ERR_ARG, "out");
    TEST_ASSERT_ERR(sr_audio_load("x.wav", -16000, &a), SR_ERR_ARG, "target_rate");
    float x[4] = {0};
    float *y = NULL;
    size_t ny = 0;
    TEST_ASSERT_ERR(sr_audio_resample(x, 4, 0, 16000, &y, &ny), SR_ERR_ARG, "rate_in");
    TEST_ASSERT_ERR(sr_audio_resample(x, 4, 16000, -1, &y, &ny), SR_ERR_ARG, "rate_out");
    TEST_ASSERT_ERR(sr_audio_resample(NULL, 4, 8000, 16000, &y, &ny), SR_ERR_ARG, "in is NULL");
    TEST_ASSERT_ERR(sr_audio_resample(x, 4, 8000, 16000, NULL, &ny), SR_ERR_ARG, "out");
    TEST_ASSERT_ERR(sr_audio_resample(x, 4, 1000, 16000 * 32, &y, &ny), SR_ERR_ARG, "ratio");
    x[2] = NAN;
    TEST_ASSERT_ERR(sr_audio_resample(x, 4, 8000, 16000, &y, &ny), SR_ERR_ARG, "in[2]");
    CU_ASSERT_PTR_NULL(y);
    const char *p = test_tmppath("bad_args.wav");
    TEST_ASSERT_ERR(sr_audio_write_wav(p, x, 4, 16000), SR_ERR_ARG, "samples[2]");
    x[2] = 0;
    TEST_ASSERT_ERR(sr_audio_write_wav(p, x, 4, 0), SR_ERR_ARG, "sample_rate");
    TEST_ASSERT_ERR(sr_audio_write_wav(NULL, x, 4, 16000), SR_ERR_ARG, "path");
    TEST_ASSERT_ERR(sr_audio_write_wav(p, NULL, 4, 16000), SR_ERR_ARG, "samples");
}

static void test_err_nonexistent(void)
{
    sr_audio a;
    const char *p = test_tmppath("does-not-exist.wav");
    TEST_ASSERT_ERR(sr_audio_load(p, 0, &a), SR_ERR_IO, p);
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), "No such file"));
    CU_ASSERT_PTR_NULL(a.samples);
    CU_ASSERT_EQUAL(a.n, 0);
    float x[1] = {0};
    const char *q = test_tmppath("no-such-dir/out.wav");
    TEST_ASSERT_ERR(sr_audio_write_wav(q, x, 1, 16000), SR_ERR_IO, q);
}

static void test_err_directory(void)
{
    sr_audio a;
    TEST_ASSERT_ERR(sr_audio_load(test_tmpdir(), 0, &a), SR_ERR_IO, test_tmpdir());
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), "directory"));
}

static void test_err_empty_file(void)
{
    const char *p = test_tmppath("empty.wav");
    write_bytes(p, "", 0);
    sr_audio a;
    TEST_ASSERT_ERR(sr_audio_load(p, 0, &a), SR_ERR_FORMAT, p);
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), "empty"));
}

static void test_err_zero_frames(void)
{
    const char *p = test_tmppath("zero_frames.wav");
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(p, NULL, 0, 16000), SR_OK);
    struct stat sb;
    CU_ASSERT_EQUAL(stat(p, &sb), 0);
    CU_ASSERT_EQUAL(sb.st_size, 44); /* a bare canonical header */
    sr_audio a;
    TEST_ASSERT_ERR(sr_audio_load(p, 16000, &a), SR_ERR_FORMAT, "no audio samples");
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), p));
}

static void test_err_text_as_wav(void)
{
    const char *p = test_tmppath("text.wav");
    const char *text = "This is a plain text file, not audio.\nSecond line.\n";
    write_bytes(p, text, strlen(text));
    sr_audio a;
    TEST_ASSERT_ERR(sr_audio_load(p, 0, &a), SR_ERR_FORMAT, p);
    /* libsndfile's own reason follows the path. */
    const char *why = strstr(sr_last_error(), "not a readable audio file: ");
    CU_ASSERT(why && strlen(why) > strlen("not a readable audio file: "));
}

/* A generated FLAC of n noise-like samples (incompressible enough to span many frames). */
static const char *make_flac(const char *name, size_t n)
{
    float *x = malloc(n * sizeof(float));
    uint32_t r = 12345;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = 0.3f * (float)((double)(r >> 8) / (1 << 24) - 0.5) + 0.3f * sinf(0.05f * (float)i);
    }
    const char *p = test_tmppath(name);
    CU_ASSERT_FATAL(write_sf(p, SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 1, 16000, x, n));
    free(x);
    return p;
}

static void test_err_truncated_flac(void)
{
    const char *src = make_flac("full.flac", 32000);
    size_t len = 0;
    unsigned char *b = read_bytes(src, &len);
    const char *p = test_tmppath("truncated.flac");
    write_bytes(p, b, len / 2);
    sr_audio a;
    TEST_ASSERT_ERR(sr_audio_load(p, 0, &a), SR_ERR_FORMAT, p);
    CU_ASSERT_PTR_NULL(a.samples);
    /* Cut inside the header: libsndfile refuses to open it. */
    const char *q = test_tmppath("truncated_header.flac");
    write_bytes(q, b, 30);
    TEST_ASSERT_ERR(sr_audio_load(q, 0, &a), SR_ERR_FORMAT, q);
    free(b);

    /* The same cut of the real LibriSpeech file, when present. */
    const char *shared = test_shared("librispeech-sample/61-70968-0000.flac");
    if (!shared) return;
    b = read_bytes(shared, &len);
    const char *r = test_tmppath("truncated_shared.flac");
    write_bytes(r, b, len / 2);
    TEST_ASSERT_ERR(sr_audio_load(r, 16000, &a), SR_ERR_FORMAT, r);
    free(b);
}

static void test_err_lying_header(void)
{
    /* FLAC STREAMINFO claiming 10^10 frames (40 GB of float) for a 1000-sample file: the
     * loader must grow with the data, then report the mismatch. The 36-bit total-samples field
     * sits in bytes 13 (low nibble) .. 17 of STREAMINFO, which starts at byte 8. */
    const char *src = make_flac("small.flac", 1000);
    size_t len = 0;
    unsigned char *b = read_bytes(src, &len);
    CU_ASSERT_FATAL(len > 26 && !memcmp(b, "fLaC", 4));
    const uint64_t lie = 10000000000ull;
    b[8 + 13] = (unsigned char)((b[8 + 13] & 0xF0) | ((lie >> 32) & 0x0F));
    for (int i = 0; i < 4; i++) b[8 + 14 + i] = (unsigned char)(lie >> (24 - 8 * i));
    const char *p = test_tmppath("lying.flac");
    write_bytes(p, b, len);
    sr_audio a;
    TEST_ASSERT_ERR(sr_audio_load(p, 0, &a), SR_ERR_FORMAT, "10000000000");
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), p));
    free(b);

    /* A WAV whose RIFF and data sizes claim ~4 GB: libsndfile bounds the data by the file
     * length, so the real 1000 samples load. */
    float *x = make_sine(1000, 440, 16000, 0.5);
    const char *w = test_tmppath("lying.wav");
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(w, x, 1000, 16000), SR_OK);
    b = read_bytes(w, &len);
    CU_ASSERT_FATAL(len == 44 + 2000 && !memcmp(b + 36, "data", 4));
    memset(b + 4, 0xF8, 4);
    memset(b + 40, 0xF0, 4);
    write_bytes(w, b, len);
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(w, 0, &a), SR_OK);
    CU_ASSERT_EQUAL(a.n, 1000);
    CU_ASSERT(test_max_abs_diff(x, a.samples, 1000) <= 1.5 / 32768);
    sr_audio_free(&a);
    free(b);
    free(x);
}

static void test_err_nonfinite(void)
{
    float x[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    x[4] = INFINITY;
    const char *p = test_tmppath("inf.wav");
    CU_ASSERT_FATAL(write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 2, 16000, x, 3));
    sr_audio a;
    TEST_ASSERT_ERR(sr_audio_load(p, 0, &a), SR_ERR_FORMAT, "sample 2 (channel 0) is infinite");
    x[4] = 0.5f;
    x[1] = NAN;
    CU_ASSERT_FATAL(write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 2, 16000, x, 3));
    TEST_ASSERT_ERR(sr_audio_load(p, 0, &a), SR_ERR_FORMAT, "sample 0 (channel 1) is NaN");
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), p));
}

/* ---- threads ------------------------------------------------------------------------------- */

typedef struct {
    const char *path;
    sr_status want;
    size_t want_n;
    int bad;           /* failures seen */
    char first[512];   /* the first failure, for the report (this test failed rarely under ASan) */
} load_job;

static void *load_worker(void *arg)
{
    load_job *j = arg;
    for (int i = 0; i < 25; i++) {
        sr_audio a;
        sr_status st = sr_audio_load(j->path, 16000, &a);
        int bad = st != j->want || (st == SR_OK && a.n != j->want_n) ||
                  (st != SR_OK && !strstr(sr_last_error(), j->path));
        if (bad && !j->bad++)
            snprintf(j->first, sizeof j->first, "load %d: status %d (want %d), %zu samples (want %zu), \"%s\"",
                     i, (int)st, (int)j->want, st == SR_OK ? a.n : 0, j->want_n, st ? sr_last_error() : "");
        sr_audio_free(&a);
    }
    return NULL;
}

static void test_threads(void)
{
    /* Concurrent loads, failing and succeeding, each thread seeing its own error text. */
    float *x = make_sine(8000, 440, 8000, 0.5);
    const char *good = test_tmppath("mt_good.wav");
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(good, x, 8000, 8000), SR_OK);
    const char *text = test_tmppath("mt_text.wav");
    write_bytes(text, "not audio at all, just some words here", 38);
    load_job jobs[4] = {{good, SR_OK, 16000, 0, ""},
                        {text, SR_ERR_FORMAT, 0, 0, ""},
                        {test_tmppath("mt_missing.wav"), SR_ERR_IO, 0, 0, ""},
                        {make_flac("mt.flac", 4000), SR_OK, 4000, 0, ""}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, load_worker, &jobs[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(jobs[i].bad, 0);
        if (jobs[i].bad) printf("\n      job %d (%s): %d bad loads, first: %s", i, jobs[i].path, jobs[i].bad, jobs[i].first);
    }
    free(x);
}

void test_register_core_audio(void)
{
    TEST_SUITE("core_audio",
               {"roundtrip_wav", test_roundtrip_wav},
               {"write_clips", test_write_clips},
               {"float_wav_not_clipped", test_float_wav_not_clipped},
               {"resample_44100_to_16000", test_resample_44100_to_16000},
               {"resample_8000_to_16000", test_resample_8000_to_16000},
               {"resample_antialias", test_resample_antialias},
               {"resample_identity_and_empty", test_resample_identity_and_empty},
               {"load_resamples", test_load_resamples},
               {"stereo_downmix", test_stereo_downmix},
               {"flac_generated", test_flac_generated},
               {"flac_shared", test_flac_shared},
               {"jfk_duration", test_jfk_duration},
               {"ogg_vorbis", test_ogg_vorbis},
               {"mp3", test_mp3},
               {"err_args", test_err_args},
               {"err_nonexistent", test_err_nonexistent},
               {"err_directory", test_err_directory},
               {"err_empty_file", test_err_empty_file},
               {"err_zero_frames", test_err_zero_frames},
               {"err_text_as_wav", test_err_text_as_wav},
               {"err_truncated_flac", test_err_truncated_flac},
               {"err_lying_header", test_err_lying_header},
               {"err_nonfinite", test_err_nonfinite},
               {"threads", test_threads});
}
