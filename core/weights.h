/*
 * weights.h — reading srkit HDF5 model files (DESIGN §5). Only core/weights.c includes
 * <hdf5.h>; everything else sees this opaque handle.
 *
 * File layout:
 *   /                 attrs: format="srkit-model", format_version=1, arch, config (JSON text),
 *                     source, license
 *   /weights/a/b/c    one dataset per tensor; "a.b.c" is the reference state-dict key.
 *                     f32 | f16 | bf16 (stored as u16 with attr dtype="bf16") | i8 with a
 *                     sibling dataset "<name>_scale" (f32, one per output row = shape[0])
 *   /tokenizer        attr type ("bytebpe" | "sentencepiece" | "tekken" | "pieces");
 *                     pieces_data u8 [total bytes], pieces_offsets i64 [V + 1],
 *                     optional special u8 [V] (1 = never printed), optional scores f32 [V]
 *   /frontend         e.g. mel_filters f32 [n_mels, n_fft/2 + 1], window f32 [win_length]
 */
#ifndef SR_WEIGHTS_H
#define SR_WEIGHTS_H

#include "sr.h"

#define SR_MAX_DIMS 6

typedef struct sr_tensor {
    char *name;                   /* state-dict key with dots ("encoder.conv1.weight") */
    sr_dtype dtype;               /* dtype in memory */
    int ndim;
    int64_t shape[SR_MAX_DIMS];
    void *data;                   /* owned by whoever holds the tensor; sr_tensor_free */
    float *scale;                 /* i8 only: [shape[0]] per-row scale, else NULL */
    size_t nbytes;                /* bytes of data (+ scale) */
} sr_tensor;

void sr_tensor_free(sr_tensor *t); /* frees name, data, scale; zeroes; NULL is a no-op */
int64_t sr_tensor_numel(const sr_tensor *t);

typedef struct sr_h5 sr_h5; /* an open srkit model file */

/* The whole-file digest in the 512-byte HDF5 user block (core/digest.c, docs/model-format.md):
 * checks the file's size and XXH3-128 against its header before libhdf5 parses anything.
 * SR_OK with *has_digest = 1 when they match; SR_OK with *has_digest = 0 when the file has no
 * digest (no user block, a zeroed one, or not HDF5 at all); SR_ERR_FORMAT "<path>: corrupt: ..."
 * for a size or hash mismatch or a damaged header; SR_ERR_IO when it cannot be read.
 * Thread-safe (no shared state). */
sr_status sr_h5_check_digest(const char *path, int *has_digest);
/* The digest a file's srkit header records (32 lower-case hex digits into hex), without
 * checking it against the content (sr_h5_check_digest does, at load): a cheap fingerprint of the
 * file's bytes, e.g. to tell two files at the same path apart. Returns 1 when the file has a
 * valid header, else 0 with hex = "" (no header, unreadable: the loader reports those). */
int sr_h5_recorded_digest(const char *path, char hex[33]);
/* Write the digest header into a file that has a 512-byte user block (zeroed or an old digest),
 * e.g. after editing it in place. SR_ERR_FORMAT when it has no such block. */
sr_status sr_h5_seal(const char *path);

/* Open and validate the root: format == "srkit-model", format_version == 1, arch and config
 * present, config parses as a JSON object; first the digest (sr_h5_check_digest): a mismatch
 * fails, a file without one opens with sr_h5_warning set. Corrupt or truncated files: SR_ERR_FORMAT naming
 * the path; missing file: SR_ERR_IO. Thread-safe (HDF5 calls are serialized internally). */
sr_status sr_h5_open(const char *path, sr_h5 **out);
/* After sr_h5_open: a warning about the file, or NULL ("no digest: integrity not verified"). */
const char *sr_h5_warning(const sr_h5 *f);
/* Open any HDF5 file for reading datasets (golden fixtures), without the model-root checks;
 * sr_h5_arch/config return NULL for it. */
sr_status sr_h5_open_plain(const char *path, sr_h5 **out);
void sr_h5_close(sr_h5 *f); /* NULL is a no-op */

const char *sr_h5_path(const sr_h5 *f);
const char *sr_h5_arch(const sr_h5 *f);
const char *sr_h5_config(const sr_h5 *f); /* the config JSON text */
/* Any string root attribute ("source", "license"); NULL if absent. */
const char *sr_h5_root_attr(const sr_h5 *f, const char *name);

/* 1 if /weights holds the tensor (dotted name). */
int sr_h5_has_tensor(sr_h5 *f, const char *name);

/* `want` that keeps a tensor's stored element type (f32, f16, bf16 or i8 with its scale). */
#define SR_AS_STORED ((sr_dtype)-1)

/* Load /weights/<name> converted to `want`:
 *   want SR_F32: any stored dtype converted (i8 dequantized with its scale);
 *   want SR_F16 / SR_BF16: stored f16/bf16 kept as is, f32 rounded to nearest-even;
 *   want SR_I8: stored i8 kept with its scale (out->scale);
 *   want SR_AS_STORED: the stored type kept, whatever it is (out->dtype says which).
 * The stored shape must equal shape[0..ndim) exactly; otherwise SR_ERR_FORMAT with a message
 * naming the file, tensor, stored shape and expected shape. Missing tensor: SR_ERR_FORMAT
 * naming it. Any NaN/Inf value: SR_ERR_FORMAT naming the tensor and the first bad index.
 * Marks the tensor as used (see sr_h5_unused). out is filled; caller owns it. */
sr_status sr_h5_tensor(sr_h5 *f, const char *name, sr_dtype want, int ndim, const int64_t *shape,
                       sr_tensor *out);

/* Read any dataset by absolute path ("/tokenizer/pieces_data", "/frontend/mel_filters") with
 * its stored shape, converted to want (SR_F32, SR_I64, SR_I32 or, for u8/i8 data, SR_I8 as raw
 * bytes). Same NaN/Inf check for floats. Missing: SR_ERR_FORMAT naming the path. */
sr_status sr_h5_dataset(sr_h5 *f, const char *path, sr_dtype want, sr_tensor *out);
/* *exists = 1 when a dataset is at path, 0 when nothing is; a path that cannot be looked up (a
 * corrupt group on the way) is SR_ERR_FORMAT naming it, never "absent". */
sr_status sr_h5_has_dataset(sr_h5 *f, const char *path, int *exists);
/* String attribute of a group or dataset ("/tokenizer", "type"); NULL if absent. The returned
 * string is owned by f. */
const char *sr_h5_attr(sr_h5 *f, const char *path, const char *attr);

/* Names of /weights tensors never loaded with sr_h5_tensor, for "unused tensor" warnings.
 * *names is malloc'ed (free each and the array). */
sr_status sr_h5_unused(sr_h5 *f, char ***names, size_t *n);

#endif /* SR_WEIGHTS_H */
