/*
 * fuzz_audio.c — audio decoding: sr_audio_load (core/audio.c) on arbitrary bytes, through
 * libsndfile's format detection (WAV, FLAC, OGG, MP3, AIFF, AU, ...), the block reader, the
 * NaN/Inf check and the downmix; resampling to 16 kHz for one input in 16 (chosen by the
 * last byte, which rarely matters to a container) to keep the slow sinc resampler's share small.
 * Every sample of a successful load must be finite.
 *
 * libsndfile's MP3 decoder (libmpg123) writes diagnostics to stderr on damaged streams ("error:
 * dequantization failed!", "Note: Illegal Audio-MPEG-Header ..."), although srkit promises
 * that library code never prints (tests/fuzz/crashes/README.md). Left alone that floods the
 * log (hundreds of MB a minute) and slows the fuzzer twentyfold, so stderr (fd 2) is pointed at
 * a scratch file during the call; the sanitizers report to a saved copy of the real stderr.
 * With SRKIT_FUZZ_STATS set, the count of inputs that printed is shown at exit. A timeout or
 * libFuzzer's own crash line during the call lands in the scratch file (the artifact is still
 * written).
 */
#include "fuzz_common.h"

#include <math.h>
#include <sanitizer/common_interface_defs.h>

#include "../../core/sr.h"

static int err_saved = -1, err_sink = -1;
static unsigned long n_inputs, n_loaded, n_printed;

static void print_stats(void)
{
    fprintf(stderr, "fuzz_audio: %lu inputs, %lu loaded, %lu made the library print to stderr\n",
            n_inputs, n_loaded, n_printed);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char path[512];
    err_sink = open(fuzz_path(path, sizeof path, "stderr.txt"), O_RDWR | O_CREAT | O_TRUNC, 0600);
    err_saved = dup(2);
    if (err_sink < 0 || err_saved < 0) {
        perror("fuzz_audio: stderr redirection");
        abort();
    }
    __sanitizer_set_report_fd((void *)(intptr_t)err_saved);
    if (getenv("SRKIT_FUZZ_STATS")) atexit(print_stats);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_write(path, sizeof path, "in.audio", data, size);
    int rate = size && (data[size - 1] & 15) == 0 ? 16000 : 0;
    sr_audio a;
    n_inputs++;
    fflush(stderr);
    if (ftruncate(err_sink, 0) != 0 || lseek(err_sink, 0, SEEK_SET) != 0) abort();
    dup2(err_sink, 2);
    sr_status st = sr_audio_load(path, rate, &a);
    fflush(stderr);
    dup2(err_saved, 2);
    if (lseek(err_sink, 0, SEEK_END) > 0) n_printed++;
    if (st == SR_OK) {
        n_loaded++;
        FUZZ_CHECK(a.n > 0 && a.samples && a.sample_rate > 0);
        FUZZ_CHECK(!rate || a.sample_rate == rate);
        for (size_t i = 0; i < a.n; i++) FUZZ_CHECK(isfinite(a.samples[i]));
    } else {
        FUZZ_CHECK(a.samples == NULL && a.n == 0);
    }
    sr_audio_free(&a);
    return 0;
}
