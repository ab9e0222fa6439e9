#!/usr/bin/env python3
"""extract.py — kernels/cuda/attn.cu rewritten for the host emulation (scripts/cuda_emu/run.sh):
its dynamic shared memory taken from the emulated block, its kernel launches
`k<<<grid, threads, smem>>>(args);` turned into emu_launch calls. Everything else, the kernel
and the host code building its arguments, is the file's own text."""
import re
import sys

src = open(sys.argv[1]).read()
src = src.replace('#include "../exp_poly.h"', '#include "exp_poly.h"')
src = src.replace("extern __shared__ float smem[];", "float *smem = emu_smem;")
launch = re.compile(r"([\w:]+<[^;<>]*>)<<<([^,]+), ([^,]+), ([^>]+)>>>\(([^;]*)\);")
src, n = launch.subn(r"emu_launch(\2, \3, \4, [&] { \1(\5); });", src)
if n == 0:
    sys.exit("extract.py: no kernel launch found in " + sys.argv[1])
sys.stdout.write(src)
