#!/usr/bin/env python3
"""Regenerate the golden fixture for the text normalizers (tests/test_normalizer.c).

Runs openai-whisper's EnglishTextNormalizer (srkit's `whisper_en`) and BasicTextNormalizer
(srkit's `basic`, default arguments) on a list of varied inputs and stores one JSON object per
line in tests/fixtures/normalizer_golden.jsonl:
    {"in": INPUT, "whisper_en": EXPECTED, "basic": EXPECTED}
The first line is a header object {"meta": {...}} with the package versions.

Inputs: the references of shared/data/librispeech-sample/transcripts.txt (as written and in
sentence case), hand-written Whisper-style outputs (punctuation, digits, currency, percentages,
ordinals, years, decimals, contractions, hyphens, British spellings, brackets, fillers,
accented names, unicode quotes and dashes, empty and whitespace-only strings), and a generated
block of spelled-out numbers. Every input is unique; the script fails if there are fewer than 300
or if the reference normalizer raises on any of them.

Run with the reference venv (scripts/venv_ref.sh):
    ${SRKIT_HOME:-~/.cache/srkit}/venv-ref/bin/python scripts/gen_golden_normalizer.py
"""
import argparse
import importlib.metadata as md
import json
import os
import sys

from whisper.normalizers import BasicTextNormalizer, EnglishTextNormalizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HANDWRITTEN = [
    # empty, whitespace, control characters
    "", " ", "   ", "\t", "\n", " \t\n\r ", "\u00a0", "a\u00a0b", "a\u2003b\u3000c", "x\u200by",
    "  leading and trailing  ", "many     inner\t\tspaces\nand\nlines",
    # punctuation and casing
    "Hello, world!", "HELLO WORLD", "Hello... is anyone there?", "Wait—what?!", "Yes; no: maybe.",
    "It's 5 o'clock.", "Well, well, well.", "The end.", "e.g. this, i.e. that", "U.S.A.",
    "a.b.c", "Mr. Smith went to Washington.", "Mrs. Jones and Dr. Who", "St. Louis, Missouri",
    "Prof. Xavier and Capt. Kirk", "Gen. Patton, Sen. Smith, Rep. Jones", "Gov. Brown, Pres. Lincoln",
    "Rev. King, Hon. Judge, Asst. Manager", "Assoc. Director Lt. Dan Col. Sanders",
    "John Smith Jr. and John Smith Sr.", "Esq. at law", "Ald. Brown", "mister rogers",
    "Mister Rogers' Neighborhood", "missus doubtfire", "doctor strange",
    # brackets, parentheses, fillers
    "[MUSIC] Welcome back.", "<unk> the cat", "He said (quietly) that it was fine.",
    "[inaudible] and then (laughs) we left", "text [unclosed bracket", "text (unclosed paren",
    "empty () parens", "nested [a [b] c] d", "a <b> c [d] e (f) g", "(one) (two)", "((double))",
    "[Applause] [Laughter]", "<|endoftext|> done", "so (um) yes", "]odd[ order)(",
    "Hmm, I think so.", "Uh, um, well...", "mm hmm", "Mhm. Mmm. Hmmm.", "umbrella and human",
    "uh-huh", "I um, I uh, don't know", "HMM", "mm-hmm", "hum ho hm",
    # contractions
    "I won't do it.", "You can't be serious.", "Let's go!", "It ain't over.", "Y'all come back now.",
    "I wanna go.", "You gotta see this.", "We're gonna win.", "I'ma head out.", "Imma head out.",
    "I woulda, coulda, shoulda.", "Yes ma'am.", "I'd been there.", "She's been busy.",
    "He'd gone home.", "It's gone.", "They'd done it.", "He's got a car.", "She's done.",
    "I don't know.", "They're here.", "It's mine.", "I'd like that.", "We'll see.", "We've won.",
    "I'm tired.", "isn't it", "wouldn't've", "o'clock", "rock 'n' roll", "the '90s", "James's book",
    "the dogs' bowls", "I 'm here", "you 're welcome", "don ' t", "can't't", "won'tcha",
    "Don’t stop believin’", "It’s “quoted” text", "‘single’ quotes", "«guillemets»",
    "'tis the season", "ol' man river",
    # numbers: cardinal
    "one", "two three", "twenty five", "twenty-five", "one hundred", "one hundred and one",
    "a hundred", "hundred", "two thousand and twenty", "nineteen ninety", "nineteen eighty four",
    "two thousand nineteen", "one million", "three million five hundred thousand",
    "seven billion people", "a trillion dollars", "twelve", "fifteen", "ninety nine",
    "one oh one", "oh seven", "zero zero seven", "double oh seven", "triple three",
    "double five two", "triple nine", "double trouble", "one two three four", "forty two",
    "sixty sixty", "eleven twelve", "one thousand two hundred thirty four",
    "five thousand and sixty", "nine hundred ninety nine thousand", "ten ten ten",
    "one decillion", "a quadrillion", "two hundred million", "thirty thousand",
    "four score and seven years ago", "Catch twenty two", "Apollo eleven", "route sixty six",
    "zero", "oh", "o", "zero point five", "point five", "one point five", "three point one four",
    "one point oh five", "two and a half", "five and a half million", "and a half",
    "one and a half hours", "a half", "the other half", "half past two", "two point",
    "point", "twenty point", "one point two point three", "seven point two five",
    "one two point five", "fifty and a half and a half", "a hundred and a half",
    # numbers: ordinals and plurals
    "first", "second place", "third time", "fourth of july", "the fifth element",
    "twenty first century", "twenty-first", "one hundredth", "the thousandth time",
    "millionth", "the nineteenth century", "the 19th century", "the 1st and the 2nd",
    "3rd street", "the 4 th", "ninth", "nineth", "twelfth night", "twentieth century fox",
    "the fortieth", "the sixties", "the nineteen sixties", "the 1960s", "in the '60s",
    "ones and twos", "sixes and sevens", "hundreds of people", "thousands", "millions of stars",
    "the seventies and eighties", "zeroth law", "one hundred and first", "two thousandth",
    "three hundred twenty first", "a hundred thousandths",
    # digits
    "1", "12", "123", "1,000", "1,000,000", "10,5", "1,2,3", "3.14", "3.14159", "0.5", ".5",
    "5.", "1.2.3.4", "192.168.0.1", "1990s", "2020", "in 2020, we", "42nd street", "Area 51",
    "7-Eleven", "9/11", "24/7", "50-50", "1-2-3", "1 2 3", "007", "00", "1e5", "3x4", "a1b2c3",
    "R2D2", "C3PO", "mp3", "4k video", "covid19", "10am", "10 am", "5pm", "10:30", "12:00 p.m.",
    "the year 1999", "1999 and 2000", "1 one", "ones", "1s", "the 1 and only", "one of a kind",
    "No. 1", "#1 hit", "number one", "page 1 of 10", "v1.2", "1.5 million", "2.5 billion",
    "100 thousand", "1 million", "3 hundred", "5 thousand and 6", "minus five", "negative ten",
    "plus two", "positive three", "minus", "plus", "minus sign", "-5 degrees", "+5", "+-5",
    "minus 5", "five minus three", "minus and plus",
    # currency and percentages
    "$5", "$5.50", "$0.50", "$0.05", "$20 million", "twenty dollars", "twenty five dollars",
    "a dollar", "one dollar", "five cents", "a cent", "five dollars and fifty cents",
    "five dollars and five cents", "€10", "ten euros", "£3", "three pounds", "3 pounds",
    "two pounds fifty", "100%", "5 percent", "five percent", "fifty per cent",
    "per cent", "percent", "50 per", "per capita", "fifty per capita", "%", "5%", "a%",
    "100 % sure", "25.5%", "¢50", "50¢", "$", "$$5", "5$", "US$5", "¥500", "₹100", "$ 5",
    "2 dollars and 7 cents", "$2 and ¢7", "$2 ¢7", "$0.5", "$0x05", "dollars", "cents",
    "the pound", "euro zone",
    # hyphens and dashes
    "well-known", "state-of-the-art", "twenty-twenty vision", "e-mail", "co-operate",
    "self-esteem", "re-enter", "long—dash", "en–dash", "minus−sign", "a - b", "a -- b",
    "x-ray", "t-shirt", "mid-1990s", "pre-war", "anti-inflammatory",
    # British spellings
    "colour", "The colour of honour", "organisation", "organised labour", "centre",
    "theatre", "analyse", "analysed", "defence", "licence", "travelled", "traveller",
    "cancelled", "favourite", "neighbour", "neighbourhood", "grey", "programme",
    "catalogue", "dialogue", "aluminium", "manoeuvre", "paediatric", "oestrogen",
    "archaeology", "archaeological", "ageing", "jewellery", "pyjamas", "tyre", "kerb",
    "mould", "plough", "cheque", "sceptical", "moustache", "realise", "realised",
    "apologise", "recognise", "flyer", "flier", "flyer / flier", "COLOUR", "Colour's",
    "colours", "honourable", "behaviour", "humour", "rumour", "vapour", "armour", "harbour",
    # symbols
    "a & b", "a + b = c", "x * y", "a/b", "path/to/file", "user@example.com",
    "https://example.com", "#hashtag", "@mention", "50°F", "©2020", "Brand™", "Name®",
    "→ arrow", "• bullet", "a | b", "~tilde~", "back\\slash", "under_score", "caret^",
    "`backtick`", "{braces}", "a = b", "1 + 1 = 2", "x²", "H₂O", "½ cup", "¾", "…", "a…b",
    "ﬁne ﬂower", "Ｆｕｌｌｗｉｄｔｈ", "①②③", "Ⅻ", "ǅ", "ﬀ",
    # accented names and non-English letters
    "José García", "Zoë", "naïve café", "Beyoncé", "Müller", "Dvořák", "Ångström", "Øresund",
    "Ærø", "straße", "STRASSE", "Œuvre", "Łódź", "Đorđe", "Þór", "façade", "crème brûlée",
    "São Paulo", "Renée Zellweger", "Chloë Grace Moretz", "Jalapeño", "Señor", "Ñandú",
    "İstanbul", "ΣΟΦΟΣ", "ΟΔΟΣ's way", "ΚΑΛΟΣ'ΕΙΝΑΙ", "ΣΑΣ. Σ", "Οδυσσέας", "Москва", "Ελληνικά", "日本語", "中文 text", "한국어",
    "עברית", "العربية", "हिन्दी", "ไทย", "٣ apples", "Ⅷ chapter", "Ǆemal",
    # whisper-style segments
    " And so, my fellow Americans, ask not what your country can do for you, ask what you can do for your country.",
    " I have a dream that one day this nation will rise up.",
    " The meeting is at 3:30 p.m. on March 3rd, 2021.",
    " We sold 1,234 units at $19.99 each, a 15% increase.",
    " In 1492, Columbus sailed the ocean blue.",
    " Call me at 555-1234.",
    " The temperature was -5°C, i.e. twenty-three degrees Fahrenheit.",
    " Chapter 1: The Beginning.",
    " It cost about £2.50, roughly €3.",
    " He finished in 2nd place, 0.3 seconds behind.",
    " [Music] Thanks for watching!",
    " (Speaking in foreign language)",
    " ♪ La la la ♪",
    " So, uh, I was like, you know, whatever.",
    " \"Quoted,\" she said.",
    " The CEO's 2019 report showed $3.2 billion in revenue.",
    " Version 2.0 was released on 1/15/2020.",
    " Flight AA100 departs at 6:45.",
    " The score was 21-14.",
    " About 7.5% of people.",
    " One hundred and twenty-three thousand, four hundred and fifty-six.",
    " Two thousand and one: A Space Odyssey.",
    " The year nineteen hundred.",
    " They're over there with their dog; it's theirs.",
    " He said, 'I can't believe it's not butter.'",
    " What's up, doc?",
    " The U.K. and the U.S. signed it.",
    " Ph.D. students at M.I.T.",
    " Dr. Martin Luther King Jr. Day",
    " Seventy-six trombones led the big parade.",
    " At twenty past nine, the fourth train arrived.",
    " The first, second, and third runners.",
    " I paid twenty dollars and fifty cents.",
    " I paid $20 and 50 cents.",
    " one hundred percent sure",
    " Pi is three point one four one five nine.",
    " The recipe needs two and a half cups of flour.",
    " My number is four one five, five five five, one two one two.",
    " Double-O-Seven.",
    " It was the best of times, it was the worst of times.",
    " Honour thy father and thy mother.",
    " The organisation's behaviour was favourable.",
    " We travelled to the theatre in the centre of town.",
    " Hmm. Let me think. Um, okay.",
    " [BLANK_AUDIO]",
    " (upbeat music)",
    " <|nospeech|>",
    " - Hello? - Hi!",
    " -- I mean --",
    " Well... I don't know...",
    "WON'T CAN'T SHAN'T",
    "she'd've done it",
    "it's 1990's style",
    "over 9000!!!",
    "twenty twenty",
    "two thousand twenty two",
    "nineteen oh five",
    "the seventeen hundreds",
    "a thousand and one nights",
    "one in a million",
    "first and second and third",
    "one and two",
    "twenty and thirty",
    "hundred and hundred",
    "one thousand and",
    "and",
    "double",
    "triple",
    "double double",
    "point point",
    "per",
    "one per cent",
    "one per",
    "a.m. and p.m.",
    "the 3 r d",
    "5 th grade",
    "10 s",
    "Se7en",
    "4ever",
    "twenty4seven",
    "a1",
    "1a",
    "e=mc²",
    # number machine corners: big values, digit strings times multipliers, prefixes
    "one decillion decillion", "twelve decillion",
    "nine nine nine nine nine nine nine nine nine nine nine nine nine nine nine nine nine nine nine nine nine nine thousand",
    "one two three four five six seven eight nine one two three four five six seven eight nine decillion",
    "point five million", "oh point five", "0 oh", "0 hundred", "0 hundredth", "$1.5 million",
    "one point $5", "minus $5", "1.5 thousandths", "oh point oh five thousand", "1.٣ million",
    "٣.٥", "1.50 hundred", "3.14159 thousand", "the 0.25 thousandth", "twenty oh five",
    "oh twenty three", "twenty double five", "double ten", "triple oh", "nineteen ten",
    "ten twenty", "hundred thousand million",
    "two hundred and fifty six thousand seven hundred and eighty nine", "one hundred one",
    "seven hundreds", "million millionth", "fifty fifth", "twenty one st", "5 percent percent",
    "minus minus five", "minus minus foo", "plus one", "positive", "$5 and ¢75",
    "£1 and 5 cents", "€0.99", "$0.999", "$10 ¢5x", "a 1s b", "11", "1.0", "10.0 hundred",
    "100.05 percent", "one point", "point hundred", "two and a half and a half",
    "and a half and a half", "six and a halfpenny", "AND A HALF dozen", "one and  a\thalf",
]


def librispeech_refs(path):
    refs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split(" ", 1)
            if len(parts) == 2:
                refs.append(parts[1])
    return refs


def number_block():
    """Spelled-out numbers in the patterns the number normalizer distinguishes."""
    ones = ["one", "two", "three", "five", "eight", "nine", "eleven", "thirteen", "nineteen"]
    tens = ["twenty", "forty", "fifty", "ninety"]
    mult = ["hundred", "thousand", "million", "billion"]
    out = []
    for t in tens:
        for o in ones[:4]:
            out.append(f"{t} {o}")
    for o in ones:
        for m in mult:
            out.append(f"{o} {m}")
    for m in mult:
        out.append(f"{m}s of them")
        out.append(f"the {m}th")
    for o in ones:
        out.append(f"{o}s")
    for t in tens:
        out.append(t.replace("y", "ies"))
        out.append(t.replace("y", "ieth"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(REPO, "..", "shared", "data"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures",
                                                  "normalizer_golden.jsonl"))
    args = ap.parse_args()

    refs = librispeech_refs(os.path.join(args.shared, "librispeech-sample", "transcripts.txt"))
    if len(refs) < 10:
        sys.exit(f"expected 10 LibriSpeech references, found {len(refs)}")
    inputs = []
    for r in refs:
        inputs.append(r)
        inputs.append(r.capitalize() + ".")
    inputs += HANDWRITTEN
    inputs += number_block()

    seen = set()
    unique = []
    for s in inputs:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    if len(unique) < 300:
        sys.exit(f"only {len(unique)} distinct inputs, want >= 300")

    en = EnglishTextNormalizer()
    basic = BasicTextNormalizer()
    meta = {
        "generator": "scripts/gen_golden_normalizer.py",
        "openai-whisper": md.version("openai-whisper"),
        "python": sys.version.split()[0],
        "n": len(unique),
    }
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(json.dumps({"meta": meta}, ensure_ascii=False) + "\n")
        for s in unique:
            row = {"in": s, "whisper_en": en(s), "basic": basic(s)}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(unique)} cases to {args.out}")


if __name__ == "__main__":
    main()
