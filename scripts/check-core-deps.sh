#!/usr/bin/env bash
# The crate graph is the architecture: the core crate (crates/octopipe-core) stays its bottom, the
# CUDA crate (crates/octopipe-cuda) sits on it alone, and neither dependency tree (normal and
# build dependencies, proc macros included, though not a crate only a proc macro uses; not
# dev-dependencies) holds GStreamer, ONNX Runtime,
# a broker (zenoh, MQTT), the HTTP server (hyper) and tokio, or the CLI's crates (clap, anyhow,
# signal-hook, tracing-subscriber); nor does the stages crate's (crates/octopipe-stages, its
# brokers off); the sources crate holds no ONNX Runtime and no stages crate (it is on the core and
# the CUDA crate alone), the ONNX crate no GStreamer, the runner's crate (crates/octopipe-pipeline)
# no HTTP server (hyper, tokio, subtle: the control plane is crates/octopipe-control) and the
# observers' crate neither the runner nor the control plane. Prints each tree's crates and exits 1
# naming any forbidden one. And the facade library without its default features (an embedder's
# `default-features = false`: no `cli`, `mqtt`, `zenoh`) has none of the CLI's crates, no
# broker and not the CLI's tools (crates/octopipe-tools) in its tree. Run by scripts/test.sh.
#
#     bash scripts/check-core-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# A crate name (first word of a `cargo tree --prefix none` line) that is one of these or of their
# families (gstreamer-video, glib-sys, ort-sys, zenoh-transport, hyper-util, tokio-macros,
# clap_derive, signal-hook-registry, ...).
forbidden='^(gstreamer|gst|glib|gio|ort|zenoh|rumqttc|hyper|tokio|clap|anyhow|signal-hook|tracing-subscriber)([-_][a-z0-9_-]+)?$'

# Of the crates named in $1, those linked into the tree of `cargo tree ${@:2}`: a forbidden crate
# that only a proc macro uses (anyhow inside prost-derive) runs in the compiler, never in the
# library, and is named, not refused. The proc macros themselves still count.
linked() {
  local bad=$1 c kept=
  shift
  [ -n "$bad" ] || return 0
  local in=$(cargo tree "$@" -e normal,build,no-proc-macro --prefix none | awk '{print $1}' | sort -u)
  for c in $bad; do
    if grep -qx "$c" <<<"$in"; then
      kept="$kept $c"
    else
      echo "check-core-deps: $* : $c only inside a proc macro (not linked): $(cargo tree "$@" -e normal,build -i "$c" --prefix none --depth 1 | tail -n +2 | awk '{print $1}' | tr '\n' ' ')" >&2
    fi
  done
  echo $kept
}

# Each member up to the runner and the observers, with what its tree must not hold: the core and the
# CUDA layer none of them; the stages (without their broker features) no GStreamer, ONNX Runtime,
# broker, HTTP server or CLI; the sources no ONNX Runtime and no stages crate, the ONNX stages no
# GStreamer, and neither a broker, the HTTP server or the CLI; the runner (its brokers off) no
# HTTP server; the observers no runner and no control plane.
others='^(zenoh|rumqttc|hyper|tokio|clap|anyhow|signal-hook|tracing-subscriber)([-_][a-z0-9_-]+)?$'
for rule in \
  "octopipe-core|$forbidden" \
  "octopipe-cuda|$forbidden" \
  "octopipe-stages|$forbidden" \
  "octopipe-sources|^(ort)([-_][a-z0-9_-]+)?\$|^octopipe-stages\$|$others" \
  "octopipe-onnx|^(gstreamer|gst|glib|gio)([-_][a-z0-9_-]+)?\$|$others" \
  "octopipe-pipeline|^(hyper|http-body|tokio|subtle)([-_][a-z0-9_-]+)?\$" \
  "octopipe-observe|^octopipe-(pipeline|control)\$"; do
  package=${rule%%|*}
  pattern=${rule#*|}
  crates=$(cargo tree -p "$package" -e normal,build --prefix none | awk '{print $1}' | sort -u)
  bad=$(grep -E "$pattern" <<<"$crates" || true)
  bad=$(linked "$bad" -p "$package")
  echo "$package depends on: $(grep -v "^$package\$" <<<"$crates" | tr '\n' ' ')"
  if [ -n "$bad" ]; then
    echo "check-core-deps: $package's dependency tree holds forbidden crates:" $bad >&2
    echo "  see why with: cargo tree -p $package -e normal,build -i CRATE" >&2
    exit 1
  fi
  echo "check-core-deps: $package: none of its forbidden crates"
done

optional='^(clap|anyhow|signal-hook|tracing-subscriber|zenoh|rumqttc|octopipe-tools)([-_][a-z0-9_-]+)?$'
crates=$(cargo tree -p octopipe --no-default-features -e normal,build --prefix none | awk '{print $1}' | sort -u)
bad=$(grep -E "$optional" <<<"$crates" || true)
bad=$(linked "$bad" -p octopipe --no-default-features)
if [ -n "$bad" ]; then
  echo "check-core-deps: the library without its default features depends on:" $bad >&2
  echo "  see why with: cargo tree -p octopipe --no-default-features -e normal,build -i CRATE" >&2
  exit 1
fi
echo "check-core-deps: the library without its default features holds no CLI crate, no broker and no tools"
