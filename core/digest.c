/*
 * digest.c — the whole-file digest of srkit model files (docs/model-format.md, "Digest").
 *
 * libhdf5 trusts the bytes it parses: a damaged file can crash or hang it (seen with 1.10.8:
 * segfaults in global-heap reads, a SIGFPE in chunk indexing, an endless loop, gigabytes
 * allocated for an 82 KB file). So srkit's writer (scripts/srkit_h5.py) reserves HDF5's
 * 512-byte user block, which libhdf5 skips, and records there, as NUL-padded ASCII,
 *
 *     srkit-digest 1\n
 *     algorithm xxh3-128\n
 *     length <file size in bytes, decimal>\n
 *     digest <XXH3-128 of bytes [512, length), 32 lower-case hex digits, canonical order>\n
 *
 * and the loader checks the size and the hash before libhdf5 sees the file. XXH3 (libxxhash)
 * runs at memory speed, so the check costs one pass over page-cache pages: about 5 GB/s here,
 * under 10 % of a full-size model's load (docs/model-format.md has the figures). The digest is
 * the one plain XXH3-128 of the rest of the file, so `tail -c +513 F | xxh128sum` checks it too.
 *
 * A file whose first bytes are the HDF5 signature has no user block (another writer, or srkit
 * before the digest): it loads with a warning. A 512-byte block of zeros is a file written
 * where the writer had no xxhash module ("unsealed"): the same warning. Any other block in
 * front of an HDF5 signature at 512 is a damaged header: an error, so that a flipped bit in the
 * header cannot switch the check off.
 */
#include "weights.h"

#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#define BLOCK 512
#define MAP_CHUNK ((size_t)64 << 20) /* mapped window: bounded address space, any file size */

static const unsigned char hdf5_sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

/* The digest as 32 lower-case hex digits, canonical order. */
static void digest_hex(const XXH128_canonical_t *d, char hex[33])
{
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", d->digest[i]);
}

/* The header text for a length and digest; the writer and sr_h5_seal produce exactly this. */
static int header_text(char *buf, size_t size, uint64_t length, const XXH128_canonical_t *d)
{
    char hex[33];
    digest_hex(d, hex);
    return snprintf(buf, size, "srkit-digest 1\nalgorithm xxh3-128\nlength %" PRIu64 "\ndigest %s\n",
                    length, hex);
}

/* XXH3-128 of fd's bytes [from, to), through mapped windows (pread where mmap fails). */
static sr_status hash_range(int fd, const char *path, uint64_t from, uint64_t to,
                            XXH128_canonical_t *out)
{
    XXH3_state_t *s = XXH3_createState();
    if (!s || XXH3_128bits_reset(s) != XXH_OK) {
        XXH3_freeState(s);
        return sr_error(SR_ERR_NOMEM, "%s: digest state", path);
    }
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    unsigned char *buf = NULL;
    sr_status st = SR_OK;
    for (uint64_t pos = from; pos < to && !st;) {
        uint64_t base = pos - pos % (uint64_t)page; /* mmap offsets are page-aligned */
        size_t span = (size_t)((to - base) < MAP_CHUNK ? (to - base) : MAP_CHUNK);
        void *map = mmap(NULL, span, PROT_READ, MAP_SHARED, fd, (off_t)base);
        if (map != MAP_FAILED) {
            posix_madvise(map, span, POSIX_MADV_SEQUENTIAL);
            XXH3_128bits_update(s, (unsigned char *)map + (pos - base), span - (size_t)(pos - base));
            munmap(map, span);
            pos = base + span;
            continue;
        }
        if (!buf && !(buf = sr_malloc(1 << 20, "digest buffer"))) {
            st = SR_ERR_NOMEM;
            break;
        }
        size_t want = (size_t)((to - pos) < (1u << 20) ? (to - pos) : (1u << 20));
        ssize_t r = pread(fd, buf, want, (off_t)pos);
        if (r <= 0) {
            st = sr_error(SR_ERR_IO, "%s: cannot read it: %s", path, r < 0 ? strerror(errno) : "short file");
            break;
        }
        XXH3_128bits_update(s, buf, (size_t)r);
        pos += (uint64_t)r;
    }
    if (!st) XXH128_canonicalFromHash(out, XXH3_128bits_digest(s));
    XXH3_freeState(s);
    free(buf);
    return st;
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* Parse the header block: 0 ok (length and digest filled), -1 not a valid header. Strict: the
 * block must be exactly what header_text writes for the values it holds, NUL-padded. */
static int parse_header(const unsigned char *blk, uint64_t *length, XXH128_canonical_t *d)
{
    char text[BLOCK + 1];
    memcpy(text, blk, BLOCK);
    text[BLOCK] = '\0';
    const char *p = strstr(text, "\nlength ");
    const char *q = strstr(text, "\ndigest ");
    if (!p || !q) return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long len = strtoull(p + 8, &end, 10);
    if (errno || end == p + 8 || *end != '\n') return -1;
    for (int i = 0; i < 16; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = q[8 + 2 * i + k];
            int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (x < 0) return -1;
            v = v * 16 + (unsigned)x;
        }
        d->digest[i] = (unsigned char)v;
    }
    *length = len;
    char want[BLOCK];
    int n = header_text(want, sizeof want, len, d);
    if (n <= 0 || n >= BLOCK || memcmp(want, blk, (size_t)n) || !all_zero(blk + n, BLOCK - (size_t)n))
        return -1;
    return 0;
}

/* The file's first BLOCK + 8 bytes (fewer for short files) and its size. */
static sr_status read_head(int fd, const char *path, unsigned char *head, size_t *got, uint64_t *size)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0) return sr_error(SR_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    *size = (uint64_t)sb.st_size;
    size_t n = 0;
    while (n < BLOCK + 8) {
        ssize_t r = pread(fd, head + n, BLOCK + 8 - n, (off_t)n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return sr_error(SR_ERR_IO, "%s: cannot read it: %s", path, strerror(errno));
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    *got = n;
    return SR_OK;
}

sr_status sr_h5_check_digest(const char *path, int *has_digest)
{
    if (has_digest) *has_digest = 0;
    if (!path || !has_digest) return sr_error(SR_ERR_ARG, "sr_h5_check_digest: NULL argument");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sr_error(SR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char head[BLOCK + 8];
    size_t got = 0;
    uint64_t size = 0;
    sr_status st = read_head(fd, path, head, &got, &size);
    if (st) goto done;
    static const char magic[] = "srkit-digest ";
    int ours = got >= sizeof magic - 1 && !memcmp(head, magic, sizeof magic - 1);
    /* a block in front of HDF5 data that is neither ours nor zeros: a damaged header */
    int other = got == BLOCK + 8 && !memcmp(head + BLOCK, hdf5_sig, 8) && !all_zero(head, BLOCK);
    /* else no user block, an unsealed (zeroed) one, or not HDF5 at all (libhdf5 then says so) */
    if (!ours && !other) goto done;
    uint64_t length = 0;
    XXH128_canonical_t want, have;
    if (got < BLOCK || parse_header(head, &length, &want)) {
        st = sr_error(SR_ERR_FORMAT, "%s: corrupt: its 512-byte header is not a valid srkit digest "
                      "(damaged, or a user block written by another tool)", path);
        goto done;
    }
    if (length != size) {
        st = sr_error(SR_ERR_FORMAT, "%s: corrupt: %" PRIu64 " bytes, its digest header says %" PRIu64
                      " (%s)", path, size, length, size < length ? "truncated" : "bytes appended");
        goto done;
    }
    if ((st = hash_range(fd, path, BLOCK, size, &have))) goto done;
    if (memcmp(want.digest, have.digest, 16)) {
        st = sr_error(SR_ERR_FORMAT, "%s: corrupt: the content's xxh3-128 digest does not match its "
                      "header (damaged bytes)", path);
        goto done;
    }
    *has_digest = 1;
done:
    close(fd);
    return st;
}

int sr_h5_recorded_digest(const char *path, char hex[33])
{
    hex[0] = '\0';
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0) return 0;
    unsigned char head[BLOCK + 8];
    size_t got = 0;
    uint64_t size = 0, length = 0;
    XXH128_canonical_t d;
    sr_status st = read_head(fd, path, head, &got, &size);
    close(fd);
    if (st) sr_error_clear(); /* a read failure is the loader's to report */
    if (st || got < BLOCK || parse_header(head, &length, &d)) return 0;
    digest_hex(&d, hex);
    return 1;
}

sr_status sr_h5_seal(const char *path)
{
    if (!path) return sr_error(SR_ERR_ARG, "sr_h5_seal: path is NULL");
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return sr_error(SR_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
    unsigned char head[BLOCK + 8];
    size_t got = 0;
    uint64_t size = 0, length = 0;
    XXH128_canonical_t d;
    sr_status st = read_head(fd, path, head, &got, &size);
    if (st) goto done;
    if (got < BLOCK + 8 || memcmp(head + BLOCK, hdf5_sig, 8) ||
        (!all_zero(head, BLOCK) && parse_header(head, &length, &d))) {
        st = sr_error(SR_ERR_FORMAT, "%s: has no 512-byte srkit user block to seal (write it with "
                      "scripts/srkit_h5.py, which reserves one)", path);
        goto done;
    }
    if ((st = hash_range(fd, path, BLOCK, size, &d))) goto done;
    unsigned char blk[BLOCK] = {0};
    int n = header_text((char *)blk, sizeof blk, size, &d);
    if (n <= 0 || n >= BLOCK) {
        st = sr_error(SR_ERR_FORMAT, "%s: digest header does not fit", path);
        goto done;
    }
    if (pwrite(fd, blk, BLOCK, 0) != BLOCK)
        st = sr_error(SR_ERR_IO, "%s: cannot write its digest header: %s", path, strerror(errno));
done:
    close(fd);
    return st;
}
