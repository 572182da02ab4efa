#!/usr/bin/env bash
# The test command: install what is missing, then check that modules import no circle
# (scripts/check-cycles.py), that no module takes more than 5 items from an ancestor file that
# implements them (scripts/check-upward.py: every mod.rs a table of contents), that the member crates' dependency trees hold only what their layer
# may (the core, CUDA and stages crates no GStreamer, ONNX Runtime, broker or CLI crate:
# scripts/check-core-deps.sh), that every test file is in a test
# binary (scripts/check-tests.py) and that the dev-dependencies change no feature of the library's
# dependencies (scripts/check-feature-unification.sh: the examples and tests reuse the library
# `cargo build` made), format, lint (with and without the `bench` feature; the GStreamer plugin's
# `analytics` feature type-checked only: it needs GStreamer >= 1.24), build-check the
# library without its `cli` feature, check the API docs and run every test of the library and of
# the member crates (with `bench`, so the GPU tests and the tools crate's benchmarks build too;
# the GStreamer plugin's too, whose gst-launch-1.0 tests load the libgstoctopipe.so that build
# makes); then
# build the Python module from that build, install it into a virtual environment of its own
# (target/pyenv, so that a module the user installed stays) and run its tests (pytest).
# Shared VisDrone data is taken from $OCTOPIPE_DATA (default ../shared/data); tests that need it,
# ONNX Runtime or a GPU say why when they skip (under CI=true a missing prerequisite fails).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/env.sh
python3 scripts/check-cycles.py
python3 scripts/check-upward.py --max 5
bash scripts/check-core-deps.sh
python3 scripts/check-tests.py
bash scripts/check-feature-unification.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo clippy --workspace --all-targets --quiet --features bench -- -D warnings
# The plugin's `analytics` feature (GstAnalyticsRelationMeta) needs GStreamer >= 1.24's
# libgstanalytics-1.0; CI has 1.22, so it is type-checked here (pkg-config skipped, nothing
# linked or run), in a target folder of its own so the normal build is not disturbed.
SYSTEM_DEPS_GSTREAMER_ANALYTICS_1_0_NO_PKG_CONFIG=1 \
  SYSTEM_DEPS_GSTREAMER_ANALYTICS_1_0_LIB=gstanalytics-1.0 \
  CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/analytics" \
  cargo clippy -p octopipe-gst --all-targets --features analytics --quiet -- -D warnings
cargo check -p octopipe --lib --no-default-features --quiet
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
cargo test -p octopipe -p octopipe-core -p octopipe-cuda -p octopipe-stages -p octopipe-sources \
  -p octopipe-onnx -p octopipe-pipeline -p octopipe-control -p octopipe-observe -p octopipe-gst \
  -p octopipe-tools -p octopipe-engine \
  --features bench
bash scripts/setup.sh --wheel dev
"${CARGO_TARGET_DIR:-target}/pyenv/bin/python" -m pytest -q -rs crates/octopipe-python
