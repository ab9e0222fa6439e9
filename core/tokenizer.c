/*
 * tokenizer.c — token ids to text for every model family, from the /tokenizer group.
 *
 * Load reads the stored pieces (pieces_data bytes cut by pieces_offsets) and the special
 * flags, checks the offsets, and converts every piece once into the bytes it prints ("text"):
 *   bytebpe        each character of the piece is one byte under GPT-2's byte->unicode map:
 *                  the printable bytes 33-126, 161-172 and 174-255 stand for themselves and
 *                  the other 68 bytes, in increasing order, for U+0100 + i. The inverse of that
 *                  map turns the piece back into raw bytes.
 *   sentencepiece  U+2581 (the word mark) prints as a space; a whole piece "<0xXX>" is the
 *                  single byte 0xXX (byte fallback); everything else is UTF-8 as stored.
 *   tekken         pieces are raw bytes already.
 *   pieces         pieces are UTF-8 text already.
 * Decoding then concatenates the texts of the non-special ids as bytes, so a multi-byte UTF-8
 * character split over several byte-level tokens comes out whole once all its tokens are
 * decoded together, and then makes the result well-formed UTF-8: bytes that form no character
 * (a partial streaming hypothesis ending inside one, a model's stray byte tokens) become
 * U+FFFD, one per maximal ill-formed subpart (sr_strbuf_utf8_repair), which is what the
 * references' decoders print (tiktoken's decode, errors="replace", for Whisper) and what JSON
 * output and the scorer's normalizer need.
 *
 * sr_tokenizer_find uses an open-addressing hash table (FNV-1a, linear probing, load <= 1/2)
 * built at load, so Whisper's 51864 pieces are indexed in one pass.
 */
#include "tokenizer.h"

#include <string.h>

typedef enum { TOK_BYTEBPE, TOK_SENTENCEPIECE, TOK_TEKKEN, TOK_PIECES } tok_kind;

static const char *const kind_names[] = {"bytebpe", "sentencepiece", "tekken", "pieces"};

struct sr_tokenizer {
    tok_kind kind;
    int n;               /* vocabulary size V */
    char *data;          /* stored piece bytes */
    int64_t *off;        /* [V + 1] offsets into data */
    unsigned char *special; /* [V], 1 = never printed */
    char *text;          /* printed bytes of every piece; == data for tekken / pieces */
    int64_t *text_off;   /* [V + 1]; == off for tekken / pieces */
    int32_t *hash;       /* [hash_cap] piece ids, -1 = empty slot */
    size_t hash_cap;     /* power of two */
};

/* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's word mark, in UTF-8. */
static const char word_mark[] = "\xE2\x96\x81";

void sr_tokenizer_free(sr_tokenizer *t)
{
    if (!t) return;
    if (t->text != t->data) free(t->text);
    if (t->text_off != t->off) free(t->text_off);
    free(t->data);
    free(t->off);
    free(t->special);
    free(t->hash);
    free(t);
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static sr_status build_hash(sr_tokenizer *t)
{
    size_t cap = 16;
    while (cap < (size_t)t->n * 2) cap <<= 1;
    t->hash = sr_malloc(cap * sizeof *t->hash, "tokenizer hash table");
    if (!t->hash) return SR_ERR_NOMEM;
    memset(t->hash, 0xff, cap * sizeof *t->hash); /* all -1 */
    t->hash_cap = cap;
    for (int32_t id = 0; id < t->n; id++) {
        const char *p = t->data + t->off[id];
        size_t len = (size_t)(t->off[id + 1] - t->off[id]);
        size_t slot = (size_t)fnv1a(p, len) & (cap - 1);
        for (;; slot = (slot + 1) & (cap - 1)) {
            int32_t o = t->hash[slot];
            if (o < 0) {
                t->hash[slot] = id;
                break;
            }
            /* A repeated piece keeps its lowest id, the one a lookup should return. */
            if ((size_t)(t->off[o + 1] - t->off[o]) == len && !memcmp(t->data + t->off[o], p, len))
                break;
        }
    }
    return SR_OK;
}

/* GPT-2's inverse map: byte_of[code point] = byte, -1 for code points no byte maps to. */
static void gpt2_inverse(int16_t byte_of[324])
{
    for (int i = 0; i < 324; i++) byte_of[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        byte_of[printable ? b : 256 + extra++] = (int16_t)b;
    }
}

/* One bytebpe piece back to raw bytes into dst (at most len bytes). Returns the byte count,
 * or -1 when the piece is not GPT-2 byte-level text (a code point outside the map, or bad
 * UTF-8). Every mapped code point is < U+0800, so only 1- and 2-byte UTF-8 occurs. */
static int64_t bytebpe_piece(const int16_t *byte_of, const unsigned char *p, size_t len,
                             char *dst)
{
    int64_t n = 0;
    for (size_t i = 0; i < len;) {
        unsigned cp;
        if (p[i] < 0x80) {
            cp = p[i++];
        } else if ((p[i] & 0xE0) == 0xC0 && i + 1 < len && (p[i + 1] & 0xC0) == 0x80) {
            cp = ((unsigned)(p[i] & 0x1F) << 6) | (unsigned)(p[i + 1] & 0x3F);
            i += 2;
            if (cp < 0x80) return -1; /* overlong encoding */
        } else {
            return -1;
        }
        if (cp >= 324 || byte_of[cp] < 0) return -1;
        dst[n++] = (char)byte_of[cp];
    }
    return n;
}

static int hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* One sentencepiece piece to printed bytes into dst (at most len bytes). */
static int64_t sentencepiece_piece(const unsigned char *p, size_t len, char *dst)
{
    if (len == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && p[5] == '>' &&
        hex_digit(p[3]) >= 0 && hex_digit(p[4]) >= 0) {
        dst[0] = (char)(hex_digit(p[3]) * 16 + hex_digit(p[4]));
        return 1;
    }
    int64_t n = 0;
    for (size_t i = 0; i < len;) {
        if (i + 3 <= len && !memcmp(p + i, word_mark, 3)) {
            dst[n++] = ' ';
            i += 3;
        } else {
            dst[n++] = (char)p[i++];
        }
    }
    return n;
}

/* Printed bytes of every piece for the types that need a conversion. */
static sr_status build_text(sr_tokenizer *t, const char *path)
{
    if (t->kind == TOK_TEKKEN || t->kind == TOK_PIECES) {
        t->text = t->data;
        t->text_off = t->off;
        return SR_OK;
    }
    /* Both conversions only shrink a piece, so the stored size bounds the text size. */
    size_t total = (size_t)t->off[t->n];
    t->text = sr_malloc(total ? total : 1, "tokenizer text");
    t->text_off = sr_malloc(((size_t)t->n + 1) * sizeof *t->text_off, "tokenizer text offsets");
    if (!t->text || !t->text_off) return SR_ERR_NOMEM;
    int16_t byte_of[324];
    if (t->kind == TOK_BYTEBPE) gpt2_inverse(byte_of);
    int64_t pos = 0;
    for (int id = 0; id < t->n; id++) {
        const unsigned char *p = (const unsigned char *)t->data + t->off[id];
        size_t len = (size_t)(t->off[id + 1] - t->off[id]);
        t->text_off[id] = pos;
        int64_t m = t->kind == TOK_BYTEBPE ? bytebpe_piece(byte_of, p, len, t->text + pos)
                                           : sentencepiece_piece(p, len, t->text + pos);
        if (m < 0) {
            /* A special piece is never printed, so its spelling does not matter. */
            if (t->special[id]) continue;
            return sr_error(SR_ERR_FORMAT,
                            "%s: /tokenizer/pieces_data: piece %d (\"%.*s\") is not GPT-2 "
                            "byte-level text", path, id, (int)SR_MIN(len, 40), (const char *)p);
        }
        pos += m;
    }
    t->text_off[t->n] = pos;
    return SR_OK;
}

/* Read one 1-D dataset, taking its data; SR_ERR_FORMAT when it is not 1-D. */
static sr_status read_1d(sr_h5 *f, const char *path, sr_dtype want, void **data, int64_t *n)
{
    sr_tensor tt;
    memset(&tt, 0, sizeof tt);
    sr_status st = sr_h5_dataset(f, path, want, &tt);
    if (st) return st;
    if (tt.ndim != 1) {
        int nd = tt.ndim;
        sr_tensor_free(&tt);
        return sr_error(SR_ERR_FORMAT, "%s: %s: %d dimensions, expected 1", sr_h5_path(f), path,
                        nd);
    }
    *n = tt.shape[0];
    *data = tt.data;
    tt.data = NULL;
    sr_tensor_free(&tt);
    return SR_OK;
}

static sr_status load_into(sr_h5 *f, sr_tokenizer *t)
{
    const char *path = sr_h5_path(f);
    const char *type = sr_h5_attr(f, "/tokenizer", "type");
    if (!type)
        return sr_error(SR_ERR_FORMAT,
                        "%s: /tokenizer: group or its string attribute \"type\" is missing", path);
    size_t k = 0;
    while (k < SR_ARRAY_LEN(kind_names) && strcmp(type, kind_names[k])) k++;
    if (k == SR_ARRAY_LEN(kind_names))
        return sr_error(SR_ERR_FORMAT,
                        "%s: /tokenizer attribute type = \"%s\": unknown; known types: bytebpe, "
                        "sentencepiece, tekken, pieces", path, type);
    t->kind = (tok_kind)k;

    void *p = NULL;
    int64_t n_data = 0, n_off = 0;
    sr_status st = read_1d(f, "/tokenizer/pieces_data", SR_I8, &p, &n_data);
    if (st) return st;
    t->data = p;
    if ((st = read_1d(f, "/tokenizer/pieces_offsets", SR_I64, &p, &n_off))) return st;
    t->off = p;
    if (n_off < 1 || n_off - 1 > INT32_MAX - 1)
        return sr_error(SR_ERR_FORMAT, "%s: /tokenizer/pieces_offsets: %lld entries, expected "
                        "V + 1 with 0 <= V < 2^31 - 1", path, (long long)n_off);
    t->n = (int)(n_off - 1);
    if (t->off[0] < 0)
        return sr_error(SR_ERR_FORMAT, "%s: /tokenizer/pieces_offsets: entry 0 is negative (%lld)",
                        path, (long long)t->off[0]);
    for (int i = 0; i < t->n; i++)
        if (t->off[i + 1] < t->off[i])
            return sr_error(SR_ERR_FORMAT,
                            "%s: /tokenizer/pieces_offsets: not monotonic at entry %d (%lld < "
                            "%lld)", path, i + 1, (long long)t->off[i + 1], (long long)t->off[i]);
    if (t->off[t->n] > n_data)
        return sr_error(SR_ERR_FORMAT,
                        "%s: /tokenizer/pieces_offsets: last offset %lld is past the end of "
                        "pieces_data (%lld bytes)", path, (long long)t->off[t->n],
                        (long long)n_data);

    int has_special = 0;
    if ((st = sr_h5_has_dataset(f, "/tokenizer/special", &has_special))) return st;
    if (has_special) {
        int64_t n_special = 0;
        if ((st = read_1d(f, "/tokenizer/special", SR_I8, &p, &n_special))) return st;
        t->special = p;
        if (n_special != t->n)
            return sr_error(SR_ERR_FORMAT, "%s: /tokenizer/special: %lld entries, vocabulary has "
                            "%d pieces", path, (long long)n_special, t->n);
        for (int i = 0; i < t->n; i++) t->special[i] = t->special[i] != 0;
    } else {
        t->special = sr_calloc((size_t)t->n + 1, 1, "tokenizer special flags");
        if (!t->special) return SR_ERR_NOMEM;
    }
    if ((st = build_text(t, path))) return st;
    return build_hash(t);
}

sr_status sr_tokenizer_load(sr_h5 *f, sr_tokenizer **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_tokenizer_load: out is NULL");
    *out = NULL;
    if (!f) return sr_error(SR_ERR_ARG, "sr_tokenizer_load: file handle is NULL");
    sr_tokenizer *t = sr_calloc(1, sizeof *t, "tokenizer");
    if (!t) return SR_ERR_NOMEM;
    sr_status st = load_into(f, t);
    if (st) {
        sr_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SR_OK;
}

int sr_tokenizer_size(const sr_tokenizer *t) { return t ? t->n : 0; }

const char *sr_tokenizer_type(const sr_tokenizer *t) { return t ? kind_names[t->kind] : NULL; }

int sr_tokenizer_is_special(const sr_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n && t->special[id];
}

const char *sr_tokenizer_piece(const sr_tokenizer *t, int32_t id, size_t *len)
{
    if (!t || id < 0 || id >= t->n) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = (size_t)(t->off[id + 1] - t->off[id]);
    return t->data + t->off[id];
}

int32_t sr_tokenizer_find(const sr_tokenizer *t, const char *piece)
{
    if (!t || !piece || !t->hash) return -1;
    size_t len = strlen(piece);
    for (size_t slot = (size_t)fnv1a(piece, len) & (t->hash_cap - 1);;
         slot = (slot + 1) & (t->hash_cap - 1)) {
        int32_t id = t->hash[slot];
        if (id < 0) return -1;
        if ((size_t)(t->off[id + 1] - t->off[id]) == len && !memcmp(t->data + t->off[id], piece, len))
            return id;
    }
}

/* A failed decode leaves out as it was. */
static sr_status decode_undo(sr_strbuf *out, size_t start, sr_status st)
{
    if (out->data) {
        out->len = start;
        out->data[start] = '\0';
    }
    return st;
}

sr_status sr_tokenizer_decode_bytes(const sr_tokenizer *t, const int32_t *ids, int n, sr_strbuf *out)
{
    if (!t) return sr_error(SR_ERR_ARG, "sr_tokenizer_decode: tokenizer is NULL");
    if (!out) return sr_error(SR_ERR_ARG, "sr_tokenizer_decode: out is NULL");
    if (n < 0) return sr_error(SR_ERR_ARG, "sr_tokenizer_decode: n = %d is negative", n);
    if (n > 0 && !ids) return sr_error(SR_ERR_ARG, "sr_tokenizer_decode: ids is NULL (n = %d)", n);
    /* All ids first, so a bad one leaves out untouched. */
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n)
            return sr_error(SR_ERR_ARG, "sr_tokenizer_decode: ids[%d] = %d is out of range "
                            "[0, %d)", i, (int)ids[i], t->n);
    size_t start = out->len;
    int first = 1;
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (t->special[id]) continue;
        const char *s = t->text + t->text_off[id];
        size_t len = (size_t)(t->text_off[id + 1] - t->text_off[id]);
        if (len == 0) continue;
        if (first && t->kind == TOK_SENTENCEPIECE && s[0] == ' ' &&
            t->off[id + 1] - t->off[id] >= 3 && !memcmp(t->data + t->off[id], word_mark, 3)) {
            /* The word mark of the first word is the one SentencePiece added, not text. */
            s++;
            len--;
        }
        first = 0;
        sr_status st = sr_strbuf_append(out, s, len);
        if (st) return decode_undo(out, start, st);
    }
    return SR_OK;
}

sr_status sr_tokenizer_decode(const sr_tokenizer *t, const int32_t *ids, int n, sr_strbuf *out)
{
    size_t start = out ? out->len : 0;
    sr_status st = sr_tokenizer_decode_bytes(t, ids, n, out); /* a failure left out as it was */
    if (st) return st;
    st = sr_strbuf_utf8_repair(out, start);
    return st ? decode_undo(out, start, st) : SR_OK;
}
