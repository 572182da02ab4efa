#!/usr/bin/env bash
# Install what octopipe needs on a fresh Debian 12 machine: GStreamer 1.22 and the mosquitto MQTT
# broker that the broker tests start (apt), ONNX Runtime 1.31.1, NVRTC and the demo's Python pieces
# (pip). Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev gstreamer1.0-plugins-base
  gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav
  gstreamer1.0-tools gstreamer1.0-rtsp libgstrtspserver-1.0-dev pkg-config mosquitto openssl ca-certificates)
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
want = {"onnxruntime": "1.31.1", "nvidia-cuda-nvrtc": "13.0.88"}
sys.exit(0 if all(m.version(k) == v for k, v in want.items()) and m.version("onnx") and m.version("numpy") else 1)
PY
then
  echo "setup: pip install -r scripts/requirements.txt"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r scripts/requirements.txt
fi
echo "setup: ok"
