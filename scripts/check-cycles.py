#!/usr/bin/env python3
"""Module cycles in src/ and crates/*/src: exits 1 if there is any.

Each crate root (lib.rs, main.rs) is followed through its `mod name;` lines. An edge is a
`use crate::..`, a `crate::..` path in code, or a `super::`/`self::` path that leaves its file
(comments and strings skipped; a path through a name the crate root re-exports goes to the
module it comes from). A path to an ancestor's file (`super::Name` in a child) is no edge: a
child is part of the module that declares it; `super::sibling::..` is. Two graphs per crate:
top-level modules, and the files inside each top-level module folder. Every strongly connected
component with more than one node is printed with the edges that tie it.

    python3 scripts/check-cycles.py [ROOT]
"""
import re
import sys
from pathlib import Path

TOKEN = re.compile(
    r'//[^\n]*|/\*|b?r(#*)"|b?"(?:\\.|[^"\\])*"|b?\'(?:\\.|[^\'\\])\'|'
    r"\$?\bcrate\b|\bsuper\b|\bself\b|\bmod\b|\buse\b|\w+|::|[{};,*]|\S",
    re.S,
)


def tokens(text):
    """Rust tokens that matter here: no comments, strings or chars."""
    i, out = 0, []
    while True:
        m = TOKEN.search(text, i)
        if not m:
            return out
        t = m.group(0)
        if t == "/*":  # nested block comment
            depth, j = 1, m.end()
            while depth and j < len(text):
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            i = j
            continue
        if m.group(1) is not None:  # raw string
            end = text.find('"' + m.group(1), m.end())
            i = len(text) if end < 0 else end + 1 + len(m.group(1))
            continue
        i = m.end()
        if not t.startswith("//") and not t.startswith(("\"", "b\"", "'", "b'")):
            out.append(t)


def use_paths(toks, k):
    """The paths of the use tree starting at toks[k]; returns (paths, index after `;`)."""
    paths, prefix, stack, cur = [], [], [], []
    while k < len(toks) and toks[k] != ";":
        t = toks[k]
        if t == "{":
            stack.append(len(prefix))
            prefix = prefix + cur
            cur = []
        elif t in (",", "}"):
            if cur:
                paths.append(prefix + cur)
            cur = []
            if t == "}":
                prefix = prefix[: stack.pop()]
        elif t == "as":
            paths.append(prefix + cur)
            cur, k = [], k + 1
        elif t != "::":
            cur.append(t)
        k += 1
    if cur:
        paths.append(prefix + cur)
    return paths, k + 1


def references(toks, modpath):
    """(inline module path, path segments) of every use and qualified path in a file."""
    refs, inline, depth, k = [], [], 0, 0
    opened = []  # brace depth at which each inline module opened
    while k < len(toks):
        t = toks[k]
        if t == "mod" and k + 2 < len(toks) and toks[k + 2] == "{":
            inline.append(toks[k + 1])
            opened.append(depth + 1)
            depth, k = depth + 1, k + 3
            continue
        if t == "{":
            depth += 1
        elif t == "}":
            if opened and opened[-1] == depth:
                opened.pop()
                inline.pop()
            depth -= 1
        elif t == "use":
            paths, k = use_paths(toks, k + 1)
            refs += [(modpath + inline, p) for p in paths]
            continue
        elif re.match(r"\w", t) and k + 1 < len(toks) and toks[k + 1] == "::":
            if k == 0 or toks[k - 1] != "::":
                seg, j = [t], k + 1
                while j + 1 < len(toks) and toks[j] == "::" and re.match(r"\w", toks[j + 1]):
                    seg.append(toks[j + 1])
                    j += 2
                refs.append((modpath + inline, seg))
                k = j
                continue
        k += 1
    return refs


def absolute(here, seg, modules):
    """A path as segments from the crate root, or None for an outside crate."""
    if tuple(here + seg[:1]) in modules:
        return here + seg  # a child module, named from its parent
    if seg[0] == "crate":
        return seg[1:]
    if seg[0] == "self":
        return here + seg[1:]
    if seg[0] == "super":
        base = list(here)
        while seg and seg[0] == "super":
            base, seg = base[:-1], seg[1:]
        while seg and seg[0] == "self":
            seg = seg[1:]
        return base + seg
    return None


def crate_files(root):
    """module path (tuple) -> file, following `mod name;` from the crate root file."""
    files, todo = {(): root}, [((), root)]
    while todo:
        path, f = todo.pop()
        d = f.parent if f.name in ("lib.rs", "main.rs", "mod.rs") else f.with_suffix("")
        for name in re.findall(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?mod\s+(\w+)\s*;", f.read_text(), re.M):
            for cand in (d / f"{name}.rs", d / name / "mod.rs"):
                if cand.exists():
                    files[path + (name,)] = cand
                    todo.append((path + (name,), cand))
    return files


def sccs(nodes, edges):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def crate_cycles(root, top):
    files = crate_files(root)
    modules = set(files)
    text = {p: f.read_text() for p, f in files.items()}
    # names the crate root re-exports: `pub use module::{A, B}` -> A: (module,)
    reexport = {}
    for _, p in references(tokens(text[()]), []):
        if p and p[0] not in ("crate", "self", "super") and (p[0],) in modules and len(p) > 1:
            reexport[p[-1]] = p[:-1]
    edges, why = {}, {}

    def file_of(path):
        path = tuple(path)
        while path not in modules:
            path = path[:-1]
        return path

    for mp in files:
        if not mp:
            continue
        for here, seg in references(tokens(text[mp]), list(mp)):
            target = absolute(here, seg, modules)
            if not target:
                continue
            if (target[0],) not in modules:
                if target[0] not in reexport:
                    continue
                target = list(reexport[target[0]]) + target
            dest = file_of(target)
            if not dest or mp[: len(dest)] == dest:
                continue  # its own file, or an ancestor's (a child is part of its parent)
            if dest[0] != mp[0]:  # between top-level modules
                a, b = mp[0], dest[0]
            else:  # between the files of one module
                a, b = rel(files, mp, top), rel(files, dest, top)
            edges.setdefault(a, set()).add(b)
            why.setdefault((a, b), set()).add("::".join(seg))
    return edges, why


def rel(files, mp, top):
    return str(files[mp].relative_to(top))


def main():
    args = sys.argv[1:]
    top = Path(args[0] if args else Path(__file__).resolve().parent.parent)
    roots = [top / "src" / "lib.rs", top / "src" / "main.rs"] + sorted(top.glob("crates/*/src/lib.rs"))
    count = 0
    for root in roots:
        if not root.exists():
            continue
        edges, why = crate_cycles(root, top)
        label = str(root.relative_to(top))
        for comp in sccs(set(edges) | {b for v in edges.values() for b in v}, edges):
            count += 1
            inside = set(comp)
            print(f"cycle {count} in {label}: {len(comp)} nodes: {', '.join(comp)}")
            for a in comp:
                for b in sorted(edges.get(a, ()) & inside):
                    paths = sorted(why[(a, b)])
                    more = f" (+{len(paths) - 3} more)" if len(paths) > 3 else ""
                    print(f"  {a} -> {b}: {', '.join(paths[:3])}{more}")
    print(f"{count} module cycle(s)")
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main())
