/*
 * tokenizer.h — token id -> text for every family, from the /tokenizer group of the model
 * file (see weights.h for the layout). Types:
 *   "sentencepiece"  pieces with U+2581 (▁) word marks; <0xXX> byte-fallback pieces
 *   "bytebpe"        GPT-2 / Whisper byte-level BPE: each piece is written with GPT-2's
 *                    byte->unicode map; decoding maps the characters back to bytes
 *   "tekken"         Mistral Tekken: pieces are raw bytes
 *   "pieces"         pieces are plain UTF-8 text, concatenated as is
 * Special tokens (special[id] = 1) are never printed. Read-only after load; thread-safe.
 */
#ifndef SR_TOKENIZER_H
#define SR_TOKENIZER_H

#include "internal.h"
#include "weights.h"

typedef struct sr_tokenizer sr_tokenizer;

/* Load /tokenizer from f. Missing group or datasets, offsets not monotonic or past the data,
 * unknown type: SR_ERR_FORMAT naming the dataset. */
sr_status sr_tokenizer_load(sr_h5 *f, sr_tokenizer **out);
void sr_tokenizer_free(sr_tokenizer *t); /* NULL is a no-op */

int sr_tokenizer_size(const sr_tokenizer *t);
const char *sr_tokenizer_type(const sr_tokenizer *t);
int sr_tokenizer_is_special(const sr_tokenizer *t, int32_t id);
/* Raw stored bytes of a piece (not NUL-terminated); NULL for ids out of range. */
const char *sr_tokenizer_piece(const sr_tokenizer *t, int32_t id, size_t *len);
/* Exact lookup of a stored piece ("<|endoftext|>"); -1 when absent. */
int32_t sr_tokenizer_find(const sr_tokenizer *t, const char *piece);

/* Append the text of ids[0..n) to out (special tokens skipped, type rules applied; a leading
 * word-mark space of sentencepiece text is dropped), always well-formed UTF-8: bytes forming
 * no character become U+FFFD (sr_strbuf_utf8_repair). Ids out of range: SR_ERR_ARG; on any
 * error out is left as it was. */
sr_status sr_tokenizer_decode(const sr_tokenizer *t, const int32_t *ids, int n, sr_strbuf *out);
/* The same bytes before that repair (what the pieces spell, byte-level pieces one raw byte
 * each): for tests of the byte maps. */
sr_status sr_tokenizer_decode_bytes(const sr_tokenizer *t, const int32_t *ids, int n, sr_strbuf *out);

#endif /* SR_TOKENIZER_H */
