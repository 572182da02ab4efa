#!/usr/bin/env bash
# The test command: install what is missing, then format, lint (with and without the `bench`
# feature), check the API docs and run every test (with `bench`, so the GPU tests build too).
# Shared VisDrone data is taken from $OCTOPIPE_DATA (default ../shared/data); tests that need it,
# ONNX Runtime or a GPU say why when they skip (under CI=true a missing prerequisite fails).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/env.sh
cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
cargo clippy --all-targets --quiet --features bench -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
cargo test --features bench
