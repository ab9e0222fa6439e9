/*
 * fuzz_common.h — shared plumbing of the libFuzzer harnesses (tests/fuzz/fuzz_*.c).
 *
 * srkit's readers take paths, so each harness writes its input into a private temporary folder
 * created once per process and removed at exit (under $SRKIT_FUZZ_TMP when set, else /dev/shm
 * when it exists, else $TMPDIR or /tmp); nothing is written anywhere else. A process killed by
 * a finding leaves its folder behind: tests/fuzz/run.sh points SRKIT_FUZZ_TMP at a folder of
 * its own and removes that at the end. Harnesses never print: a finding is a sanitizer
 * report, a leak, a timeout or an abort() from an invariant check (FUZZ_CHECK).
 */
#ifndef SR_FUZZ_COMMON_H
#define SR_FUZZ_COMMON_H

#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv); /* optional: the temporary folder is made on first use */

/* An invariant the library promises; a violation aborts, which libFuzzer reports as a crash. */
#define FUZZ_CHECK(c)                                                                          \
    do {                                                                                       \
        if (!(c)) {                                                                            \
            fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #c);         \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static char fuzz_dir_[256];

/* The folder holds plain files only (the harnesses write no subfolders). */
static inline void fuzz_cleanup_(void)
{
    if (!fuzz_dir_[0]) return;
    DIR *d = opendir(fuzz_dir_);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", fuzz_dir_, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(fuzz_dir_);
}

/* The per-process temporary folder (created on first use). */
static inline const char *fuzz_dir(void)
{
    if (fuzz_dir_[0]) return fuzz_dir_;
    struct stat sb;
    const char *base = getenv("SRKIT_FUZZ_TMP"); /* tests/fuzz/run.sh sets it */
    if (!base || !*base) {
        base = "/dev/shm";
        if (stat(base, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(base, W_OK) != 0) {
            base = getenv("TMPDIR");
            if (!base || !*base) base = "/tmp";
        }
    }
    snprintf(fuzz_dir_, sizeof fuzz_dir_, "%s/srkit-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_dir_)) {
        perror("srkit fuzz: mkdtemp");
        abort();
    }
    atexit(fuzz_cleanup_);
    return fuzz_dir_;
}

/* Path of name inside the temporary folder, written into buf. */
static inline char *fuzz_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", fuzz_dir(), name);
    return buf;
}

/* Write size bytes to the temporary folder's file name; returns its path in buf. */
static inline char *fuzz_write(char *buf, size_t cap, const char *name, const void *data, size_t size)
{
    fuzz_path(buf, cap, name);
    int fd = open(buf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror("srkit fuzz: open");
        abort();
    }
    const char *p = data;
    while (size) {
        ssize_t w = write(fd, p, size);
        if (w <= 0) {
            perror("srkit fuzz: write");
            abort();
        }
        p += w;
        size -= (size_t)w;
    }
    close(fd);
    return buf;
}

/* A NUL-terminated copy of the input (malloc'ed; embedded NULs end the string early). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif /* SR_FUZZ_COMMON_H */
