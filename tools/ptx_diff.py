#!/usr/bin/env python3
"""Compare two PTX builds entry point by entry point.

Usage: ptx_diff.py OLD.ptx NEW.ptx [--show NAME]

Each entry point (and each `.func` helper) is normalised before comparing:
its own name in parameter names, LLVM's per-function label numbers
(`$L__BB<function>_<block>`), the module-wide numbers of call sequences
and local depots (`callseq N`, `__local_depotN`) and mangled helper names (`_ZN...E`, whose
paths and hashes change when code moves between modules) are replaced by
neutral tokens. So two entries compare equal when their instructions,
registers and control flow are the same, whatever module the code lives in.
Prints, for the entries of both builds: how many are identical, which
differ (with their instruction counts), and which exist in only one.
"""
import re
import sys
import difflib

# Mangled helper names, legacy (`_ZN...E`) or v0 (`_R...`): their module
# paths and crate hashes change when code moves.
MANGLED = re.compile(r"_ZN[0-9A-Za-z_$.]+?E\b|_R[0-9A-Za-z_]+")
LABEL = re.compile(r"\$L__BB\d+_(\d+)")
# Call sequences and local-memory depots are numbered across the whole
# module: a kernel added before renumbers those of every one after it.
CALLSEQ = re.compile(r"callseq \d+")
DEPOT = re.compile(r"__local_depot\d+")


def functions(text):
    """{name: body} of every `.entry` and `.func` definition."""
    result, current, depth, name = {}, [], 0, None
    for line in text.splitlines():
        if name is None and depth == 0:
            match = re.match(r"(?:\.visible |\.weak )?\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$.]+)", line)
            if match:
                name = match.group(2)
                current = []
        if name is not None:
            current.append(line)
        depth += line.count("{") - line.count("}")
        if name is not None and depth == 0 and line.strip().startswith("}"):
            result[name] = "\n".join(current)
            name = None
        elif name is not None and depth == 0 and line.rstrip().endswith(";") and len(current) > 1 and "{" not in "".join(current):
            # a declaration, not a definition
            name = None
    return result


def normalise(name, body):
    body = body.replace(name, "ENTRY")
    body = LABEL.sub(r"BB_\1", body)
    body = CALLSEQ.sub("callseq N", body)
    body = DEPOT.sub("__local_depot", body)
    symbols = {}
    def rename(match):
        return symbols.setdefault(match.group(0), f"HELPER{len(symbols)}")
    return MANGLED.sub(rename, body)


def instructions(body):
    return sum(1 for line in body.splitlines() if line.startswith("\t") and line.strip().endswith(";") and not line.strip().startswith("."))


def main():
    old_path, new_path = sys.argv[1], sys.argv[2]
    show = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--show" else None
    old = {k: v for k, v in functions(open(old_path).read()).items()}
    new = {k: v for k, v in functions(open(new_path).read()).items()}
    def key(name):
        # A helper by the last identifier of its path and its type suffix.
        if name.startswith("_R"):
            words = re.findall(r"\d+([A-Za-z_][A-Za-z_0-9]*)", name)
            return "helper:" + (words[-1] if words else name) + ":" + name.rstrip("_")[-6:-4]
        return name
    old_by = {key(k): (k, v) for k, v in old.items()}
    new_by = {key(k): (k, v) for k, v in new.items()}
    same, changed = [], []
    for k in sorted(old_by.keys() & new_by.keys()):
        (on, ob), (nn, nb) = old_by[k], new_by[k]
        a, b = normalise(on, ob), normalise(nn, nb)
        if a == b:
            same.append(k)
        else:
            changed.append((k, instructions(ob), instructions(nb)))
        if show and k == show:
            sys.stdout.writelines(difflib.unified_diff(a.splitlines(True), b.splitlines(True), "old", "new", n=2))
    print(f"identical after normalisation: {len(same)}")
    print(f"changed: {len(changed)}")
    for k, a, b in changed:
        print(f"  {k}: {a} -> {b} instructions")
    only_old = sorted(old_by.keys() - new_by.keys())
    only_new = sorted(new_by.keys() - old_by.keys())
    print(f"only in {old_path}: {len(only_old)}")
    for k in only_old:
        print(f"  {k}")
    print(f"only in {new_path}: {len(only_new)}")
    for k in only_new:
        print(f"  {k}")


if __name__ == "__main__":
    main()
