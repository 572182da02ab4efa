#!/usr/bin/env bash
# The GStreamer 1.26 suite: the plugin built with its `analytics` feature (GstAnalyticsRelationMeta)
# and its tests (the analytics ones among them) run against Debian 13's GStreamer 1.26, which this
# machine's Debian 12 (1.22) lacks.
#   bash scripts/gst126.sh            # as root (debootstrap, mount, chroot)
# 1. A Debian 13 (trixie) root made once with `debootstrap --variant=minbase` (Debian's own packages:
#    GStreamer 1.26's runtime and -dev packages, analyticsoverlay's `objectdetectionoverlay`, a C
#    toolchain) in $GST126_ROOT (default ~/.cache/octopipe/gst126-root, outside the clone: a
#    `cargo clean` or a fresh clone keeps it); made again when its package list changes.
# 2. The clone, ~/.cargo, ~/.rustup, the shared data and ONNX Runtime's folder bind-mounted into it
#    at their own paths; the host's toolchain (it runs on Debian 13's newer glibc) builds the
#    plugin's test binary in target/gst126 (a target folder of its own: its objects link against
#    1.26) and runs its tests: all of them, or those $GST126_TESTS names (`analytics::`: the
#    relation meta read back, `objectdetectionoverlay` drawing `octodetect`'s objects). Crates
#    come from the host's `cargo fetch`; nothing is downloaded inside.
# 3. Everything mounted is unmounted on every exit. One run at a time ($GST126_ROOT.lock).
# Each step's seconds are printed at the end. The tests run with CI=true: a missing prerequisite
# (shared data, ONNX Runtime, an element) fails them instead of a skip (tests/plugin/main.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
clone=$(pwd -P)
root=$(realpath -m "${GST126_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/octopipe/gst126-root}")
mirror=${GST126_MIRROR:-http://deb.debian.org/debian}
tests=${GST126_TESTS-}
# What the plugin's build and tests need from Debian 13: the -dev packages (pkg-config files,
# libgstanalytics-1.0), the plugins the tests' pipelines use (jpegdec, videoconvert, x264enc,
# avdec_h264, objectdetectionoverlay), gst-inspect-1.0, PyGObject (the test that reads the metas
# from Python) and gcc for linking.
packages=libgstreamer1.0-dev,libgstreamer-plugins-base1.0-dev,libgstreamer-plugins-bad1.0-dev
packages+=,gstreamer1.0-plugins-base,gstreamer1.0-plugins-good,gstreamer1.0-plugins-bad
packages+=,gstreamer1.0-plugins-ugly,gstreamer1.0-libav,gstreamer1.0-tools
packages+=,python3-gi,gir1.2-gst-plugins-base-1.0,pkg-config,gcc,libc6-dev,ca-certificates

if [ "$(id -u)" != 0 ]; then
  echo "gst126.sh: needs root (debootstrap, mount, chroot)" >&2
  exit 1
fi
data=$(realpath -m "${OCTOPIPE_DATA:-$clone/../shared/data}")
if [ -z "${ORT_DYLIB_PATH:-}" ]; then
  . scripts/env.sh
fi
ort_dir=$(dirname "$(realpath -m "${ORT_DYLIB_PATH:-/nonexistent/lib}")")

timings=()
step_start=$SECONDS
step() {
  timings+=("$1: $((SECONDS - step_start)) s")
  step_start=$SECONDS
}

mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
if ! flock -w 3600 9; then
  echo "gst126.sh: $root.lock held for an hour by another run" >&2
  exit 1
fi

# The mounts under the root, deepest first.
mounts_under() {
  awk -v r="$1/" 'index($2 "/", r) == 1 { print $2 }' /proc/self/mounts | sort -r
}
unmount_all() {
  local m
  for m in $(mounts_under "$root"); do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
}
trap unmount_all EXIT
trap 'exit 130' INT TERM
# A run killed before its trap ran leaves its mounts: never remove or enter a root through them.
unmount_all
if [ -n "$(mounts_under "$root")" ]; then
  echo "gst126.sh: cannot unmount what a run left under $root" >&2
  exit 1
fi

# 1. The Debian 13 root, made once per package list.
stamp="$root/.octopipe-packages"
if [ "$(cat "$stamp" 2>/dev/null)" != "$packages" ]; then
  if ! command -v debootstrap >/dev/null; then
    apt-get install -y debootstrap || { apt-get update && apt-get install -y debootstrap; }
  fi
  if [ ! -f /usr/share/debootstrap/scripts/trixie ]; then
    echo "gst126.sh: this debootstrap does not know trixie (Debian 13)" >&2
    exit 1
  fi
  rm -rf "$root.part"
  echo "gst126.sh: debootstrap trixie into $root (once; several minutes)"
  # A bare folder cannot configure every package (no init, no running services): debootstrap's
  # status is not trusted; what the suite needs is checked below.
  debootstrap --variant=minbase --include="$packages" trixie "$root.part" "$mirror" ||
    echo "gst126.sh: debootstrap exited with $? (checking what the suite needs)"
  for f in usr/bin/gst-inspect-1.0 usr/bin/cc usr/bin/pkg-config \
    usr/lib/x86_64-linux-gnu/pkgconfig/gstreamer-analytics-1.0.pc \
    usr/lib/x86_64-linux-gnu/gstreamer-1.0/libgstanalyticsoverlay.so; do
    if ! chroot "$root.part" test -e "/$f"; then
      echo "gst126.sh: debootstrap left no $f in $root.part" >&2
      exit 1
    fi
  done
  rm -rf "$root"
  mv "$root.part" "$root"
  echo "$packages" >"$stamp"
  step "debootstrap"
fi

# 2. Mounts: each host folder at its own path inside the root.
bind() {
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2"
  if [ "${3:-}" = ro ]; then
    mount -o remount,bind,ro "$root$2"
  fi
}
mount -t proc proc "$root/proc"
bind /dev /dev ro
bind "$clone" "$clone"
bind "$HOME/.cargo" /root/.cargo
bind "$HOME/.rustup" /root/.rustup
if [ -d "$data" ]; then
  bind "$data" "$data" ro
fi
if [ -d "$ort_dir" ]; then
  bind "$ort_dir" "$ort_dir" ro
fi

# The crates, fetched here (the root has no network of its own to rely on).
cargo fetch --locked --quiet
step "cargo fetch"

inside() {
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/root/.cargo/bin:/usr/bin:/bin \
    LANG=C.UTF-8 CI=true OCTOPIPE_DATA="$data" ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-}" \
    CARGO_TARGET_DIR="$clone/target/gst126" CARGO_INCREMENTAL=0 CARGO_TERM_COLOR=never \
    bash -c "cd '$clone' && $1"
}
inside "gst-inspect-1.0 --version | head -n 2 && pkg-config --modversion gstreamer-analytics-1.0 \
  && gst-inspect-1.0 objectdetectionoverlay >/dev/null"
cargo_test="cargo test --locked --offline -p octopipe-gst --features analytics --test plugin"
inside "$cargo_test --no-run"
step "build (test profile, target/gst126)"
log="$clone/target/gst126/last-run.log"
inside "$cargo_test -- --test-threads=1 $tests" 2>&1 | tee "$log"
step "tests"

# A filter that matches nothing is no 1.26 run (a test that would skip fails: CI=true inside).
ran=$(grep -oE 'test result: ok\. [0-9]+ passed' "$log" | awk '{ n += $4 } END { print n + 0 }')
if [ "$ran" = 0 ]; then
  echo "gst126.sh: no test ran against GStreamer 1.26 (filter '$tests'): $log" >&2
  exit 1
fi
echo "gst126.sh: $ran tests passed against GStreamer 1.26 ($root)"
printf '  %s\n' "${timings[@]}"
