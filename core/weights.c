/*
 * weights.c — the srkit HDF5 model file reader (layout in weights.h, DESIGN §5) and
 * sr_model_inspect. The only file of the project that includes <hdf5.h>.
 *
 * The serial HDF5 library is not thread-safe, so every HDF5 call here runs under one static
 * mutex (public functions take it at entry; static helpers assume it is held). HDF5's own error
 * printing is switched off (library code never prints); every failure becomes an sr_status
 * whose message names the file and the tensor, dataset or attribute at fault.
 *
 * Robustness: a file is never trusted. Paths are walked one link at a time (only hard links are
 * followed, so a file cannot redirect reads into another file), dataspaces are bounded
 * (SR_MAX_DIMS, element counts checked for overflow), stored types are classified from their
 * bit layout before any read, and every HDF5 failure on a truncated or corrupt file is reported
 * as SR_ERR_FORMAT.
 */
#include "weights.h"

#include "dtype.h"
#include "internal.h"

#include <cJSON.h>
#include <hdf5.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- locking ------------------------------------------------------------------------------ */

static pthread_mutex_t h5_mutex = PTHREAD_MUTEX_INITIALIZER;
/* H5Eset_auto2 is per thread in thread-safe HDF5 builds and global otherwise: silencing once
 * per thread is right for both. */
static _Thread_local int h5_quiet;

static void h5_lock(void)
{
    pthread_mutex_lock(&h5_mutex);
    if (!h5_quiet) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        h5_quiet = 1;
    }
}

static void h5_unlock(void) { pthread_mutex_unlock(&h5_mutex); }

/* ---- the handle ----------------------------------------------------------------------------- */

typedef struct {
    char *name;
    char *value; /* NULL when the attribute is not a scalar string */
    int nul;     /* 1: a fixed-length string with a NUL byte inside its text ("whisper\0junk") */
} root_attr;

struct sr_h5 {
    hid_t file;
    char *path;
    int plain;          /* opened with sr_h5_open_plain: no model-root checks */
    const char *arch;   /* points into root[] (model files only) */
    const char *config;
    root_attr *root;    /* root attributes, in name order */
    size_t n_root;
    char **strs;        /* strings handed out by sr_h5_attr, freed at close */
    size_t n_strs, cap_strs;
    char **used;        /* tensor names loaded with sr_h5_tensor */
    size_t n_used, cap_used;
    const char *warning; /* static text or NULL */
};

void sr_tensor_free(sr_tensor *t)
{
    if (!t) return;
    free(t->name);
    free(t->data);
    free(t->scale);
    memset(t, 0, sizeof *t);
}

int64_t sr_tensor_numel(const sr_tensor *t)
{
    if (!t) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static sr_status push_str(char ***arr, size_t *n, size_t *cap, char *s)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        char **p = realloc(*arr, c * sizeof *p);
        if (!p) return sr_error(SR_ERR_NOMEM, "out of memory growing a name list");
        *arr = p;
        *cap = c;
    }
    (*arr)[(*n)++] = s;
    return SR_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "[6, 8]" */
static void fmt_shape(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < size) snprintf(buf + k, size - k, "]");
}

/* ---- paths and objects ---------------------------------------------------------------------- */

/* "a.b.c" -> "/weights/a/b/c" (malloc'ed); NULL with SR_ERR_ARG recorded for malformed names. */
static char *tensor_path(const char *name, const char *suffix)
{
    size_t n = strlen(name);
    if (!n || name[0] == '.' || name[n - 1] == '.' || strstr(name, "..") || strchr(name, '/')) {
        sr_error(SR_ERR_ARG, "tensor name \"%s\" is not a dotted state-dict key", name);
        return NULL;
    }
    size_t ns = suffix ? strlen(suffix) : 0;
    char *p = sr_malloc(9 + n + ns + 1, "tensor path");
    if (!p) return NULL;
    memcpy(p, "/weights/", 9);
    for (size_t i = 0; i < n; i++) p[9 + i] = name[i] == '.' ? '/' : name[i];
    if (ns) memcpy(p + 9 + n, suffix, ns);
    p[9 + n + ns] = '\0';
    return p;
}

/* Whether the absolute path names an object of type want (H5I_DATASET, H5I_GROUP, or
 * H5I_BADID for either), reached through hard links only: 1 yes, 0 no, -1 the file could not
 * be read there (corrupt). */
static int obj_exists(hid_t file, const char *path, H5I_type_t want)
{
    if (path[0] != '/') return 0;
    if (!path[1]) return want == H5I_BADID || want == H5I_GROUP;
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!p) return -1;
    memcpy(p, path, n + 1);
    int res = 1;
    for (size_t i = 1; i <= n && res == 1; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        if (i > 0 && p[i - 1] == '/') { res = 0; break; } /* empty component */
        char c = p[i];
        p[i] = '\0';
        htri_t e = H5Lexists(file, p, H5P_DEFAULT);
        if (e < 0) res = -1;
        else if (e == 0) res = 0;
        else {
            H5L_info_t li;
            if (H5Lget_info(file, p, &li, H5P_DEFAULT) < 0) res = -1;
            else if (li.type != H5L_TYPE_HARD) res = 0;
            else if (c == '/') { /* a path goes on only through groups: past a dataset it is absent */
                hid_t o = H5Oopen(file, p, H5P_DEFAULT);
                if (o < 0) res = -1;
                else {
                    if (H5Iget_type(o) != H5I_GROUP) res = 0;
                    H5Oclose(o);
                }
            }
        }
        p[i] = c;
    }
    if (res == 1) {
        hid_t o = H5Oopen(file, p, H5P_DEFAULT);
        if (o < 0) res = -1;
        else {
            H5I_type_t t = H5Iget_type(o);
            if (want == H5I_BADID) res = (t == H5I_DATASET || t == H5I_GROUP);
            else res = (t == want);
            H5Oclose(o);
        }
    }
    free(p);
    return res;
}

/* ---- attributes ----------------------------------------------------------------------------- */

/* Read a string attribute holding one value (fixed or variable length). 0 ok (*out malloc'ed),
 * 1 not a one-element string, 2 a fixed-length string with a NUL byte inside its text (C would
 * read only the part before it: "whisper\0junk" must not pass for "whisper"), -1 unreadable or
 * out of memory. */
static int read_str_attr(hid_t attr, char **out)
{
    *out = NULL;
    int res = -1;
    hid_t type = H5Aget_type(attr), space = -1, mem = -1;
    if (type < 0) goto done;
    if (H5Tget_class(type) != H5T_STRING) { res = 1; goto done; }
    if ((space = H5Aget_space(attr)) < 0) goto done;
    if (H5Sget_simple_extent_npoints(space) != 1) { res = 1; goto done; }
    htri_t var = H5Tis_variable_str(type);
    if (var < 0 || (mem = H5Tcopy(H5T_C_S1)) < 0) goto done;
    if (var) {
        char *s = NULL;
        if (H5Tset_size(mem, H5T_VARIABLE) < 0 || H5Tset_cset(mem, H5Tget_cset(type)) < 0 ||
            H5Aread(attr, mem, &s) < 0)
            goto done;
        *out = strdup(s ? s : "");
        H5free_memory(s);
    } else {
        size_t size = H5Tget_size(type);
        if (!size || size > ((size_t)1 << 30)) goto done;
        char *buf = calloc(size + 1, 1);
        if (!buf) goto done;
        if (H5Tset_size(mem, size) < 0 || H5Tset_strpad(mem, H5Tget_strpad(type)) < 0 ||
            H5Tset_cset(mem, H5Tget_cset(type)) < 0 || H5Aread(attr, mem, buf) < 0) {
            free(buf);
            goto done;
        }
        for (size_t i = strnlen(buf, size); i < size; i++)
            if (buf[i]) { /* text after a NUL: only NUL padding may follow the text */
                free(buf);
                res = 2;
                goto done;
            }
        *out = buf;
    }
    res = *out ? 0 : -1;
done:
    if (mem >= 0) H5Tclose(mem);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    return res;
}

typedef struct {
    sr_h5 *f;
    size_t cap;
    int failed;
} root_iter;

static herr_t root_attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *ud)
{
    (void)info;
    root_iter *it = ud;
    sr_h5 *f = it->f;
    if (f->n_root == it->cap) {
        size_t c = it->cap ? 2 * it->cap : 8;
        root_attr *p = realloc(f->root, c * sizeof *p);
        if (!p) { it->failed = SR_ERR_NOMEM; return -1; }
        f->root = p;
        it->cap = c;
    }
    root_attr *ra = &f->root[f->n_root];
    ra->value = NULL;
    ra->nul = 0;
    if (!(ra->name = strdup(name))) { it->failed = SR_ERR_NOMEM; return -1; }
    f->n_root++;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) { it->failed = SR_ERR_FORMAT; return -1; }
    int r = read_str_attr(a, &ra->value);
    H5Aclose(a);
    if (r < 0) { it->failed = SR_ERR_FORMAT; return -1; }
    ra->nul = r == 2;
    return 0;
}

static const root_attr *find_root(const sr_h5 *f, const char *name)
{
    for (size_t i = 0; i < f->n_root; i++)
        if (!strcmp(f->root[i].name, name)) return &f->root[i];
    return NULL;
}

static sr_status read_root_attrs(sr_h5 *f)
{
    root_iter it = {f, 0, 0};
    hsize_t idx = 0;
    if (H5Aiterate2(f->file, H5_INDEX_NAME, H5_ITER_INC, &idx, root_attr_cb, &it) < 0) {
        if (it.failed == SR_ERR_NOMEM)
            return sr_error(SR_ERR_NOMEM, "%s: out of memory reading the root attributes", f->path);
        return sr_error(SR_ERR_FORMAT, "%s: cannot read the root attributes (file corrupt?)",
                        f->path);
    }
    return SR_OK;
}

/* A required string root attribute. */
static sr_status root_string(sr_h5 *f, const char *name, const char **out)
{
    const root_attr *a = find_root(f, name);
    if (!a) return sr_error(SR_ERR_FORMAT, "%s: root attribute %s is missing", f->path, name);
    if (a->nul)
        return sr_error(SR_ERR_FORMAT, "%s: root attribute %s has a NUL byte inside its text", f->path, name);
    if (!a->value)
        return sr_error(SR_ERR_FORMAT, "%s: root attribute %s is not a string", f->path, name);
    *out = a->value;
    return SR_OK;
}

static sr_status check_format_version(sr_h5 *f)
{
    const char *an = "format_version";
    htri_t e = H5Aexists(f->file, an);
    if (e < 0) return sr_error(SR_ERR_FORMAT, "%s: cannot read root attribute %s", f->path, an);
    if (!e) return sr_error(SR_ERR_FORMAT, "%s: root attribute %s is missing", f->path, an);
    sr_status st = SR_OK;
    long long v = 0;
    hid_t a = H5Aopen(f->file, an, H5P_DEFAULT), type = -1, space = -1;
    if (a < 0 || (type = H5Aget_type(a)) < 0 || (space = H5Aget_space(a)) < 0) {
        st = sr_error(SR_ERR_FORMAT, "%s: cannot read root attribute %s", f->path, an);
    } else if (H5Tget_class(type) != H5T_INTEGER || H5Sget_simple_extent_npoints(space) != 1) {
        st = sr_error(SR_ERR_FORMAT, "%s: root attribute %s is not an integer", f->path, an);
    } else if (H5Aread(a, H5T_NATIVE_LLONG, &v) < 0) {
        st = sr_error(SR_ERR_FORMAT, "%s: cannot read root attribute %s", f->path, an);
    } else if (v != 1) {
        st = sr_error(SR_ERR_FORMAT, "%s: root attribute %s is %lld; this srkit reads version 1",
                      f->path, an, v);
    }
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (a >= 0) H5Aclose(a);
    return st;
}

static sr_status validate_root(sr_h5 *f)
{
    const char *fmt;
    sr_status st = root_string(f, "format", &fmt);
    if (st) {
        if (!find_root(f, "format"))
            return sr_error(SR_ERR_FORMAT,
                            "%s: root attribute format is missing: not an srkit model file",
                            f->path);
        return st;
    }
    if (strcmp(fmt, "srkit-model"))
        return sr_error(SR_ERR_FORMAT,
                        "%s: root attribute format is \"%.60s\", expected \"srkit-model\"",
                        f->path, fmt);
    if ((st = check_format_version(f))) return st;
    if ((st = root_string(f, "arch", &f->arch))) return st;
    if (!f->arch[0]) return sr_error(SR_ERR_FORMAT, "%s: root attribute arch is empty", f->path);
    if ((st = root_string(f, "config", &f->config))) return st;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(f->config, &end, 1);
    if (!j) {
        size_t off = end && end >= f->config ? (size_t)(end - f->config) : 0;
        return sr_error(SR_ERR_FORMAT,
                        "%s: root attribute config is not valid JSON (error at byte %zu)",
                        f->path, off);
    }
    int is_obj = cJSON_IsObject(j);
    cJSON_Delete(j);
    if (!is_obj)
        return sr_error(SR_ERR_FORMAT, "%s: root attribute config is JSON but not an object",
                        f->path);
    return SR_OK;
}

/* ---- open / close --------------------------------------------------------------------------- */

static void h5_free(sr_h5 *f)
{
    if (!f) return;
    if (f->file >= 0) H5Fclose(f->file);
    for (size_t i = 0; i < f->n_root; i++) {
        free(f->root[i].name);
        free(f->root[i].value);
    }
    free(f->root);
    for (size_t i = 0; i < f->n_strs; i++) free(f->strs[i]);
    free(f->strs);
    for (size_t i = 0; i < f->n_used; i++) free(f->used[i]);
    free(f->used);
    free(f->path);
    free(f);
}

static sr_status open_common(const char *path, int plain, sr_h5 **out)
{
    const char *fn = plain ? "sr_h5_open_plain" : "sr_h5_open";
    if (!out) return sr_error(SR_ERR_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!path) return sr_error(SR_ERR_ARG, "%s: path is NULL", fn);
    /* Tell "missing / unreadable" (IO) from "not HDF5 / corrupt" (FORMAT) before HDF5 does. */
    struct stat sb;
    if (stat(path, &sb) != 0) return sr_error(SR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return sr_error(SR_ERR_IO, "%s: is a directory", path);
    FILE *probe = fopen(path, "rb");
    if (!probe) return sr_error(SR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    fclose(probe);
    /* model files: the digest before libhdf5 parses a byte (golden fixtures have none) */
    int has_digest = 0;
    if (!plain) {
        sr_status dst = sr_h5_check_digest(path, &has_digest);
        if (dst) return dst;
    }

    sr_h5 *f = sr_calloc(1, sizeof *f, "HDF5 file handle");
    if (!f) return SR_ERR_NOMEM;
    f->file = -1;
    f->plain = plain;
    if (!(f->path = sr_strdup(path))) {
        free(f);
        return SR_ERR_NOMEM;
    }
    sr_status st = SR_OK;
    h5_lock();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0) {
        /* closing the file closes every object still open in it */
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7) && !(H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 12 && H5_VERS_RELEASE == 0)
        /* read-only: lock where the file system supports it, go on where it does not */
        H5Pset_file_locking(fapl, 1, 1);
#endif
    }
    f->file = H5Fopen(path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
    if (fapl >= 0) H5Pclose(fapl);
    if (f->file < 0)
        st = sr_error(SR_ERR_FORMAT,
                      "%s: not a readable HDF5 file (corrupt, truncated or another format)", path);
    if (!st) st = read_root_attrs(f);
    if (!st && !plain) st = validate_root(f);
    if (!plain && !has_digest)
        f->warning = "no srkit digest (written by another tool or an older srkit): integrity not "
                     "verified; `python3 scripts/srkit_h5.py seal FILE` adds one";
    if (st) h5_free(f);
    h5_unlock();
    if (st) return st;
    *out = f;
    return SR_OK;
}

sr_status sr_h5_open(const char *path, sr_h5 **out) { return open_common(path, 0, out); }

sr_status sr_h5_open_plain(const char *path, sr_h5 **out) { return open_common(path, 1, out); }

void sr_h5_close(sr_h5 *f)
{
    if (!f) return;
    h5_lock();
    h5_free(f);
    h5_unlock();
}

const char *sr_h5_path(const sr_h5 *f) { return f ? f->path : NULL; }
const char *sr_h5_warning(const sr_h5 *f) { return f ? f->warning : NULL; }
const char *sr_h5_arch(const sr_h5 *f) { return f && !f->plain ? f->arch : NULL; }
const char *sr_h5_config(const sr_h5 *f) { return f && !f->plain ? f->config : NULL; }

const char *sr_h5_root_attr(const sr_h5 *f, const char *name)
{
    if (!f || !name) return NULL;
    const root_attr *a = find_root(f, name);
    return a ? a->value : NULL;
}

/* ---- stored types and shapes ---------------------------------------------------------------- */

typedef enum { K_F32, K_F16, K_BF16, K_F64, K_INT, K_OTHER } kind;

typedef struct {
    kind k;
    size_t size;    /* bytes per element as stored */
    int is_signed;  /* K_INT */
    char name[16];  /* "f32", "bf16", "u16", "i8", "string", ... */
} stored_type;

static int float_is(hid_t t, size_t size, size_t spos, size_t epos, size_t esize, size_t msize,
                    size_t ebias)
{
    size_t sp, ep, es, mp, ms;
    if (H5Tget_size(t) != size || H5Tget_offset(t) != 0 || H5Tget_precision(t) != size * 8)
        return 0;
    if (H5Tget_fields(t, &sp, &ep, &es, &mp, &ms) < 0) return 0;
    return sp == spos && ep == epos && es == esize && mp == 0 && ms == msize &&
           H5Tget_ebias(t) == ebias && H5Tget_norm(t) == H5T_NORM_IMPLIED;
}

/* The dataset's "dtype" attribute ("bf16"), or NULL (malloc'ed). */
static char *dtype_attr(hid_t dset)
{
    if (H5Aexists(dset, "dtype") <= 0) return NULL;
    hid_t a = H5Aopen(dset, "dtype", H5P_DEFAULT);
    if (a < 0) return NULL;
    char *s = NULL;
    read_str_attr(a, &s);
    H5Aclose(a);
    return s;
}

static void classify(hid_t dset, hid_t ftype, stored_type *st)
{
    memset(st, 0, sizeof *st);
    st->k = K_OTHER;
    st->size = H5Tget_size(ftype);
    H5T_class_t c = H5Tget_class(ftype);
    if (c == H5T_FLOAT) {
        if (float_is(ftype, 4, 31, 23, 8, 23, 127)) st->k = K_F32;
        else if (float_is(ftype, 2, 15, 10, 5, 10, 15)) st->k = K_F16;
        else if (float_is(ftype, 8, 63, 52, 11, 52, 1023)) st->k = K_F64;
        if (st->k == K_F32) snprintf(st->name, sizeof st->name, "f32");
        else if (st->k == K_F16) snprintf(st->name, sizeof st->name, "f16");
        else if (st->k == K_F64) snprintf(st->name, sizeof st->name, "f64");
        else snprintf(st->name, sizeof st->name, "float%zu", st->size * 8);
    } else if (c == H5T_INTEGER && (st->size == 1 || st->size == 2 || st->size == 4 ||
                                    st->size == 8)) {
        st->k = K_INT;
        st->is_signed = H5Tget_sign(ftype) == H5T_SGN_2;
        snprintf(st->name, sizeof st->name, "%c%zu", st->is_signed ? 'i' : 'u', st->size * 8);
        if (st->size == 2 && !st->is_signed) {
            char *d = dtype_attr(dset);
            if (d && !strcmp(d, "bf16")) {
                st->k = K_BF16;
                snprintf(st->name, sizeof st->name, "bf16");
            }
            free(d);
        }
    } else {
        const char *n = c == H5T_STRING ? "string" : c == H5T_COMPOUND ? "compound"
                      : c == H5T_ENUM ? "enum" : c == H5T_INTEGER ? "integer" : "other";
        snprintf(st->name, sizeof st->name, "%s", n);
    }
}

/* Stored shape of an open dataset; numel checked against overflow. */
static sr_status dset_shape(const sr_h5 *f, hid_t dset, const char *what, int *ndim,
                            int64_t *shape, int64_t *numel)
{
    hid_t space = H5Dget_space(dset);
    if (space < 0) return sr_error(SR_ERR_FORMAT, "%s: %s: cannot read its dataspace", f->path, what);
    sr_status st = SR_OK;
    H5S_class_t sc = H5Sget_simple_extent_type(space);
    *ndim = 0;
    *numel = 1;
    if (sc == H5S_NULL) {
        *numel = 0;
    } else if (sc == H5S_SIMPLE) {
        int n = H5Sget_simple_extent_ndims(space);
        hsize_t dims[H5S_MAX_RANK];
        if (n < 0 || n > H5S_MAX_RANK || H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
            st = sr_error(SR_ERR_FORMAT, "%s: %s: cannot read its dataspace", f->path, what);
        } else if (n > SR_MAX_DIMS) {
            st = sr_error(SR_ERR_FORMAT, "%s: %s: %d dimensions, srkit reads at most %d",
                          f->path, what, n, SR_MAX_DIMS);
        } else {
            *ndim = n;
            for (int i = 0; i < n && !st; i++) {
                if (dims[i] > (hsize_t)INT64_MAX ||
                    (dims[i] && *numel > (int64_t)(((uint64_t)1 << 62) / dims[i])))
                    st = sr_error(SR_ERR_FORMAT, "%s: %s: implausible size", f->path, what);
                shape[i] = (int64_t)dims[i];
                *numel *= (int64_t)dims[i];
            }
        }
    } else if (sc != H5S_SCALAR) {
        st = sr_error(SR_ERR_FORMAT, "%s: %s: cannot read its dataspace", f->path, what);
    }
    H5Sclose(space);
    return st;
}

static void *alloc_elems(int64_t numel, size_t size, const sr_h5 *f, const char *what)
{
    if (numel < 0 || (size && (uint64_t)numel > SIZE_MAX / size)) {
        sr_error(SR_ERR_NOMEM, "%s: %s: too large for memory", f->path, what);
        return NULL;
    }
    size_t nb = (size_t)numel * size;
    void *p = malloc(nb ? nb : 1);
    if (!p) sr_error(SR_ERR_NOMEM, "%s: %s: out of memory for %lld elements", f->path, what,
                     (long long)numel);
    return p;
}

/* Whether every element of dset has storage in the file. Storage that is not there reads back
 * as the fill value without an error; a corrupt chunk index looks just like that, and no srkit
 * writer leaves data out. Chunked: every chunk of the extent is in the index (the space status
 * is no help: with a checksum filter a complete dataset reports "partly allocated");
 * contiguous: allocated; compact: always. */
static sr_status check_stored(const sr_h5 *f, hid_t dset, const char *what)
{
    hid_t sp = H5Dget_space(dset), pl = H5Dget_create_plist(dset);
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t dims[H5S_MAX_RANK], cdims[H5S_MAX_RANK];
    H5D_layout_t lay = pl >= 0 ? H5Pget_layout(pl) : H5D_LAYOUT_ERROR;
    int ok = nd >= 0 && nd <= H5S_MAX_RANK && lay != H5D_LAYOUT_ERROR &&
             H5Sget_simple_extent_dims(sp, dims, NULL) == nd;
    uint64_t want = 1;
    for (int i = 0; ok && i < nd; i++) want *= dims[i];
    const char *why = NULL;
    if (ok && want > 0 && lay == H5D_CHUNKED) {
        ok = H5Pget_chunk(pl, nd, cdims) == nd;
        uint64_t nch = 1;
        for (int i = 0; ok && i < nd; i++) {
            if (!cdims[i]) ok = 0;
            else nch *= (dims[i] + cdims[i] - 1) / cdims[i];
        }
        hsize_t have = 0;
        if (ok && H5Dget_num_chunks(dset, sp, &have) < 0) ok = 0;
        if (ok && have != nch) why = have ? "only partly" : "not";
    } else if (ok && want > 0 && lay == H5D_CONTIGUOUS) {
        H5D_space_status_t ss;
        if (H5Dget_space_status(dset, &ss) < 0) ok = 0;
        else if (ss != H5D_SPACE_STATUS_ALLOCATED) why = "not";
    }
    if (pl >= 0) H5Pclose(pl);
    if (sp >= 0) H5Sclose(sp);
    if (!ok) return sr_error(SR_ERR_FORMAT, "%s: %s: cannot read its storage layout (file corrupt?)", f->path, what);
    if (why) return sr_error(SR_ERR_FORMAT, "%s: %s: its data is %s stored in the file (chunk index corrupt?)",
                             f->path, what, why);
    return SR_OK;
}

static sr_status read_raw(const sr_h5 *f, hid_t dset, hid_t mem, void *buf, const char *what)
{
    /* storage that is not (all) there reads back as the fill value without an error: a
     * corrupt chunk index looks just like that, and no writer of srkit files leaves data out */
    sr_status st = check_stored(f, dset, what);
    if (st) return st;
    if (H5Dread(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        return sr_error(SR_ERR_FORMAT, "%s: %s: cannot read its data (file corrupt or truncated)",
                        f->path, what);
    return SR_OK;
}

/* Memory type for the raw 16-bit pattern of a stored f16: the file type in native byte order,
 * so that HDF5 copies (or byte-swaps) bits and never converts values. */
static hid_t f16_memtype(hid_t ftype)
{
    hid_t t = H5Tcopy(ftype);
    if (t >= 0 && H5Tset_order(t, H5Tget_order(H5T_NATIVE_FLOAT)) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static sr_status nonfinite_error(const sr_h5 *f, const char *what, float v, int64_t i)
{
    return sr_error(SR_ERR_FORMAT, "%s: %s: %s at flat index %lld", f->path, what,
                    isnan(v) ? "NaN" : "Inf", (long long)i);
}

static sr_status check_f32(const sr_h5 *f, const char *what, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return nonfinite_error(f, what, x[i], i);
    return SR_OK;
}

/* Half-width patterns (f16 or bf16): exponent all ones is Inf or NaN. */
static sr_status check_half(const sr_h5 *f, const char *what, const uint16_t *x, int64_t n,
                            int bf16)
{
    uint16_t em = bf16 ? 0x7f80u : 0x7c00u;
    for (int64_t i = 0; i < n; i++)
        if ((x[i] & em) == em)
            return nonfinite_error(f, what, bf16 ? sr_bf16_to_f32(x[i]) : sr_f16_to_f32(x[i]), i);
    return SR_OK;
}

/* Read a whole stored dataset of kind f32/f16/bf16/f64/integer as f32 (HDF5 converts f64 and
 * integers; f16/bf16 bit patterns are converted here). */
static sr_status read_as_f32(const sr_h5 *f, hid_t dset, hid_t ftype, const stored_type *stt,
                             int64_t numel, float *out, const char *what)
{
    if (stt->k == K_F16 || stt->k == K_BF16) {
        uint16_t *tmp = alloc_elems(numel, 2, f, what);
        if (!tmp) return SR_ERR_NOMEM;
        hid_t mem = stt->k == K_F16 ? f16_memtype(ftype) : H5Tcopy(H5T_NATIVE_UINT16);
        sr_status st = mem < 0 ? sr_error(SR_ERR_FORMAT, "%s: %s: bad stored type", f->path, what)
                               : read_raw(f, dset, mem, tmp, what);
        if (mem >= 0) H5Tclose(mem);
        if (!st) {
            if (stt->k == K_F16) sr_f16_to_f32_n(tmp, out, (size_t)numel);
            else sr_bf16_to_f32_n(tmp, out, (size_t)numel);
        }
        free(tmp);
        return st;
    }
    return read_raw(f, dset, H5T_NATIVE_FLOAT, out, what);
}

/* ---- tensors -------------------------------------------------------------------------------- */

static sr_status mark_used(sr_h5 *f, const char *name)
{
    for (size_t i = 0; i < f->n_used; i++)
        if (!strcmp(f->used[i], name)) return SR_OK;
    char *s = sr_strdup(name);
    if (!s) return SR_ERR_NOMEM;
    sr_status st = push_str(&f->used, &f->n_used, &f->cap_used, s);
    if (st) free(s);
    return st;
}

/* The f32 "<name>_scale" sibling of an int8 tensor: [rows], finite, >= 0. */
static sr_status load_scale(sr_h5 *f, const char *name, const char *path, int64_t rows,
                            float **out)
{
    char what[512];
    snprintf(what, sizeof what, "tensor %s_scale (scale of int8 tensor %s)", name, name);
    size_t n = strlen(path);
    char *sp = sr_malloc(n + 7, "scale path");
    if (!sp) return SR_ERR_NOMEM;
    memcpy(sp, path, n);
    memcpy(sp + n, "_scale", 7);
    sr_status st = SR_OK;
    hid_t d = -1, ft = -1;
    int e = obj_exists(f->file, sp, H5I_DATASET);
    if (e <= 0) {
        st = sr_error(SR_ERR_FORMAT, "%s: tensor %s is int8 but its scale tensor %s_scale is %s",
                      f->path, name, name, e < 0 ? "unreadable" : "missing");
        goto done;
    }
    if ((d = H5Dopen2(f->file, sp, H5P_DEFAULT)) < 0 || (ft = H5Dget_type(d)) < 0) {
        st = sr_error(SR_ERR_FORMAT, "%s: %s: cannot open it", f->path, what);
        goto done;
    }
    stored_type stt;
    classify(d, ft, &stt);
    int ndim;
    int64_t shape[SR_MAX_DIMS], numel;
    if ((st = dset_shape(f, d, what, &ndim, shape, &numel))) goto done;
    if (stt.k != K_F32) {
        st = sr_error(SR_ERR_FORMAT, "%s: %s: stored as %s, expected f32", f->path, what, stt.name);
        goto done;
    }
    if (ndim != 1 || shape[0] != rows) {
        char got[128];
        fmt_shape(got, sizeof got, ndim, shape);
        st = sr_error(SR_ERR_FORMAT, "%s: %s: shape %s, expected [%lld] (one per row)", f->path,
                      what, got, (long long)rows);
        goto done;
    }
    float *s = alloc_elems(rows, sizeof(float), f, what);
    if (!s) { st = SR_ERR_NOMEM; goto done; }
    if (!(st = read_raw(f, d, H5T_NATIVE_FLOAT, s, what)) && !(st = check_f32(f, what, s, rows))) {
        for (int64_t i = 0; i < rows; i++)
            if (s[i] < 0) {
                st = sr_error(SR_ERR_FORMAT, "%s: %s: negative scale %g at row %lld", f->path,
                              what, (double)s[i], (long long)i);
                break;
            }
    }
    if (st) free(s);
    else *out = s;
done:
    if (ft >= 0) H5Tclose(ft);
    if (d >= 0) H5Dclose(d);
    free(sp);
    return st;
}

/* Fill out->data (dtype want) from an f32 array x of numel values (x is consumed: freed or
 * moved into out). */
static sr_status from_f32(const sr_h5 *f, const char *what, float *x, int64_t numel,
                          sr_dtype want, sr_tensor *out)
{
    if (want == SR_F32) {
        out->data = x;
        return check_f32(f, what, x, numel);
    }
    sr_status st = SR_OK;
    if (want == SR_F16 || want == SR_BF16) {
        uint16_t *h = alloc_elems(numel, 2, f, what);
        if (!h) { free(x); return SR_ERR_NOMEM; }
        if (want == SR_F16) sr_f32_to_f16_n(x, h, (size_t)numel);
        else sr_f32_to_bf16_n(x, h, (size_t)numel);
        uint16_t em = want == SR_F16 ? 0x7c00u : 0x7f80u;
        for (int64_t i = 0; i < numel; i++)
            if ((h[i] & em) == em) {
                st = sr_error(SR_ERR_FORMAT, "%s: %s: value %g at flat index %lld is outside the "
                              "%s range", f->path, what, (double)x[i], (long long)i,
                              sr_dtype_name(want));
                break;
            }
        out->data = h;
    } else { /* SR_I8: quantize per output row */
        if (out->ndim < 1) {
            free(x);
            return sr_error(SR_ERR_ARG, "%s: %s: a scalar cannot be quantized to i8 per row",
                            f->path, what);
        }
        size_t rows = (size_t)out->shape[0], cols = rows ? (size_t)numel / rows : 0;
        int8_t *q = alloc_elems(numel, 1, f, what);
        float *s = alloc_elems((int64_t)rows, sizeof(float), f, what);
        if (!q || !s) {
            free(q);
            free(s);
            free(x);
            return SR_ERR_NOMEM;
        }
        sr_i8_quant_rows(x, rows, cols, q, s);
        out->data = q;
        out->scale = s;
    }
    free(x);
    return st;
}

static sr_status load_tensor(sr_h5 *f, const char *name, const char *path, sr_dtype want,
                             int ndim, const int64_t *shape, sr_tensor *out)
{
    char what[400];
    snprintf(what, sizeof what, "tensor %s", name);
    int e = obj_exists(f->file, path, H5I_DATASET);
    if (e < 0)
        return sr_error(SR_ERR_FORMAT, "%s: tensor %s: cannot read %s (file corrupt?)", f->path,
                        name, path);
    if (!e)
        return sr_error(SR_ERR_FORMAT, "%s: tensor %s is missing (no dataset %s)", f->path, name,
                        path);
    hid_t d = H5Dopen2(f->file, path, H5P_DEFAULT), ft = -1;
    if (d < 0 || (ft = H5Dget_type(d)) < 0) {
        if (d >= 0) H5Dclose(d);
        return sr_error(SR_ERR_FORMAT, "%s: tensor %s: cannot open %s (file corrupt?)", f->path,
                        name, path);
    }
    sr_status st;
    stored_type stt;
    classify(d, ft, &stt);
    int sndim;
    int64_t sshape[SR_MAX_DIMS], numel;
    void *raw = NULL;
    float *scale = NULL;
    if ((st = dset_shape(f, d, what, &sndim, sshape, &numel))) goto done;
    int same = sndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = sshape[i] == shape[i];
    if (!same) {
        char got[160], exp[160];
        fmt_shape(got, sizeof got, sndim, sshape);
        fmt_shape(exp, sizeof exp, ndim, shape);
        st = sr_error(SR_ERR_FORMAT, "%s: tensor %s: stored shape %s, expected %s", f->path, name,
                      got, exp);
        goto done;
    }
    int is_i8 = stt.k == K_INT && stt.size == 1 && stt.is_signed;
    if (stt.k != K_F32 && stt.k != K_F16 && stt.k != K_BF16 && !is_i8) {
        st = sr_error(SR_ERR_FORMAT,
                      "%s: tensor %s: stored as %s; tensors are f32, f16, bf16 (u16 with "
                      "attribute dtype=\"bf16\") or i8 (with a _scale tensor)",
                      f->path, name, stt.name);
        goto done;
    }
    if (is_i8 && ndim < 1) {
        st = sr_error(SR_ERR_FORMAT, "%s: tensor %s: an i8 tensor needs at least one dimension",
                      f->path, name);
        goto done;
    }
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) out->shape[i] = shape[i];

    /* 1. the stored values, checked */
    if (is_i8) {
        if ((st = load_scale(f, name, path, shape[0], &scale))) goto done;
        if (!(raw = alloc_elems(numel, 1, f, what))) { st = SR_ERR_NOMEM; goto done; }
        if ((st = read_raw(f, d, H5T_NATIVE_SCHAR, raw, what))) goto done;
    } else if (stt.k == K_F32) {
        if (!(raw = alloc_elems(numel, 4, f, what))) { st = SR_ERR_NOMEM; goto done; }
        if ((st = read_raw(f, d, H5T_NATIVE_FLOAT, raw, what)) ||
            (st = check_f32(f, what, raw, numel)))
            goto done;
    } else {
        if (!(raw = alloc_elems(numel, 2, f, what))) { st = SR_ERR_NOMEM; goto done; }
        hid_t mem = stt.k == K_F16 ? f16_memtype(ft) : H5Tcopy(H5T_NATIVE_UINT16);
        st = mem < 0 ? sr_error(SR_ERR_FORMAT, "%s: %s: bad stored type", f->path, what)
                     : read_raw(f, d, mem, raw, what);
        if (mem >= 0) H5Tclose(mem);
        if (st || (st = check_half(f, what, raw, numel, stt.k == K_BF16))) goto done;
    }

    /* 2. kept as stored when the dtype matches */
    sr_dtype sdt = is_i8 ? SR_I8 : stt.k == K_F32 ? SR_F32 : stt.k == K_F16 ? SR_F16 : SR_BF16;
    if (want == SR_AS_STORED) want = sdt;
    out->dtype = want;
    if (sdt == want) {
        out->data = raw;
        out->scale = scale;
        raw = NULL;
        scale = NULL;
    } else {
        /* 3. otherwise through f32 */
        float *x;
        if (sdt == SR_F32) {
            x = raw;
            raw = NULL;
        } else {
            if (!(x = alloc_elems(numel, 4, f, what))) { st = SR_ERR_NOMEM; goto done; }
            if (sdt == SR_F16) sr_f16_to_f32_n(raw, x, (size_t)numel);
            else if (sdt == SR_BF16) sr_bf16_to_f32_n(raw, x, (size_t)numel);
            else sr_i8_dequant_rows(raw, scale, (size_t)shape[0],
                                    shape[0] ? (size_t)(numel / shape[0]) : 0, x);
        }
        if ((st = from_f32(f, what, x, numel, want, out))) goto done;
    }
    if (!(out->name = sr_strdup(name))) { st = SR_ERR_NOMEM; goto done; }
    out->nbytes = (size_t)numel * sr_dtype_size(want) + (out->scale ? (size_t)shape[0] * 4 : 0);
done:
    free(raw);
    free(scale);
    H5Tclose(ft);
    H5Dclose(d);
    return st;
}

int sr_h5_has_tensor(sr_h5 *f, const char *name)
{
    if (!f || !name) return 0;
    char *path = tensor_path(name, NULL);
    if (!path) return 0;
    h5_lock();
    int e = obj_exists(f->file, path, H5I_DATASET);
    h5_unlock();
    free(path);
    return e == 1;
}

sr_status sr_h5_tensor(sr_h5 *f, const char *name, sr_dtype want, int ndim, const int64_t *shape,
                       sr_tensor *out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_h5_tensor: out is NULL");
    memset(out, 0, sizeof *out);
    if (!f || !name) return sr_error(SR_ERR_ARG, "sr_h5_tensor: file or name is NULL");
    if (ndim < 0 || ndim > SR_MAX_DIMS || (ndim && !shape))
        return sr_error(SR_ERR_ARG, "%s: tensor %s: bad expected shape (ndim %d)", f->path, name,
                        ndim);
    if (want != SR_F32 && want != SR_F16 && want != SR_BF16 && want != SR_I8 &&
        want != SR_AS_STORED)
        return sr_error(SR_ERR_ARG, "%s: tensor %s: cannot load as %s", f->path, name,
                        sr_dtype_name(want));
    char *path = tensor_path(name, NULL);
    if (!path) return SR_ERR_ARG;
    h5_lock();
    sr_status st = load_tensor(f, name, path, want, ndim, shape, out);
    if (!st) st = mark_used(f, name);
    h5_unlock();
    free(path);
    if (st) sr_tensor_free(out);
    return st;
}

/* ---- any dataset ---------------------------------------------------------------------------- */

sr_status sr_h5_has_dataset(sr_h5 *f, const char *path, int *exists)
{
    *exists = 0;
    if (!f || !path) return sr_error(SR_ERR_ARG, "sr_h5_has_dataset: %s is NULL", f ? "path" : "file");
    h5_lock();
    int e = obj_exists(f->file, path, H5I_DATASET);
    h5_unlock();
    if (e < 0) return sr_error(SR_ERR_FORMAT, "%s: dataset %s: cannot look it up (file corrupt?)", f->path, path);
    *exists = e == 1;
    return SR_OK;
}

static sr_status load_dataset(sr_h5 *f, const char *path, sr_dtype want, sr_tensor *out)
{
    char what[400];
    snprintf(what, sizeof what, "dataset %s", path);
    int e = obj_exists(f->file, path, H5I_DATASET);
    if (e < 0) return sr_error(SR_ERR_FORMAT, "%s: %s: cannot read it (file corrupt?)", f->path, what);
    if (!e) return sr_error(SR_ERR_FORMAT, "%s: %s is missing", f->path, what);
    hid_t d = H5Dopen2(f->file, path, H5P_DEFAULT), ft = -1;
    if (d < 0 || (ft = H5Dget_type(d)) < 0) {
        if (d >= 0) H5Dclose(d);
        return sr_error(SR_ERR_FORMAT, "%s: %s: cannot open it (file corrupt?)", f->path, what);
    }
    stored_type stt;
    classify(d, ft, &stt);
    int64_t numel;
    int64_t *tmp = NULL;
    sr_status st = dset_shape(f, d, what, &out->ndim, out->shape, &numel);
    if (st) goto done;
    out->dtype = want;
    if (want == SR_F32) {
        if (stt.k == K_OTHER) {
            st = sr_error(SR_ERR_FORMAT, "%s: %s: stored as %s, not a number type", f->path,
                          what, stt.name);
            goto done;
        }
        if (!(out->data = alloc_elems(numel, 4, f, what))) { st = SR_ERR_NOMEM; goto done; }
        if ((st = read_as_f32(f, d, ft, &stt, numel, out->data, what))) goto done;
        st = check_f32(f, what, out->data, numel);
    } else if (want == SR_I8) {
        if (stt.k != K_INT || stt.size != 1) {
            st = sr_error(SR_ERR_FORMAT, "%s: %s: stored as %s, expected u8 or i8 bytes", f->path,
                          what, stt.name);
            goto done;
        }
        if (!(out->data = alloc_elems(numel, 1, f, what))) { st = SR_ERR_NOMEM; goto done; }
        st = read_raw(f, d, stt.is_signed ? H5T_NATIVE_SCHAR : H5T_NATIVE_UCHAR, out->data, what);
    } else { /* SR_I64 / SR_I32 */
        if (stt.k != K_INT) {
            st = sr_error(SR_ERR_FORMAT, "%s: %s: stored as %s, expected an integer type",
                          f->path, what, stt.name);
            goto done;
        }
        if (!stt.is_signed && stt.size == 8) {
            st = sr_error(SR_ERR_FORMAT, "%s: %s: stored as u64, which %s cannot hold", f->path,
                          what, sr_dtype_name(want));
            goto done;
        }
        if (!(tmp = alloc_elems(numel, 8, f, what))) { st = SR_ERR_NOMEM; goto done; }
        if ((st = read_raw(f, d, H5T_NATIVE_INT64, tmp, what))) goto done;
        if (want == SR_I64) {
            out->data = tmp;
            tmp = NULL;
        } else {
            int32_t *o = alloc_elems(numel, 4, f, what);
            if (!o) { st = SR_ERR_NOMEM; goto done; }
            out->data = o;
            for (int64_t i = 0; i < numel; i++) {
                if (tmp[i] < INT32_MIN || tmp[i] > INT32_MAX) {
                    st = sr_error(SR_ERR_FORMAT, "%s: %s: value %lld at flat index %lld does not "
                                  "fit i32", f->path, what, (long long)tmp[i], (long long)i);
                    break;
                }
                o[i] = (int32_t)tmp[i];
            }
        }
    }
    if (!st && !(out->name = sr_strdup(path))) st = SR_ERR_NOMEM;
    if (!st) out->nbytes = (size_t)numel * sr_dtype_size(want);
done:
    free(tmp);
    H5Tclose(ft);
    H5Dclose(d);
    return st;
}

sr_status sr_h5_dataset(sr_h5 *f, const char *path, sr_dtype want, sr_tensor *out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_h5_dataset: out is NULL");
    memset(out, 0, sizeof *out);
    if (!f || !path) return sr_error(SR_ERR_ARG, "sr_h5_dataset: file or path is NULL");
    if (path[0] != '/')
        return sr_error(SR_ERR_ARG, "%s: dataset path \"%s\" is not absolute", f->path, path);
    if (want != SR_F32 && want != SR_I64 && want != SR_I32 && want != SR_I8)
        return sr_error(SR_ERR_ARG, "%s: dataset %s: cannot read as %s (f32, i64, i32 or i8)",
                        f->path, path, sr_dtype_name(want));
    h5_lock();
    sr_status st = load_dataset(f, path, want, out);
    h5_unlock();
    if (st) sr_tensor_free(out);
    return st;
}

const char *sr_h5_attr(sr_h5 *f, const char *path, const char *attr)
{
    if (!f || !path || !attr) return NULL;
    char *s = NULL;
    h5_lock();
    if (obj_exists(f->file, path, H5I_BADID) == 1) {
        hid_t o = H5Oopen(f->file, path, H5P_DEFAULT);
        if (o >= 0) {
            if (H5Aexists(o, attr) > 0) {
                hid_t a = H5Aopen(o, attr, H5P_DEFAULT);
                if (a >= 0) {
                    if (read_str_attr(a, &s) != 0) s = NULL;
                    H5Aclose(a);
                }
            }
            H5Oclose(o);
        }
    }
    if (s && push_str(&f->strs, &f->n_strs, &f->cap_strs, s)) {
        free(s);
        s = NULL;
    }
    h5_unlock();
    return s;
}

/* ---- walking a group ------------------------------------------------------------------------ */

#define WALK_MAX_DEPTH 32

typedef struct {
    char **paths;  /* absolute HDF5 paths of the datasets */
    char **names;  /* the same below the walked group, '/' -> '.' */
    size_t n, cap;
} ds_list;

static void ds_list_free(ds_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->paths[i]);
        free(l->names[i]);
    }
    free(l->paths);
    free(l->names);
    memset(l, 0, sizeof *l);
}

static sr_status ds_list_add(ds_list *l, const char *path, const char *name)
{
    if (l->n == l->cap) {
        size_t c = l->cap ? 2 * l->cap : 32;
        char **p = realloc(l->paths, c * sizeof *p);
        if (!p) return sr_error(SR_ERR_NOMEM, "out of memory listing datasets");
        l->paths = p;
        char **q = realloc(l->names, c * sizeof *q);
        if (!q) return sr_error(SR_ERR_NOMEM, "out of memory listing datasets");
        l->names = q;
        l->cap = c;
    }
    char *a = strdup(path), *b = strdup(name);
    if (!a || !b) {
        free(a);
        free(b);
        return sr_error(SR_ERR_NOMEM, "out of memory listing datasets");
    }
    for (char *c = b; *c; c++)
        if (*c == '/') *c = '.';
    l->paths[l->n] = a;
    l->names[l->n] = b;
    l->n++;
    return SR_OK;
}

/* Every dataset below group path gpath (hard links only), recursively. rel is the part of
 * the path below the walk's root ("" at the root). */
static sr_status walk(const sr_h5 *f, const char *gpath, const char *rel, int depth, ds_list *l)
{
    if (depth > WALK_MAX_DEPTH)
        return sr_error(SR_ERR_FORMAT, "%s: group %s: nested deeper than %d levels (link cycle?)",
                        f->path, gpath, WALK_MAX_DEPTH);
    hid_t g = H5Gopen2(f->file, gpath, H5P_DEFAULT);
    if (g < 0) return sr_error(SR_ERR_FORMAT, "%s: group %s: cannot open it (file corrupt?)", f->path, gpath);
    H5G_info_t gi;
    sr_status st = SR_OK;
    if (H5Gget_info(g, &gi) < 0) {
        st = sr_error(SR_ERR_FORMAT, "%s: group %s: cannot list it (file corrupt?)", f->path, gpath);
        goto done;
    }
    for (hsize_t i = 0; i < gi.nlinks && !st; i++) {
        ssize_t len = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, NULL, 0, H5P_DEFAULT);
        if (len <= 0) {
            st = sr_error(SR_ERR_FORMAT, "%s: group %s: cannot read link %llu (file corrupt?)",
                          f->path, gpath, (unsigned long long)i);
            break;
        }
        size_t glen = strlen(gpath), rlen = strlen(rel);
        char *child = malloc(glen + (size_t)len + 2), *crel = malloc(rlen + (size_t)len + 2);
        if (!child || !crel) {
            free(child);
            free(crel);
            st = sr_error(SR_ERR_NOMEM, "out of memory walking %s", gpath);
            break;
        }
        char *nm = child + glen + (glen > 1 ? 1 : 0);
        memcpy(child, gpath, glen);
        if (glen > 1) child[glen] = '/';
        if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, nm, (size_t)len + 1,
                               H5P_DEFAULT) != len) {
            st = sr_error(SR_ERR_FORMAT, "%s: group %s: cannot read link %llu (file corrupt?)",
                          f->path, gpath, (unsigned long long)i);
        } else {
            snprintf(crel, rlen + (size_t)len + 2, "%s%s%s", rel, rlen ? "/" : "", nm);
            H5L_info_t li;
            if (H5Lget_info(g, nm, &li, H5P_DEFAULT) < 0) {
                st = sr_error(SR_ERR_FORMAT, "%s: %s: cannot read its link (file corrupt?)",
                              f->path, child);
            } else if (li.type == H5L_TYPE_HARD) {
                hid_t o = H5Oopen(g, nm, H5P_DEFAULT);
                if (o < 0) {
                    st = sr_error(SR_ERR_FORMAT, "%s: %s: cannot open it (file corrupt?)",
                                  f->path, child);
                } else {
                    H5I_type_t t = H5Iget_type(o);
                    H5Oclose(o);
                    if (t == H5I_DATASET) st = ds_list_add(l, child, crel);
                    else if (t == H5I_GROUP) st = walk(f, child, crel, depth + 1, l);
                }
            }
        }
        free(child);
        free(crel);
    }
done:
    H5Gclose(g);
    return st;
}

/* Datasets below gpath, sorted by dotted name; an absent group gives an empty list. */
static sr_status list_datasets(const sr_h5 *f, const char *gpath, ds_list *l)
{
    memset(l, 0, sizeof *l);
    int e = obj_exists(f->file, gpath, H5I_GROUP);
    if (e < 0) return sr_error(SR_ERR_FORMAT, "%s: group %s: cannot read it (file corrupt?)", f->path, gpath);
    if (!e) return SR_OK;
    sr_status st = walk(f, gpath, "", 0, l);
    if (st) {
        ds_list_free(l);
        return st;
    }
    /* sort names and paths together (insertion sort: lists hold a few thousand at most) */
    for (size_t i = 1; i < l->n; i++)
        for (size_t j = i; j > 0 && strcmp(l->names[j - 1], l->names[j]) > 0; j--) {
            char *t = l->names[j]; l->names[j] = l->names[j - 1]; l->names[j - 1] = t;
            t = l->paths[j]; l->paths[j] = l->paths[j - 1]; l->paths[j - 1] = t;
        }
    return SR_OK;
}

static int in_sorted(char *const *arr, size_t n, const char *s)
{
    return n && bsearch(&s, arr, n, sizeof *arr, cmp_str) != NULL;
}

/* name ends in "_scale" and its base name is also in the (sorted) list */
static int is_scale_sibling(const ds_list *l, const char *name)
{
    size_t n = strlen(name);
    if (n <= 6 || strcmp(name + n - 6, "_scale")) return 0;
    char *base = strndup(name, n - 6);
    if (!base) return 0;
    int r = in_sorted(l->names, l->n, base);
    free(base);
    return r;
}

sr_status sr_h5_unused(sr_h5 *f, char ***names, size_t *n)
{
    if (!names || !n) return sr_error(SR_ERR_ARG, "sr_h5_unused: names or n is NULL");
    *names = NULL;
    *n = 0;
    if (!f) return sr_error(SR_ERR_ARG, "sr_h5_unused: file is NULL");
    char **used = NULL, **res = NULL;
    size_t n_used = 0, nres = 0, cap = 0;
    ds_list l;
    h5_lock(); /* also guards f->used against a concurrent sr_h5_tensor on the same file */
    sr_status st = list_datasets(f, "/weights", &l);
    if (!st && f->n_used) {
        if ((used = malloc(f->n_used * sizeof *used))) {
            n_used = f->n_used;
            for (size_t i = 0; i < n_used && used; i++)
                if (!(used[i] = strdup(f->used[i]))) {
                    for (size_t j = 0; j < i; j++) free(used[j]);
                    free(used);
                    used = NULL;
                }
        }
        if (!used) {
            ds_list_free(&l);
            st = sr_error(SR_ERR_NOMEM, "out of memory listing unused tensors");
        }
    }
    h5_unlock();
    if (st) return st;
    if (used) qsort(used, n_used, sizeof *used, cmp_str);
    for (size_t i = 0; i < l.n && !st; i++) {
        if (in_sorted(used, n_used, l.names[i]) || is_scale_sibling(&l, l.names[i])) continue;
        char *s = sr_strdup(l.names[i]);
        if (!s || (st = push_str(&res, &nres, &cap, s))) {
            free(s);
            st = SR_ERR_NOMEM;
        }
    }
    for (size_t i = 0; i < n_used; i++) free(used[i]);
    free(used);
    ds_list_free(&l);
    if (st) {
        for (size_t i = 0; i < nres; i++) free(res[i]);
        free(res);
        return st;
    }
    *names = res;
    *n = nres;
    return SR_OK;
}

/* ---- sr_model_inspect ----------------------------------------------------------------------- */

static sr_status inspect_tensors(sr_h5 *f, cJSON *root)
{
    ds_list l;
    sr_status st = list_datasets(f, "/weights", &l);
    if (st) return st;
    cJSON *arr = cJSON_CreateArray(), *bytes = cJSON_CreateObject();
    double n_params = 0;
    /* bytes per dtype, kept in first-seen order of a fixed list for stable output */
    static const char *const order[] = {"f32", "f16", "bf16", "i8"};
    double by[SR_ARRAY_LEN(order)] = {0};
    cJSON *other = cJSON_CreateObject();
    if (!arr || !bytes || !other) st = sr_error(SR_ERR_NOMEM, "out of memory building JSON");
    for (size_t i = 0; i < l.n && !st; i++) {
        const char *what = l.names[i];
        hid_t d = H5Dopen2(f->file, l.paths[i], H5P_DEFAULT), ft = -1;
        if (d < 0 || (ft = H5Dget_type(d)) < 0) {
            if (d >= 0) H5Dclose(d);
            st = sr_error(SR_ERR_FORMAT, "%s: tensor %s: cannot open it (file corrupt?)", f->path,
                          what);
            break;
        }
        stored_type stt;
        classify(d, ft, &stt);
        int ndim;
        int64_t shape[SR_MAX_DIMS], numel;
        char msg[400];
        snprintf(msg, sizeof msg, "tensor %s", what);
        st = dset_shape(f, d, msg, &ndim, shape, &numel);
        H5Tclose(ft);
        H5Dclose(d);
        if (st) break;
        double nb = (double)numel * (double)stt.size;
        cJSON *t = cJSON_CreateObject(), *sh = cJSON_CreateArray();
        if (!t || !sh) {
            cJSON_Delete(t);
            cJSON_Delete(sh);
            st = sr_error(SR_ERR_NOMEM, "out of memory building JSON");
            break;
        }
        for (int k = 0; k < ndim; k++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)shape[k]));
        cJSON_AddStringToObject(t, "name", what);
        cJSON_AddStringToObject(t, "dtype", stt.name);
        cJSON_AddItemToObject(t, "shape", sh);
        cJSON_AddNumberToObject(t, "bytes", nb);
        cJSON_AddItemToArray(arr, t);
        if (!is_scale_sibling(&l, what)) n_params += (double)numel;
        size_t k = 0;
        while (k < SR_ARRAY_LEN(order) && strcmp(order[k], stt.name)) k++;
        if (k < SR_ARRAY_LEN(order)) {
            by[k] += nb;
        } else {
            cJSON *o = cJSON_GetObjectItemCaseSensitive(other, stt.name);
            if (o) cJSON_SetNumberValue(o, o->valuedouble + nb);
            else cJSON_AddNumberToObject(other, stt.name, nb);
        }
    }
    if (!st) {
        for (size_t k = 0; k < SR_ARRAY_LEN(order); k++)
            if (by[k] > 0) cJSON_AddNumberToObject(bytes, order[k], by[k]);
        for (cJSON *o = other ? other->child : NULL; o; o = o->next)
            cJSON_AddNumberToObject(bytes, o->string, o->valuedouble);
        cJSON_AddNumberToObject(root, "n_tensors", (double)l.n);
        cJSON_AddNumberToObject(root, "n_params", n_params);
        cJSON_AddItemToObject(root, "bytes_by_dtype", bytes);
        cJSON_AddItemToObject(root, "tensors", arr);
        bytes = arr = NULL;
    }
    cJSON_Delete(other);
    cJSON_Delete(bytes);
    cJSON_Delete(arr);
    ds_list_free(&l);
    return st;
}

static sr_status inspect_rest(sr_h5 *f, cJSON *root)
{
    /* tokenizer {type, size} or null */
    int e = obj_exists(f->file, "/tokenizer", H5I_GROUP);
    if (e < 0) return sr_error(SR_ERR_FORMAT, "%s: group /tokenizer: cannot read it", f->path);
    if (!e) {
        cJSON_AddNullToObject(root, "tokenizer");
    } else {
        cJSON *tok = cJSON_AddObjectToObject(root, "tokenizer");
        if (!tok) return sr_error(SR_ERR_NOMEM, "out of memory building JSON");
        char *type = NULL;
        hid_t g = H5Gopen2(f->file, "/tokenizer", H5P_DEFAULT);
        if (g >= 0) {
            if (H5Aexists(g, "type") > 0) {
                hid_t a = H5Aopen(g, "type", H5P_DEFAULT);
                if (a >= 0) {
                    if (read_str_attr(a, &type) != 0) type = NULL;
                    H5Aclose(a);
                }
            }
            H5Gclose(g);
        }
        if (type) cJSON_AddStringToObject(tok, "type", type);
        else cJSON_AddNullToObject(tok, "type");
        free(type);
        const char *op = "/tokenizer/pieces_offsets";
        int oe = obj_exists(f->file, op, H5I_DATASET);
        int64_t numel = 0, shape[SR_MAX_DIMS];
        int ndim = 0;
        hid_t d = oe == 1 ? H5Dopen2(f->file, op, H5P_DEFAULT) : -1;
        if (d >= 0) {
            sr_status st = dset_shape(f, d, "dataset /tokenizer/pieces_offsets", &ndim, shape, &numel);
            H5Dclose(d);
            if (st) return st;
        }
        if (d >= 0 && ndim == 1 && numel >= 1) cJSON_AddNumberToObject(tok, "size", (double)(numel - 1));
        else cJSON_AddNullToObject(tok, "size");
    }
    /* frontend: dataset names */
    ds_list l;
    sr_status st = list_datasets(f, "/frontend", &l);
    if (st) return st;
    cJSON *fe = cJSON_AddArrayToObject(root, "frontend");
    for (size_t i = 0; fe && i < l.n; i++) cJSON_AddItemToArray(fe, cJSON_CreateString(l.names[i]));
    ds_list_free(&l);
    return fe ? SR_OK : sr_error(SR_ERR_NOMEM, "out of memory building JSON");
}

sr_status sr_model_inspect(const char *h5_path, char **json_out)
{
    if (!json_out) return sr_error(SR_ERR_ARG, "sr_model_inspect: json_out is NULL");
    *json_out = NULL;
    sr_h5 *f = NULL;
    sr_status st = sr_h5_open(h5_path, &f);
    if (st) return st;
    cJSON *root = cJSON_CreateObject();
    if (!root) {
        sr_h5_close(f);
        return sr_error(SR_ERR_NOMEM, "out of memory building JSON");
    }
    cJSON_AddStringToObject(root, "path", f->path);
    cJSON_AddStringToObject(root, "arch", f->arch);
    cJSON_AddNumberToObject(root, "format_version", 1);
    /* sr_h5_open verified it, or warned that there is none */
    cJSON_AddStringToObject(root, "digest", f->warning ? "none" : "xxh3-128 verified");
    cJSON *cfg = cJSON_Parse(f->config); /* validated as an object at open */
    if (cfg) cJSON_AddItemToObject(root, "config", cfg);
    else cJSON_AddNullToObject(root, "config");
    const char *keys[] = {"source", "license"};
    for (size_t i = 0; i < SR_ARRAY_LEN(keys); i++) {
        const char *v = sr_h5_root_attr(f, keys[i]);
        if (v) cJSON_AddStringToObject(root, keys[i], v);
        else cJSON_AddNullToObject(root, keys[i]);
    }
    h5_lock();
    st = inspect_tensors(f, root);
    if (!st) st = inspect_rest(f, root);
    h5_unlock();
    if (!st) {
        char *txt = sr_json_print(root, 1); /* a path or attribute that is not UTF-8: U+FFFD */
        if (!txt) st = sr_error(SR_ERR_NOMEM, "%s: out of memory printing JSON", h5_path);
        *json_out = txt;
    }
    cJSON_Delete(root);
    sr_h5_close(f);
    return st;
}
