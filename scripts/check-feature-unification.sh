#!/usr/bin/env bash
# Fails when a crate the library depends on gets other features with the dev-dependencies than
# without: then `cargo build` and the tests/examples each build the library (and every crate
# above the changed one) in their own variant. Fix by naming the crate with those features in
# Cargo.toml's [dependencies] (see the block there).
set -euo pipefail
cd "$(dirname "$0")/.."
tree() { cargo tree -p octopipe -e "$1" -f "{p}|{f}" --prefix none | sed 's/ (\*)$//' | sort -u; }
normal=$(tree normal)
dev=$(tree normal,dev)
# Each feature set a crate is built with in the normal tree must be one it is built with in the
# dev tree too (a crate may be built twice: for a proc-macro on the host, and for the target;
# crates only the dev-dependencies use, and new sets of them, are fine).
changed=$(python3 - "$normal" "$dev" <<'PY'
import sys
def sets(text):
    out = {}
    for line in text.splitlines():
        crate, _, feats = line.partition("|")
        out.setdefault(crate.strip(), set()).add(feats.strip())
    return out
normal, dev = sets(sys.argv[1]), sets(sys.argv[2])
for crate, f in sorted(normal.items()):
    if not f <= dev.get(crate, set()):
        print(f"{crate}: {sorted(f)} -> {sorted(dev.get(crate, []))}")
PY
)
if [ -n "$changed" ]; then
    echo "crates whose features the dev-dependencies change:" >&2
    echo "$changed" >&2
    exit 1
fi
echo "feature unification: the library builds the same with and without the dev-dependencies"
