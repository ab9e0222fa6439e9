#!/usr/bin/env python3
"""gen_textgrid_fixtures.py — TextGrids written by a reference writer, for the TextGrid reader test.

praatio (the library MFA itself uses to write its TextGrids) writes one MFA-style TextGrid per
format (Praat's long and short text formats): a "words" interval tier whose gaps are filled with
empty intervals (silences, as MFA writes them), a "phones" tier and a point tier. praatio then
reads the files back, and the non-empty word intervals are stored as a CTM
(`utt 1 start duration word`), which the test compares with what srkit reads from the TextGrids.

Usage (reference venv, `make venv-ref`, plus `pip install praatio`):
    $SRKIT_HOME/venv-ref/bin/python scripts/gen_textgrid_fixtures.py [OUT_DIR]
OUT_DIR defaults to tests/fixtures/eval/textgrid/praatio.
"""
import os
import sys

from praatio import textgrid
from praatio.utilities.constants import Interval, Point

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/eval/textgrid/praatio"

# (start, end, label) of the spoken words; the gaps between them become "" intervals.
WORDS = {
    "mfa-long": [(0.32, 0.61, "the"), (0.61, 1.05, "café's"), (1.2, 1.71, '"hi"'),
                 (1.71, 2.333333, "twenty-five"), (2.5, 3.125, "o'clock")],
    "mfa-short": [(0.0, 0.4, "first"), (0.4, 0.95, "word"), (1.5, 1.99, "after"),
                  (1.99, 2.6, "silence")],
}
FORMATS = {"mfa-long": "long_textgrid", "mfa-short": "short_textgrid"}
XMAX = 3.5


def main():
    os.makedirs(OUT, exist_ok=True)
    ctm = []
    for utt, words in WORDS.items():
        tg = textgrid.Textgrid()
        tg.addTier(textgrid.PointTier("events", [Point(0.1, "click")], 0, XMAX))
        tg.addTier(textgrid.IntervalTier("words", [Interval(*w) for w in words], 0, XMAX))
        phones = [Interval(s, e, w[:1].upper()) for s, e, w in words]
        tg.addTier(textgrid.IntervalTier("phones", phones, 0, XMAX))
        path = os.path.join(OUT, utt + ".TextGrid")
        tg.save(path, format=FORMATS[utt], includeBlankSpaces=True)
        back = textgrid.openTextgrid(path, includeEmptyIntervals=True)
        for iv in back.getTier("words").entries:
            if iv.label.strip():
                ctm.append(f"{utt} 1 {iv.start!r} {iv.end - iv.start!r} {iv.label}")
    with open(os.path.join(OUT, "expected.ctm"), "w", encoding="utf-8") as f:
        f.write(";; words of the TextGrids in this folder as praatio reads them\n")
        f.write("\n".join(ctm) + "\n")


if __name__ == "__main__":
    main()
