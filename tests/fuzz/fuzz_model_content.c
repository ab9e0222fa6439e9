/*
 * fuzz_model_content.c — what srkit reads out of a well-formed model file: the root attributes
 * (arch, config JSON), the backend's config parsing and shape checks, the tokenizer group
 * (type, pieces_data, pieces_offsets, special). The `model` target cannot get there: its
 * mutated files fail the digest, and libhdf5 must not parse damaged files. Here the harness
 * writes a valid HDF5 file itself with libhdf5's writer API from the fuzz input, seals it
 * (sr_h5_seal: a crafted file carries a valid digest as easily as an honest one), and loads it
 * (sr_model_load, sr_model_detokenize over the whole vocabulary, sr_model_inspect). libhdf5
 * only ever reads what it wrote, so every finding is srkit's.
 *
 * Input: up to six parts separated by NUL bytes; a missing part leaves that item out of the
 * file:
 *   0  arch                     root attribute "arch" (fixed-length string, NULs kept)
 *   1  config                   root attribute "config" (the JSON text)
 *   2  tokenizer type           attribute "type" of /tokenizer; no part: no /tokenizer group
 *   3  pieces_data              /tokenizer/pieces_data, u8 bytes (NUL-free, so pieces hold none)
 *   4  pieces_offsets           /tokenizer/pieces_offsets, i64, written as decimal numbers
 *                               separated by white space (at most 4096)
 *   5  special                  /tokenizer/special, u8, one per byte ('0' -> 0, other -> 1)
 * Every file also holds format = "srkit-model", format_version = 1 and the test_linear weights
 * proj.weight [6, 8] and proj.bias [6], so a test_linear config with vocab 6 and n_bands 8 loads.
 */
#include "fuzz_srkit.h"

#include <hdf5.h>
#include <unistr.h>

#include "../../core/weights.h"

#define N_PARTS 6
#define MAX_OFFSETS 4096

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_dir();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

/* Fixed-length string attribute of len bytes (NUL padded, embedded NULs kept). */
static void str_attr(hid_t loc, const char *name, const char *s, size_t len)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, len ? len : 1);
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    char *buf = calloc(len ? len : 1, 1);
    if (!buf) abort();
    if (len) memcpy(buf, s, len);
    FUZZ_CHECK(a >= 0 && H5Awrite(a, t, buf) >= 0);
    free(buf);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

static void dataset(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, int ndim,
                    const hsize_t *dims, const void *data)
{
    hid_t sp = H5Screate_simple(ndim, dims, NULL);
    hid_t d = H5Dcreate2(loc, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    FUZZ_CHECK(d >= 0);
    hsize_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    if (n) FUZZ_CHECK(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
}

static void write_model(const char *path, const uint8_t *part[N_PARTS], const size_t len[N_PARTS],
                        int n_parts)
{
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_userblock(fcpl, 512);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    FUZZ_CHECK(f >= 0);
    H5Pclose(fcpl);
    str_attr(f, "format", "srkit-model", 11);
    {
        long long one = 1;
        hid_t sp = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(f, "format_version", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_LLONG, &one);
        H5Aclose(a);
        H5Sclose(sp);
    }
    if (n_parts > 0) str_attr(f, "arch", (const char *)part[0], len[0]);
    if (n_parts > 1) str_attr(f, "config", (const char *)part[1], len[1]);

    hid_t g = H5Gcreate2(f, "/weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t p = H5Gcreate2(g, "proj", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    float w[6 * 8], b[6];
    for (int i = 0; i < 48; i++) w[i] = (float)(i % 7) * 0.125f - 0.25f;
    for (int i = 0; i < 6; i++) b[i] = (float)i * 0.5f;
    dataset(p, "weight", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, (hsize_t[]){6, 8}, w);
    dataset(p, "bias", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, (hsize_t[]){6}, b);
    H5Gclose(p);
    H5Gclose(g);

    if (n_parts > 2) {
        hid_t t = H5Gcreate2(f, "/tokenizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        str_attr(t, "type", (const char *)part[2], len[2]);
        if (n_parts > 3)
            dataset(t, "pieces_data", H5T_STD_U8LE, H5T_NATIVE_UCHAR, 1, (hsize_t[]){len[3]},
                    part[3]);
        if (n_parts > 4) {
            static long long off[MAX_OFFSETS];
            size_t n = 0;
            char *s = fuzz_cstr(part[4], len[4]);
            for (char *q = s, *e; n < MAX_OFFSETS; q = e) {
                long long v = strtoll(q, &e, 10);
                if (e == q) break;
                off[n++] = v;
            }
            free(s);
            dataset(t, "pieces_offsets", H5T_STD_I64LE, H5T_NATIVE_LLONG, 1, (hsize_t[]){n}, off);
        }
        if (n_parts > 5) {
            uint8_t *sp = malloc(len[5] ? len[5] : 1);
            if (!sp) abort();
            for (size_t i = 0; i < len[5]; i++) sp[i] = part[5][i] != '0';
            dataset(t, "special", H5T_STD_U8LE, H5T_NATIVE_UCHAR, 1, (hsize_t[]){len[5]}, sp);
            free(sp);
        }
        H5Gclose(t);
    }
    FUZZ_CHECK(H5Fclose(f) >= 0);
}

/* Each id alone up to the first one out of range (at most 512), then all together (must give
 * text), then a negative id (must not crash). Every text is well-formed UTF-8, whatever bytes
 * the pieces hold (sr_model_detokenize's contract: ill-formed bytes print as U+FFFD). */
static void detokenize_all(sr_model *m)
{
    int32_t ids[512];
    int n = 0;
    while (n < 512) {
        ids[n] = n;
        char *one = NULL;
        sr_status st = sr_model_detokenize(m, &ids[n], 1, &one);
        if (st == SR_OK) FUZZ_CHECK(one && !u8_check((const uint8_t *)one, strlen(one)));
        free(one);
        if (st != SR_OK) break;
        n++;
    }
    char *all = NULL;
    FUZZ_CHECK(sr_model_detokenize(m, ids, n, &all) == SR_OK && all);
    FUZZ_CHECK(!u8_check((const uint8_t *)all, strlen(all)));
    free(all);
    char *text = NULL;
    int32_t bad = -1;
    (void)sr_model_detokenize(m, &bad, 1, &text);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *part[N_PARTS];
    size_t len[N_PARTS];
    int n_parts = 0;
    size_t off = 0;
    while (n_parts < N_PARTS && off <= size) {
        const uint8_t *nul = off < size ? memchr(data + off, 0, size - off) : NULL;
        size_t n = nul ? (size_t)(nul - (data + off)) : size - off;
        part[n_parts] = data + off;
        len[n_parts++] = n;
        if (!nul) break;
        off += n + 1;
    }
    char path[512];
    fuzz_path(path, sizeof path, "model.h5");
    write_model(path, part, len, n_parts);
    FUZZ_CHECK(sr_h5_seal(path) == SR_OK);
    int has_digest = 0;
    FUZZ_CHECK(sr_h5_check_digest(path, &has_digest) == SR_OK && has_digest == 1);

    fuzz_load_model(path, detokenize_all);
    return 0;
}
