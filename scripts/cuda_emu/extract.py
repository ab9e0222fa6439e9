#!/usr/bin/env python3
"""extract.py — a kernels/cuda/*.cu file rewritten for the host emulation (scripts/cuda_emu/run.sh):
shared memory taken from the emulated block (static for __shared__ arrays: blocks run one at a
time; the dynamic array points at the block's buffer), any kernel launch
`k<<<grid, block[, smem]>>>(args);` turned into an emu_launch call (the table launches through
sr_cuda_launch, which inc/cuda_impl.h defines). Everything else, the kernels and the host code
building their arguments, is the file's own text.

It also holds the file to the rule of overlapping launches (kernels/cuda/cuda_impl.h): the
first statement of every __global__ function is sr_pdl_enter(), or a prefetch of weights
(a call of a function named *prefetch*) and then sr_pdl_enter(); it stops naming the kernel
otherwise."""
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


def body_statements(text, start):
    """The first two top-level statements of the function body whose parameter list starts
    after index start (comments dropped)."""
    i, depth = start, 0
    while True:
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                break
        i += 1
    body = text[text.index("{", i) + 1:]
    body = re.sub(r"//[^\n]*|/\*.*?\*/", "", body, flags=re.S)
    stmts, depth, cur = [], 0, ""
    for ch in body:
        cur += ch
        depth += ch in "({["
        depth -= ch in ")}]"
        if ch == ";" and depth == 0:
            stmts.append(" ".join(cur.split()))
            cur = ""
            if len(stmts) == 2:
                break
    return stmts


kernel = re.compile(r"\s*(?:static\s+)?void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(")
for m in re.finditer(r"__global__", src):
    k = kernel.match(src, m.end())
    if not k:
        sys.exit("extract.py: %s: a __global__ not followed by a kernel's name at offset %d"
                 % (sys.argv[1], m.end()))
    name = k.group(1)
    first = body_statements(src, k.end() - 1)
    ok = first and first[0] == "sr_pdl_enter();"
    ok = ok or (len(first) == 2 and "prefetch" in first[0].split("(")[0] and first[1] == "sr_pdl_enter();")
    if not ok:
        sys.exit("extract.py: %s: kernel %s does not begin with sr_pdl_enter() (kernels/cuda/cuda_impl.h)"
                 % (sys.argv[1], name))
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
if n == 0 and "sr_cuda_launch(" not in src:
    sys.exit("extract.py: no kernel launch found in " + sys.argv[1])
sys.stdout.write(src)
