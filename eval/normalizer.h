/*
 * normalizer.h — text normalizers applied to references and hypotheses before scoring.
 *
 *   whisper_en  behaves like openai-whisper's EnglishTextNormalizer (the Open ASR Leaderboard
 *               standard): lower-casing, removal of bracketed/parenthesised text and filler
 *               words, contraction and title expansion, symbol and diacritic removal, English
 *               number normalization ("twenty five" -> "25", "five percent" -> "5%", "$20",
 *               ordinals, decimals), British -> American spellings from a map file, whitespace
 *               collapse. Checked against the Python original (tests/test_normalizer.c).
 *   basic       behaves like openai-whisper's BasicTextNormalizer with default arguments:
 *               lower-casing, bracket/parenthesis removal, NFKC, marks/symbols/punctuation to
 *               spaces, whitespace collapse (no trimming).
 *   none        the identity (no trimming or collapsing either).
 *
 * Input and output are UTF-8. Invalid UTF-8 input is SR_ERR_ARG with the byte offset; it never
 * crashes. Unicode properties (case mapping, NFKD/NFKC, general categories) come from
 * libunistring (Unicode 14.0, the same version as Python 3.11's unicodedata).
 *
 * The spelling map (whisper_en only) is openai-whisper's english.json, which is not part of
 * srkit: scripts/fetch_assets.sh extracts it from the pinned PyPI package into
 * ${SRKIT_HOME:-~/.cache/srkit}/assets/whisper_english.json.
 */
#ifndef SR_EVAL_NORMALIZER_H
#define SR_EVAL_NORMALIZER_H

#include <stddef.h>

#include "../core/sr.h"

typedef struct sr_normalizer sr_normalizer;

/* Names of the normalizers: "whisper_en", "basic", "none"; NULL past the end. For listings and
 * sr_error_unknown. Thread-safe. */
const char *sr_normalizer_name_at(size_t i);

/* Default location of the spelling map: "$SRKIT_HOME/assets/whisper_english.json", with
 * SRKIT_HOME defaulting to "$HOME/.cache/srkit". Writes a NUL-terminated path into buf.
 * Returns SR_ERR_ARG when neither SRKIT_HOME nor HOME is set or the path does not fit in cap
 * bytes. Thread-safe (reads the environment only). */
sr_status sr_normalizer_default_map_path(char *buf, size_t cap);

/* Create the normalizer called name ("whisper_en", "basic" or "none"; NULL means "whisper_en").
 * map_path: the British -> American spelling map (a JSON object of string -> string) for
 * whisper_en; NULL uses sr_normalizer_default_map_path(). Ignored by basic and none.
 * Errors: unknown name SR_ERR_ARG listing the known ones; map missing or unreadable SR_ERR_IO
 * naming the path and how to fetch it; map malformed SR_ERR_FORMAT naming the path and key.
 * On success *out is owned by the caller (sr_normalizer_free); on error *out is NULL.
 * Thread-safe. */
sr_status sr_normalizer_create(const char *name, const char *map_path, sr_normalizer **out);

/* The name the normalizer was created with ("whisper_en", "basic" or "none"). */
const char *sr_normalizer_name(const sr_normalizer *n);

/* Normalize the NUL-terminated UTF-8 string text. *out receives a malloc'ed NUL-terminated UTF-8
 * string (free with free()); it may be empty, and for whisper_en/basic may keep one leading or
 * trailing space exactly as the Python originals do (words are separated by single spaces, so
 * splitting on ' ' and skipping empty pieces gives the words).
 * Errors: NULL argument SR_ERR_ARG; invalid UTF-8 SR_ERR_ARG naming the byte offset;
 * SR_ERR_NOMEM. On error *out is NULL.
 * Thread-safe: a normalizer is read-only after create, so any number of threads may call this
 * on the same normalizer at once. */
sr_status sr_normalize(const sr_normalizer *n, const char *text, char **out);

/* Release a normalizer. NULL is a no-op. */
void sr_normalizer_free(sr_normalizer *n);

#endif /* SR_EVAL_NORMALIZER_H */
