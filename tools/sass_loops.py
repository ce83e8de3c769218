#!/usr/bin/env python3
"""The loops of one kernel's SASS and what each holds.

Usage: sass_loops.py PTX ENTRY [--arch sm_90] [--maxrregcount N]

Cuts ENTRY's module out of PTX (the PTX's shared items and the entry, as
the host loads a kernel), compiles it with `ptxas -v` and disassembles it
with `cuobjdump -sass` (both on PATH: the CUDA toolkit, or the
`nvidia-cuda-nvcc` and `nvidia-cuda-cuobjdump` wheels with
`nvidia-cuda-nvdisasm`, which run without a GPU), then prints ptxas's
register and spill line and, for each backward branch, the loop's length
in instructions and its opcodes by count: the steady steps of a warp
kernel are its innermost loops. `timewarp info --dump-ptx FILE` writes the
PTX a build embeds.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

ENTRY = re.compile(r"\s*\.(?:visible\s+)?\.entry\s+(\w+)")
SASS = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
BRANCH_TARGET = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)\s*$")
PREDICATE = re.compile(r"^@!?U?P\w+\s+")


def module(ptx, name):
    """The shared items of `ptx` (everything outside the entries) and `name`."""
    shared, entry, depth, body, found = [], None, 0, [], None
    for line in ptx.splitlines(keepends=True):
        if entry is None and depth == 0:
            match = ENTRY.match(line)
            if match:
                entry, body = match.group(1), []
        (shared if entry is None else body).append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and entry is not None and line.lstrip().startswith("}"):
            if entry == name:
                found = "".join(body)
            entry = None
    if found is None:
        sys.exit(f"sass_loops.py: no entry {name} in the PTX")
    return "".join(shared) + found


def loops(sass):
    """(first address, last address, instructions) of each backward branch."""
    code = [(int(m.group(1), 16), m.group(2).strip()) for m in map(SASS.match, sass.splitlines()) if m]
    index = {address: i for i, (address, _) in enumerate(code)}
    for i, (address, text) in enumerate(code):
        target = BRANCH_TARGET.search(text)
        if target and int(target.group(1), 16) <= address and int(target.group(1), 16) in index:
            start = int(target.group(1), 16)
            yield start, address, [t for _, t in code[index[start] : i + 1]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ptx")
    parser.add_argument("entry")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--maxrregcount", type=int)
    args = parser.parse_args()
    with open(args.ptx) as f:
        text = module(f.read(), args.entry)
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = os.path.join(tmp, "entry.ptx"), os.path.join(tmp, "entry.cubin")
        with open(ptx, "w") as f:
            f.write(text)
        command = ["ptxas", "-v", f"-arch={args.arch}", "-o", cubin, ptx]
        if args.maxrregcount:
            command[1:1] = ["-maxrregcount", str(args.maxrregcount)]
        report = subprocess.run(command, capture_output=True, text=True, check=True).stderr
        sass = subprocess.run(["cuobjdump", "-sass", cubin], capture_output=True, text=True, check=True).stdout
    for line in report.splitlines():
        if "Used" in line or "spill" in line:
            print(line.strip())
    for start, end, body in loops(sass):
        opcodes = collections.Counter(PREDICATE.sub("", t).split()[0].split(".")[0] for t in body)
        print(f"loop {start:#x}..{end:#x}: {len(body)} instructions")
        print("    " + ", ".join(f"{op} {n}" for op, n in opcodes.most_common()))


if __name__ == "__main__":
    main()
