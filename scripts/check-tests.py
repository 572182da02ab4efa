#!/usr/bin/env python3
"""Every integration test file runs: the tests are one binary per area (Cargo.toml's
`autotests = false` and a `[[test]]` per tests/AREA/main.rs), so a file left at the top of
tests/, a folder without its `[[test]]`, or a file its main.rs does not name would be compiled by
no one. Exit 1 naming each."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
tests = root / "tests"
cargo = (root / "Cargo.toml").read_text()
bad = []
for f in sorted(tests.glob("*.rs")):
    bad.append(f"{f.relative_to(root)}: in no test binary; move it into tests/AREA/ and name it "
               "in that folder's main.rs (`mod NAME;`)")
for main in sorted(tests.glob("*/main.rs")):
    area = main.parent
    rel = main.relative_to(root).as_posix()
    if f'path = "{rel}"' not in cargo:
        bad.append(f"{rel}: no [[test]] in Cargo.toml names it")
    named = set(re.findall(r"^mod (\w+);", main.read_text(), re.M))
    for f in sorted(area.glob("*.rs")):
        if f.name != "main.rs" and f.stem not in named:
            bad.append(f"{f.relative_to(root)}: not named in {rel} (`mod {f.stem};`)")
for line in bad:
    print(line, file=sys.stderr)
sys.exit(1 if bad else 0)
