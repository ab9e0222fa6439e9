/*
 * textio.h — shared plumbing for the evaluation readers and writers (eval/dataset.c,
 * eval/wordtimes.c, eval/timeline_io.c): whole-file line splitting that keeps line numbers for
 * "file:line" messages, path resolution against a dataset file's folder, sorting records by
 * utterance id with duplicate detection, JSON string escaping and atomic file writes.
 * Internal to eval/; every function is reentrant (no global state).
 */
#ifndef SR_EVAL_TEXTIO_H
#define SR_EVAL_TEXTIO_H

#include <stddef.h>

#include "../core/internal.h"

/* A text file split into lines. Line i (0-based) is line number i + 1 in messages. */
typedef struct sr_lines {
    char *buf;   /* the file contents, cut into lines in place (owned) */
    char **line; /* [n] NUL-terminated lines without "\n" or a trailing "\r" (point into buf) */
    size_t n;
} sr_lines;

/* Read path and split it into lines. A UTF-8 byte-order mark is skipped. A file holding NUL
 * bytes (binary) or starting with a UTF-16 byte-order mark is SR_ERR_FORMAT naming the file
 * (and the line); unreadable is SR_ERR_IO. On error *out is zeroed. */
sr_status sr_lines_read(const char *path, sr_lines *out);
void sr_lines_free(sr_lines *l); /* zeroed / NULL is a no-op */

/* Trim leading and trailing ASCII white space in place; returns the first kept character. */
char *sr_trim(char *s);

/* Folder part of path ("." when there is none; "/" for "/x"). malloc'ed; NULL on NOMEM. */
char *sr_path_dirname(const char *path);
/* dir + "/" + rel, or a copy of rel when rel is absolute or dir is NULL. malloc'ed. */
char *sr_path_join(const char *dir, const char *rel);
/* Last path component (points into path). */
const char *sr_path_basename(const char *path);
/* Last path component without its final extension ("a/b.c.flac" -> "b.c"). malloc'ed. */
char *sr_path_stem(const char *path);
/* 1 when path names a directory (following symlinks), 0 otherwise. */
int sr_path_is_dir(const char *path);
/* 1 when path names a readable regular file (following symlinks), 0 otherwise. */
int sr_path_is_file(const char *path);
/* 1 when name ends with suffix, compared ignoring ASCII case. */
int sr_ends_with_nocase(const char *name, const char *suffix);

/* Files below dir whose name ends with one of the suffixes (ASCII case ignored), searched
 * recursively (symlinks followed, at most 32 levels, hidden entries skipped), in strcmp order of
 * their paths. *paths is a malloc'ed array of malloc'ed strings; free with sr_paths_free. */
sr_status sr_find_files(const char *dir, const char *const *suffixes, size_t n_suffixes,
                        char ***paths, size_t *n);
void sr_paths_free(char **paths, size_t n);

/* Sort n records of size bytes by the `char *` member at id_off (strcmp order), stably, then
 * fail with SR_ERR_FORMAT when two share an id: "<where a> and <where b>: <what> "<id>"",
 * where `where` is the `char *` member at where_off (a "file:line" string). */
sr_status sr_sort_unique(void *base, size_t n, size_t size, size_t id_off, size_t where_off,
                         const char *what);

/* Append s as a JSON string literal (quotes included): '"', '\\' and control characters are
 * escaped, other bytes copied, and any ill-formed UTF-8 among them made U+FFFD
 * (sr_strbuf_utf8_repair), so that the text stays JSON. */
sr_status sr_json_append_string(sr_strbuf *b, const char *s);

/* Write n bytes to path atomically: a temporary file in the same folder, fsync'ed, then
 * rename()d over path, so readers see the old or the new contents, never a partial file. */
sr_status sr_write_file_atomic(const char *path, const char *data, size_t n);

#endif /* SR_EVAL_TEXTIO_H */
