#!/usr/bin/env python3
"""Upward imports: a module that uses an item its containing module (an ancestor file) defines.

A folder's `mod.rs` (or a crate's `lib.rs`) is meant to be the room's table of contents: `mod`
lines, `pub use` re-exports and docs. A child reaching up for something its parent *implements*
(`use super::Config` where `struct Config` is written in `mod.rs`) is an upward import: the
parent's code belongs in a file of its own beside the child. Names the ancestor only re-exports
are not counted (they resolve to the sibling that defines them). Prints each upward import and
the count; `--max N` exits 1 above N.

    python3 scripts/check-upward.py [--max N] [ROOT]
"""
import importlib.util
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("cycles", HERE / "check-cycles.py")
cycles = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cycles)

DEF = re.compile(
    r"^(?:pub(?:\([\w:\s]+\))?\s+)?(?:(?:async|const|unsafe|extern\s+\"C\")\s+)*"
    r"(?:fn|struct|enum|trait|type|const|static|union)\s+(\w+)|^macro_rules!\s*(\w+)",
    re.M,
)


def defined(text):
    """Names an item at the file's top level defines (not re-exports, not `mod`)."""
    return {a or b for a, b in DEF.findall(text)}


def upward(root, top):
    files = cycles.crate_files(root)
    modules = set(files)
    text = {p: f.read_text() for p, f in files.items()}
    defs = {p: defined(t) for p, t in text.items()}
    found = set()
    for mp in files:
        if not mp:
            continue
        for here, seg in cycles.references(cycles.tokens(text[mp]), list(mp)):
            target = cycles.absolute(here, seg, modules)
            if not target:
                continue
            dest = tuple(target)
            while dest not in modules:
                dest = dest[:-1]
            if len(dest) >= len(mp) or mp[: len(dest)] != dest or len(target) <= len(dest):
                continue  # not an ancestor's file, or the module itself
            name = target[len(dest)]
            if name in defs[dest]:
                found.add((str(files[mp].relative_to(top)), str(files[dest].relative_to(top)), name))
    return found


def main():
    args = sys.argv[1:]
    limit = None
    if args[:1] == ["--max"]:
        limit, args = int(args[1]), args[2:]
    top = Path(args[0] if args else HERE.parent)
    roots = [top / "src" / "lib.rs", top / "src" / "main.rs"] + sorted(top.glob("crates/*/src/lib.rs"))
    found = set()
    for root in roots:
        if root.exists():
            found |= upward(root, top)
    for child, parent, name in sorted(found):
        print(f"{child} -> {parent}: {name}")
    print(f"{len(found)} upward import(s)")
    return 1 if limit is not None and len(found) > limit else 0


if __name__ == "__main__":
    sys.exit(main())
