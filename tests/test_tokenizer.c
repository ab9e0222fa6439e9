/*
 * test_tokenizer.c — token id -> text for every tokenizer type (suite core_tokenizer).
 *
 * The fixtures come from scripts/gen_tokenizer_fixtures.py; every expected string below is
 * worked out by hand from the piece lists written there (ids are positions in those lists),
 * except utf8_replace.txt's, which CPython's UTF-8 decoder wrote.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "../core/tokenizer.h"
#include "test.h"

static sr_tokenizer *load(const char *fixture)
{
    sr_h5 *f = NULL;
    sr_tokenizer *t = NULL;
    sr_status st = sr_h5_open_plain(test_fixture(fixture), &f);
    if (st == SR_OK) st = sr_tokenizer_load(f, &t);
    if (st != SR_OK) printf("\n      %s: %s", fixture, sr_last_error());
    sr_h5_close(f); /* the tokenizer keeps no reference to the file */
    return t;
}

/* Decode ids (raw: sr_tokenizer_decode_bytes) and compare with the expected bytes (which may
 * hold NUL or, raw, partial UTF-8). */
static void expect_as(int raw, const sr_tokenizer *t, const int32_t *ids, int n, const char *want,
                      size_t want_len, int line)
{
    sr_strbuf b = {0};
    sr_status st = raw ? sr_tokenizer_decode_bytes(t, ids, n, &b) : sr_tokenizer_decode(t, ids, n, &b);
    int ok = st == SR_OK && b.len == want_len && (want_len == 0 || !memcmp(b.data, want, want_len));
    if (!ok)
        printf("\n      line %d: status %d, got %zu bytes \"%.*s\", want %zu bytes \"%s\"", line,
               (int)st, b.len, (int)b.len, b.data ? b.data : "", want_len, want);
    CU_ASSERT(ok);
    sr_strbuf_free(&b);
}

#define expect(...) expect_as(0, __VA_ARGS__)
#define EXPECT_AS(raw, t, want, ...)                                                       \
    do {                                                                                   \
        static const int32_t ids_[] = {__VA_ARGS__};                                       \
        expect_as((raw), (t), ids_, (int)(sizeof ids_ / sizeof ids_[0]), (want),           \
                  sizeof(want) - 1, __LINE__);                                             \
    } while (0)
#define EXPECT(t, want, ...) EXPECT_AS(0, t, want, __VA_ARGS__)
#define EXPECT_RAW(t, want, ...) EXPECT_AS(1, t, want, __VA_ARGS__)

static void test_pieces(void)
{
    /* "<blank>" "hel" "lo" " wor" "ld" "é" "<eos>"; 0 and 6 special */
    sr_tokenizer *t = load("tokenizer_pieces.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(sr_tokenizer_size(t), 7);
    CU_ASSERT_STRING_EQUAL(sr_tokenizer_type(t), "pieces");
    EXPECT(t, "hello world", 1, 2, 3, 4);
    EXPECT(t, "hello", 0, 1, 0, 2, 6);
    EXPECT(t, "\xc3\xa9 wor", 5, 3);
    EXPECT(t, "", 0, 6);
    sr_tokenizer_free(t);
}

static void test_sentencepiece(void)
{
    /* 0 <unk> 1 <s> 2 </s> (special) 3 "▁hello" 4 "▁world" 5 "s" 6 <0x41> 7 <0xC3>
     * 8 <0xA9> 9 "▁" 10 "ab▁c" 11 <0x0a> 12 "<0xZZ>" */
    sr_tokenizer *t = load("tokenizer_sentencepiece.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_STRING_EQUAL(sr_tokenizer_type(t), "sentencepiece");
    EXPECT(t, "hello worlds", 1, 3, 4, 5, 2);        /* first word mark dropped, others spaces */
    EXPECT(t, "world hello", 4, 3);
    EXPECT(t, "A", 9, 6);                            /* lone "▁" first: its space is dropped */
    EXPECT(t, "A hello", 6, 3);                      /* a byte piece first keeps the next mark */
    EXPECT(t, "hello\xc3\xa9", 3, 7, 8);             /* byte fallback joins into "é" */
    EXPECT(t, "ab c", 10);                           /* a mark inside a piece is a space */
    EXPECT(t, "s\n", 5, 11);                         /* lower-case hex digits */
    EXPECT(t, "<0xZZ>", 12);                         /* not hex: an ordinary piece */
    EXPECT(t, "hello", 0, 3);                        /* skipped specials do not count as first */
    expect(t, NULL, 0, "", 0, __LINE__);            /* nothing to decode */
    sr_tokenizer_free(t);
}

static void test_tekken(void)
{
    /* 0 <unk> 1 <s> (special) 2 "Hi" 3 " there" 4 E2 82 5 AC 6 FF */
    sr_tokenizer *t = load("tokenizer_tekken.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_STRING_EQUAL(sr_tokenizer_type(t), "tekken");
    EXPECT(t, "Hi there", 1, 2, 3);
    EXPECT(t, " there\xe2\x82\xac", 3, 4, 5);        /* "€" split over two tokens */
    EXPECT(t, "Hi\xef\xbf\xbd", 2, 4);           /* a partial character: one U+FFFD */
    EXPECT_RAW(t, "Hi\xe2\x82", 2, 4);              /* its bytes, before the repair */
    EXPECT(t, "\xef\xbf\xbd", 6);                  /* FF is never UTF-8 */
    EXPECT(t, "\xef\xbf\xbd\xef\xbf\xbdHi", 6, 5, 2); /* two ill-formed parts, then text */
    EXPECT(t, "\xe2\x82\xac", 4, 5);              /* whole again: nothing replaced */
    sr_tokenizer_free(t);
}

/* sr_strbuf_utf8_repair against CPython's bytes.decode("utf-8", "replace") (the decode that
 * tiktoken prints), tests/fixtures/utf8_replace.txt: each "IN OUT" pair of hex strings, the
 * input appended after a well-formed prefix that must stay as it is. */
static int unhex(const char *h, char *out)
{
    int n = 0;
    if (!strcmp(h, "-")) return 0;
    for (; h[0] && h[1]; h += 2) {
        unsigned v;
        if (sscanf(h, "%2x", &v) != 1) return -1;
        out[n++] = (char)v;
    }
    return n;
}

static void test_utf8_repair(void)
{
    FILE *f = fopen(test_fixture("utf8_replace.txt"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char a[128], b[128], in[64], want[256];
    int n = 0, bad = 0;
    while (fscanf(f, "%127s %127s", a, b) == 2) {
        int ni = unhex(a, in), nw = unhex(b, want);
        CU_ASSERT_FATAL(ni > 0 && nw >= 0);
        sr_strbuf s = {0};
        CU_ASSERT_EQUAL(sr_strbuf_append(&s, "\xc3\xa9", 2), SR_OK); /* "é" before */
        CU_ASSERT_EQUAL(sr_strbuf_append(&s, in, (size_t)ni), SR_OK);
        CU_ASSERT_EQUAL(sr_strbuf_utf8_repair(&s, 2), SR_OK);
        int ok = s.len == (size_t)nw + 2 && !memcmp(s.data, "\xc3\xa9", 2) &&
                 !memcmp(s.data + 2, want, (size_t)nw) && s.data[s.len] == '\0';
        if (!ok && bad++ < 5) printf("\n      %s: got %zu bytes, want %s", a, s.len - 2, b);
        sr_strbuf_free(&s);
        n++;
    }
    fclose(f);
    printf("%d byte strings as CPython replaces them\n      ", n - bad);
    CU_ASSERT(n > 4000);
    CU_ASSERT_EQUAL(bad, 0);
    sr_strbuf e = {0}; /* nothing to repair: no allocation made */
    CU_ASSERT_EQUAL(sr_strbuf_utf8_repair(&e, 0), SR_OK);
    CU_ASSERT_PTR_NULL(e.data);
}

static void test_bytebpe(void)
{
    /* 0 <|endoftext|> (special) 1 "Hello" 2 "Ġworld" 3 "Ċ" 4 "Ã" 5 "©" 6 "Ń" 7 "!" */
    sr_tokenizer *t = load("tokenizer_bytebpe.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_STRING_EQUAL(sr_tokenizer_type(t), "bytebpe");
    EXPECT(t, "Hello world!\n", 1, 2, 7, 3);
    EXPECT(t, "Hello", 0, 1, 0);
    EXPECT(t, "Hello\xc3\xa9", 1, 4, 5);             /* C3 + A9 = "é" */
    EXPECT_RAW(t, "\xad", 6);                        /* U+0143 is byte 0xAD, the last remapped */
    EXPECT(t, "\xef\xbf\xbd", 6);                  /* ... which alone is no character */
    EXPECT(t, "\xef\xbf\xbd", 4);                  /* half of "é" alone: U+FFFD */
    EXPECT_RAW(t, "\xc3", 4);                        /* its byte, before the repair */
    EXPECT(t, " world", 2);                          /* no leading-space rule for bytebpe */
    /* Raw stored piece: the GPT-2 form, not the decoded bytes. */
    size_t len = 0;
    const char *p = sr_tokenizer_piece(t, 2, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT(len == 7 && !memcmp(p, "\xc4\xa0world", 7));
    sr_tokenizer_free(t);
}

static void test_gpt2_tiktoken(void)
{
    sr_tokenizer *t = load("tokenizer_gpt2.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(sr_tokenizer_size(t), 307);
    /* Ranks 0-255 are the 256 single bytes: each decodes to one byte, all distinct, in GPT-2's
     * order (33-126, 161-172, 174-255, then 0-32, 127-160, 173), before the UTF-8 repair. */
    int seen[256] = {0}, bad = 0;
    for (int32_t id = 0; id < 256; id++) {
        sr_strbuf b = {0};
        CU_ASSERT_EQUAL(sr_tokenizer_decode_bytes(t, &id, 1, &b), SR_OK);
        if (b.len != 1) bad++;
        else seen[(unsigned char)b.data[0]]++;
        int want = id < 94 ? 33 + id : id < 106 ? 161 + id - 94 : id < 188 ? 174 + id - 106
                 : id < 221 ? id - 188 : id < 255 ? 127 + id - 221 : 173;
        if (b.len == 1 && (unsigned char)b.data[0] != want) bad++;
        sr_strbuf_free(&b);
    }
    CU_ASSERT_EQUAL(bad, 0);
    for (int i = 0; i < 256; i++) CU_ASSERT_EQUAL(seen[i], 1);
    EXPECT(t, "\0", 188);                            /* byte 0 is GPT-2's U+0100 */
    EXPECT(t, " the and", 262, 290);                 /* merged ranks "Ġthe", "Ġand" */

    /* Multi-byte characters split over tokens, looked up by their GPT-2 spelling. */
    int32_t the = sr_tokenizer_find(t, "\xc4\xa0the");               /* "Ġthe" */
    int32_t e2_80 = sr_tokenizer_find(t, "\xc3\xa2\xc4\xa2");        /* "âĢ" = E2 80 */
    int32_t x99 = sr_tokenizer_find(t, "\xc4\xbb");                  /* "Ļ" = 99 */
    int32_t sp_e2_80 = sr_tokenizer_find(t, "\xc4\xa0\xc3\xa2\xc4\xa2"); /* "ĠâĢ" */
    int32_t x94 = sr_tokenizer_find(t, "\xc4\xb6");                  /* "Ķ" = 94 */
    int32_t dash = sr_tokenizer_find(t, "\xc4\xa0\xc3\xa2\xc4\xa2\xc4\xb6"); /* " —" */
    int32_t e6_97 = sr_tokenizer_find(t, "\xc3\xa6\xc4\xb9");        /* "æĹ" = E6 97 */
    int32_t xa5 = sr_tokenizer_find(t, "\xc2\xa5");                  /* "¥" = A5 */
    int32_t eot = sr_tokenizer_find(t, "<|endoftext|>");
    CU_ASSERT_EQUAL(the, 262);
    CU_ASSERT_EQUAL(x99, 247);
    CU_ASSERT_EQUAL(xa5, 98);
    CU_ASSERT_EQUAL(e2_80, 300);
    CU_ASSERT_EQUAL(sp_e2_80, 301);
    CU_ASSERT_EQUAL(dash, 302);
    CU_ASSERT_EQUAL(e6_97, 305);
    CU_ASSERT_EQUAL(eot, 306);
    CU_ASSERT(x94 >= 0 && x94 < 256);
    CU_ASSERT(sr_tokenizer_is_special(t, eot));
    CU_ASSERT(!sr_tokenizer_is_special(t, the));
    int32_t q[] = {the, e2_80, x99, eot};
    expect(t, q, 4, " the\xe2\x80\x99", 7, __LINE__);               /* " the’" */
    int32_t d1[] = {sp_e2_80, x94}, d2[] = {dash};
    expect(t, d1, 2, " \xe2\x80\x94", 4, __LINE__);                  /* " —" in two tokens */
    expect(t, d2, 1, " \xe2\x80\x94", 4, __LINE__);                  /* ... and in one */
    int32_t sun[] = {eot, e6_97, xa5, eot};
    expect(t, sun, 4, "\xe6\x97\xa5", 3, __LINE__);                  /* "日" */
    EXPECT(t, "\xc3\xa9 \xc3\xa9", 303, 304);                         /* "é", " é" */
    CU_ASSERT_EQUAL(sr_tokenizer_find(t, "no such piece"), -1);
    CU_ASSERT_EQUAL(sr_tokenizer_find(t, ""), -1);
    sr_tokenizer_free(t);
}

static void test_find_and_accessors(void)
{
    sr_tokenizer *t = load("tokenizer_sentencepiece.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(sr_tokenizer_find(t, "<unk>"), 0);
    CU_ASSERT_EQUAL(sr_tokenizer_find(t, "</s>"), 2);
    CU_ASSERT_EQUAL(sr_tokenizer_find(t, "\xe2\x96\x81world"), 4);
    CU_ASSERT_EQUAL(sr_tokenizer_find(t, "<0x0a>"), 11);
    CU_ASSERT_EQUAL(sr_tokenizer_find(t, " world"), -1); /* stored form only */
    CU_ASSERT_EQUAL(sr_tokenizer_find(t, "<0x0A>"), -1);
    CU_ASSERT_EQUAL(sr_tokenizer_find(t, NULL), -1);
    /* Every piece is found at its own id. */
    for (int32_t id = 0; id < sr_tokenizer_size(t); id++) {
        size_t len = 0;
        const char *p = sr_tokenizer_piece(t, id, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        char buf[64];
        CU_ASSERT_FATAL(len < sizeof buf);
        memcpy(buf, p, len);
        buf[len] = '\0';
        CU_ASSERT_EQUAL(sr_tokenizer_find(t, buf), id);
    }
    CU_ASSERT(sr_tokenizer_is_special(t, 1));
    CU_ASSERT(!sr_tokenizer_is_special(t, 3));
    CU_ASSERT(!sr_tokenizer_is_special(t, -1));
    CU_ASSERT(!sr_tokenizer_is_special(t, 13));
    size_t len = 99;
    CU_ASSERT_PTR_NULL(sr_tokenizer_piece(t, 13, &len));
    CU_ASSERT_EQUAL(len, 0);
    CU_ASSERT_PTR_NULL(sr_tokenizer_piece(t, -1, NULL));
    sr_tokenizer_free(t);
    sr_tokenizer_free(NULL);
}

static void test_out_of_range(void)
{
    sr_tokenizer *t = load("tokenizer_pieces.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    sr_strbuf b = {0};
    CU_ASSERT_EQUAL(sr_strbuf_append(&b, "keep", 4), SR_OK);
    int32_t hi[] = {1, 2, 7}, lo[] = {-1}, big[] = {1, 2147483647};
    TEST_ASSERT_ERR(sr_tokenizer_decode(t, hi, 3, &b), SR_ERR_ARG, "ids[2] = 7");
    TEST_ASSERT_ERR(sr_tokenizer_decode(t, lo, 1, &b), SR_ERR_ARG, "ids[0] = -1");
    TEST_ASSERT_ERR(sr_tokenizer_decode(t, big, 2, &b), SR_ERR_ARG, "ids[1] = 2147483647");
    TEST_ASSERT_ERR(sr_tokenizer_decode(t, NULL, 2, &b), SR_ERR_ARG, "ids");
    TEST_ASSERT_ERR(sr_tokenizer_decode(t, hi, -1, &b), SR_ERR_ARG, "n = -1");
    TEST_ASSERT_ERR(sr_tokenizer_decode(t, hi, 1, NULL), SR_ERR_ARG, "out");
    TEST_ASSERT_ERR(sr_tokenizer_decode(NULL, hi, 1, &b), SR_ERR_ARG, "tokenizer");
    /* Failed calls append nothing; a good one appends after what is there. */
    CU_ASSERT(b.len == 4 && !strcmp(b.data, "keep"));
    CU_ASSERT_EQUAL(sr_tokenizer_decode(t, hi, 2, &b), SR_OK);
    CU_ASSERT_STRING_EQUAL(b.data, "keephello");
    sr_strbuf_free(&b);
    sr_tokenizer_free(t);
}

static void expect_load_error(const char *fixture, sr_status want, const char *needle)
{
    sr_h5 *f = NULL;
    sr_status st = sr_h5_open_plain(test_fixture(fixture), &f);
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    sr_tokenizer *t = (sr_tokenizer *)&f; /* must be reset to NULL on failure */
    TEST_ASSERT_ERR(sr_tokenizer_load(f, &t), want, needle);
    CU_ASSERT_PTR_NULL(t);
    sr_h5_close(f);
}

static void test_bad_files(void)
{
    expect_load_error("tokenizer_bad_past.h5", SR_ERR_FORMAT, "pieces_offsets: last offset 9");
    expect_load_error("tokenizer_bad_order.h5", SR_ERR_FORMAT,
                      "pieces_offsets: not monotonic at entry 2");
    expect_load_error("tokenizer_bad_type.h5", SR_ERR_FORMAT, "\"wordpiece\"");
    expect_load_error("tokenizer_bad_missing.h5", SR_ERR_FORMAT, "pieces_offsets");
    expect_load_error("tokenizer_bad_special.h5", SR_ERR_FORMAT, "/tokenizer/special: 2 entries");
    expect_load_error("tokenizer_bad_bytebpe.h5", SR_ERR_FORMAT, "piece 1");
    expect_load_error("tokenizer_bad_nogroup.h5", SR_ERR_FORMAT, "/tokenizer");
    /* Every message names the file. */
    expect_load_error("tokenizer_bad_order.h5", SR_ERR_FORMAT, "tokenizer_bad_order.h5");
    sr_tokenizer *t = NULL;
    TEST_ASSERT_ERR(sr_tokenizer_load(NULL, &t), SR_ERR_ARG, "file");
}

void test_register_core_tokenizer(void)
{
    TEST_SUITE("core_tokenizer", {"pieces", test_pieces}, {"sentencepiece", test_sentencepiece},
               {"tekken", test_tekken}, {"utf8_repair", test_utf8_repair},
               {"bytebpe", test_bytebpe},
               {"gpt2_tiktoken", test_gpt2_tiktoken},
               {"find_and_accessors", test_find_and_accessors},
               {"out_of_range", test_out_of_range}, {"bad_files", test_bad_files});
}
