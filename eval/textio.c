/*
 * textio.c — line splitting with line numbers, path helpers, recursive file search, stable
 * sort-by-id with duplicate detection, JSON string escaping and atomic writes for the
 * evaluation readers and writers (see textio.h). No global state: every function is reentrant.
 */
#include "textio.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

sr_status sr_lines_read(const char *path, sr_lines *out)
{
    memset(out, 0, sizeof *out);
    char *buf;
    size_t len;
    sr_status st = sr_read_file(path, &buf, &len);
    if (st) return st;
    const unsigned char *u = (const unsigned char *)buf;
    if (len >= 2 && ((u[0] == 0xFF && u[1] == 0xFE) || (u[0] == 0xFE && u[1] == 0xFF))) {
        free(buf);
        return sr_error(SR_ERR_FORMAT, "%s: UTF-16 text is not supported; convert it to UTF-8 "
                                       "(iconv -f UTF-16 -t UTF-8)", path);
    }
    size_t start = (len >= 3 && u[0] == 0xEF && u[1] == 0xBB && u[2] == 0xBF) ? 3 : 0;
    size_t n_lines = 1, lineno = 1;
    for (size_t i = start; i < len; i++) {
        if (buf[i] == '\0') {
            free(buf);
            return sr_error(SR_ERR_FORMAT, "%s:%zu: NUL byte in a text file (binary file?)", path,
                            lineno);
        }
        if (buf[i] == '\n') { n_lines++; lineno++; }
    }
    char **lines = sr_malloc(n_lines * sizeof *lines, "line table");
    if (!lines) { free(buf); return SR_ERR_NOMEM; }
    size_t n = 0;
    char *p = buf + start, *end = buf + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end;
        *stop = '\0';
        if (stop > p && stop[-1] == '\r') stop[-1] = '\0';
        lines[n++] = p;
        p = stop + 1;
    }
    out->buf = buf;
    out->line = lines;
    out->n = n;
    return SR_OK;
}

void sr_lines_free(sr_lines *l)
{
    if (!l) return;
    free(l->buf);
    free(l->line);
    memset(l, 0, sizeof *l);
}

char *sr_trim(char *s)
{
    while (*s && isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

char *sr_path_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return sr_strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = sr_malloc(n + 1, "path");
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

char *sr_path_join(const char *dir, const char *rel)
{
    if (!dir || rel[0] == '/') return sr_strdup(rel);
    size_t a = strlen(dir), b = strlen(rel);
    int slash = a && dir[a - 1] != '/';
    char *p = sr_malloc(a + (size_t)slash + b + 1, "path");
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (slash) p[a] = '/';
    memcpy(p + a + (size_t)slash, rel, b + 1);
    return p;
}

const char *sr_path_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

char *sr_path_stem(const char *path)
{
    const char *base = sr_path_basename(path);
    const char *dot = strrchr(base, '.');
    size_t n = (dot && dot != base) ? (size_t)(dot - base) : strlen(base);
    char *s = sr_malloc(n + 1, "path");
    if (!s) return NULL;
    memcpy(s, base, n);
    s[n] = '\0';
    return s;
}

int sr_path_is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int sr_path_is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, R_OK) == 0;
}

int sr_ends_with_nocase(const char *name, const char *suffix)
{
    size_t a = strlen(name), b = strlen(suffix);
    if (b > a) return 0;
    for (size_t i = 0; i < b; i++)
        if (tolower((unsigned char)name[a - b + i]) != tolower((unsigned char)suffix[i])) return 0;
    return 1;
}

/* Growable list of path strings. */
typedef struct {
    char **v;
    size_t n, cap;
} path_list;

static sr_status path_list_push(path_list *l, char *p)
{
    if (!p) return SR_ERR_NOMEM;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) { free(p); return sr_error(SR_ERR_NOMEM, "out of memory listing files"); }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = p;
    return SR_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Depth-first walk; opendir/readdir on a private DIR stream are safe across threads. */
static sr_status walk(const char *dir, const char *const *suffixes, size_t n_suffixes, int depth,
                      path_list *out)
{
    if (depth > 32)
        return sr_error(SR_ERR_FORMAT, "%s: folders nested more than 32 deep (symlink loop?)", dir);
    DIR *d = opendir(dir);
    if (!d) return sr_error(SR_ERR_IO, "%s: cannot open folder: %s", dir, strerror(errno));
    path_list here = {0};
    sr_status st = SR_OK;
    struct dirent *e;
    while (!st && (e = readdir(d)))
        if (e->d_name[0] != '.') st = path_list_push(&here, sr_path_join(dir, e->d_name));
    closedir(d);
    if (!st) qsort(here.v, here.n, sizeof *here.v, cmp_str);
    for (size_t i = 0; i < here.n; i++) {
        char *p = here.v[i];
        here.v[i] = NULL;
        if (st) { free(p); continue; }
        if (sr_path_is_dir(p)) {
            st = walk(p, suffixes, n_suffixes, depth + 1, out);
            free(p);
            continue;
        }
        int match = 0;
        for (size_t k = 0; k < n_suffixes && !match; k++)
            match = sr_ends_with_nocase(sr_path_basename(p), suffixes[k]);
        if (match) st = path_list_push(out, p);
        else free(p);
    }
    free(here.v);
    return st;
}

sr_status sr_find_files(const char *dir, const char *const *suffixes, size_t n_suffixes,
                        char ***paths, size_t *n)
{
    *paths = NULL;
    *n = 0;
    path_list l = {0};
    sr_status st = walk(dir, suffixes, n_suffixes, 0, &l);
    if (st) { sr_paths_free(l.v, l.n); return st; }
    *paths = l.v;
    *n = l.n;
    return SR_OK;
}

void sr_paths_free(char **paths, size_t n)
{
    if (!paths) return;
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

typedef struct {
    const char *id;
    size_t i;
} id_index;

static int cmp_id_index(const void *a, const void *b)
{
    const id_index *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    if (c) return c;
    return x->i < y->i ? -1 : x->i > y->i;
}

static const char *member_str(const void *rec, size_t off)
{
    const char *s;
    memcpy(&s, (const char *)rec + off, sizeof s);
    return s;
}

sr_status sr_sort_unique(void *base, size_t n, size_t size, size_t id_off, size_t where_off,
                         const char *what)
{
    if (n < 2) return SR_OK;
    id_index *ix = sr_malloc(n * sizeof *ix, "sort index");
    char *tmp = sr_malloc(n * size, "sort buffer");
    if (!ix || !tmp) { free(ix); free(tmp); return SR_ERR_NOMEM; }
    char *b = base;
    for (size_t i = 0; i < n; i++) {
        ix[i].id = member_str(b + i * size, id_off);
        ix[i].i = i;
    }
    qsort(ix, n, sizeof *ix, cmp_id_index); /* index tie-break makes it stable */
    sr_status st = SR_OK;
    for (size_t i = 1; i < n && !st; i++)
        if (!strcmp(ix[i - 1].id, ix[i].id))
            st = sr_error(SR_ERR_FORMAT, "%s and %s: %s \"%s\"",
                          member_str(b + ix[i - 1].i * size, where_off),
                          member_str(b + ix[i].i * size, where_off), what, ix[i].id);
    if (!st) {
        for (size_t i = 0; i < n; i++) memcpy(tmp + i * size, b + ix[i].i * size, size);
        memcpy(b, tmp, n * size);
    }
    free(ix);
    free(tmp);
    return st;
}

sr_status sr_json_append_string(sr_strbuf *b, const char *s)
{
    const size_t from = b->len;
    sr_status st = sr_strbuf_append(b, "\"", 1);
    for (const char *p = s; !st && *p; p++) {
        unsigned char c = (unsigned char)*p;
        switch (c) {
        case '"': st = sr_strbuf_append(b, "\\\"", 2); break;
        case '\\': st = sr_strbuf_append(b, "\\\\", 2); break;
        case '\n': st = sr_strbuf_append(b, "\\n", 2); break;
        case '\r': st = sr_strbuf_append(b, "\\r", 2); break;
        case '\t': st = sr_strbuf_append(b, "\\t", 2); break;
        default:
            if (c < 0x20) st = sr_strbuf_printf(b, "\\u%04x", c);
            else st = sr_strbuf_append(b, p, 1);
        }
    }
    if (!st) st = sr_strbuf_utf8_repair(b, from);
    return st ? st : sr_strbuf_append(b, "\"", 1);
}

sr_status sr_write_file_atomic(const char *path, const char *data, size_t n)
{
    sr_strbuf tmp = {0};
    sr_status st = sr_strbuf_printf(&tmp, "%s.tmp.XXXXXX", path);
    if (st) return st;
    int fd = mkstemp(tmp.data);
    if (fd < 0) {
        st = sr_error(SR_ERR_IO, "%s: cannot create a temporary file next to it: %s", path,
                      strerror(errno));
        sr_strbuf_free(&tmp);
        return st;
    }
    /* mkstemp creates 0600; give the file the usual permissions of a result file. */
    (void)fchmod(fd, 0644);
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { st = sr_error(SR_ERR_IO, "%s: write failed: %s", path, strerror(errno)); break; }
        done += (size_t)w;
    }
    if (!st && fsync(fd) != 0)
        st = sr_error(SR_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    if (close(fd) != 0 && !st)
        st = sr_error(SR_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    if (!st && rename(tmp.data, path) != 0)
        st = sr_error(SR_ERR_IO, "%s: cannot rename the temporary file into place: %s", path,
                      strerror(errno));
    if (st) unlink(tmp.data);
    sr_strbuf_free(&tmp);
    return st;
}
