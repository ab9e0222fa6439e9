#!/usr/bin/env python3
"""extract.py — a kernels/cuda/*.cu file rewritten for the host emulation (scripts/cuda_emu/run.sh):
shared memory taken from the emulated block (static for __shared__ arrays: blocks run one at a
time; the dynamic array points at the block's buffer), every kernel launch
`k<<<grid, block[, smem]>>>(args);` turned into an emu_launch call. Everything else, the kernels
and the host code building their arguments, is the file's own text."""
import re
import sys


def split_top(s):
    """s split at the commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    out.append(cur.strip())
    return out


src = open(sys.argv[1]).read()
src = src.replace('#include "../exp_poly.h"', '#include "exp_poly.h"')
src = re.sub(r"extern __shared__ ([\w ]+?) (\w+)\[\];", r"\1 *\2 = (\1 *)emu_smem;", src)
src = src.replace("__shared__", "static")
launch = re.compile(r"([\w:]+(?:<[^;<>]*>)?)<<<(.+?)>>>\((.*?)\);", re.S)


def repl(m):
    conf = split_top(m.group(2))
    smem = conf[2] if len(conf) > 2 else "0"
    return "emu_launch(%s, %s, %s, [&] { %s(%s); });" % (conf[0], conf[1], smem, m.group(1), m.group(3))


# inline PTX mma.sync: the emulated instruction (inc/cuda_impl.h)
src = re.sub(r'asm volatile\("mma\.sync\.aligned\.m16n8k16.*?"r"\(b1\)\);',
             "emu_mma_16816(d, a0, a1, a2, a3, b0, b1);", src, flags=re.S)
src, n = launch.subn(repl, src)
if n == 0:
    sys.exit("extract.py: no kernel launch found in " + sys.argv[1])
sys.stdout.write(src)
