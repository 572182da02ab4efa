#!/usr/bin/env bash
# Install what octopipe needs on a fresh Debian 12 machine: GStreamer 1.22, the mosquitto MQTT
# broker that the broker tests start and its mosquitto_sub client that docs/messages.md uses,
# PyGObject with GStreamer's typelibs (the GStreamer plugin's Python test) (apt),
# ONNX Runtime 1.31.1, NVRTC, the demo's Python pieces, maturin and pytest (pip). Safe to run
# again: it installs only what is missing.
#
#   bash scripts/setup.sh                  # the above
#   bash scripts/setup.sh --wheel release  # and build + install the Python module (import octopipe)
#   bash scripts/setup.sh --wheel dev      # the same from the test build, into target/pyenv
#                                          # (scripts/test.sh: it reuses what `cargo test`
#                                          # compiled, and leaves python3's own install alone)
#   bash scripts/setup.sh --plugin         # and build the GStreamer plugin (release:
#                                          # target/release/libgstoctopipe.so; scripts/env.sh
#                                          # then puts it on GST_PLUGIN_PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=""
plugin=""
case "${1:-}" in
  "") ;;
  --wheel) wheel=${2:?"--wheel takes release or dev"} ;;
  --plugin) plugin=1 ;;
  *) echo "usage: $0 [--wheel release|dev | --plugin]" >&2; exit 2 ;;
esac
case "$wheel" in
  ""|release|dev) ;;
  *) echo "setup: --wheel takes release or dev, not '$wheel'" >&2; exit 2 ;;
esac

apt_packages=(libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev gstreamer1.0-plugins-base
  gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav
  gstreamer1.0-tools gstreamer1.0-rtsp libgstrtspserver-1.0-dev pkg-config mosquitto mosquitto-clients openssl ca-certificates
  python3-gi gir1.2-gst-plugins-base-1.0)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: apt-get install ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! python3 - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
want = {"onnxruntime": "1.31.1", "nvidia-cuda-nvrtc": "13.0.88", "maturin": "1.16.0",
        "pytest": "9.2.0", "pytest-timeout": "2.4.0"}
sys.exit(0 if all(m.version(k) == v for k, v in want.items()) and m.version("onnx") and m.version("numpy") else 1)
PY
then
  echo "setup: pip install -r scripts/requirements.txt"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r scripts/requirements.txt
fi
if [ -n "$wheel" ]; then
  # The module links the library (crates/octopipe-python, pyo3 + maturin, one abi3 wheel for
  # CPython >= 3.9). `dev` builds the dev profile with the test profile's settings (opt-level 2)
  # and the `bench` feature the tests build with, so the library and its dependencies that
  # `cargo test --features bench` compiled are used as they are. (Not `--profile test`: cargo
  # builds a library under that profile as a test harness.)
  out="${CARGO_TARGET_DIR:-target}/wheels"
  args=(--release)
  [ "$wheel" = dev ] && { args=(--profile dev --features bench); export CARGO_PROFILE_DEV_OPT_LEVEL=2; }
  rm -f "$out"/octopipe-*.whl
  echo "setup: maturin build ${args[*]} (crates/octopipe-python)"
  maturin build --quiet "${args[@]}" --auditwheel skip -m crates/octopipe-python/Cargo.toml --out "$out"
  # `release` installs the module for python3; `dev` (the tests' build) into a virtual
  # environment of its own, target/pyenv (python3's packages seen through it), so that the
  # tests never replace a module the user installed.
  py=python3
  if [ "$wheel" = dev ]; then
    env_dir="${CARGO_TARGET_DIR:-target}/pyenv"
    [ -x "$env_dir/bin/python" ] || python3 -m venv --system-site-packages "$env_dir"
    py="$env_dir/bin/python"
  fi
  "$py" -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    --force-reinstall --no-deps "$out"/octopipe-*.whl
  "$py" -c 'import octopipe; print("setup: import octopipe", octopipe.__version__, "from", octopipe.__file__)'
fi
if [ -n "$plugin" ]; then
  echo "setup: cargo build --release -p octopipe-gst (the GStreamer plugin)"
  cargo build --release --quiet -p octopipe-gst
fi
echo "setup: ok"
