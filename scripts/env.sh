# Source this file: points octopipe at the pip-installed ONNX Runtime and NVRTC libraries.
#   . scripts/env.sh
_octopipe_site=$(python3 -c 'import onnxruntime, os; print(os.path.dirname(os.path.dirname(onnxruntime.__file__)))' 2>/dev/null || true)
if [ -n "$_octopipe_site" ]; then
  export ORT_DYLIB_PATH="$_octopipe_site/onnxruntime/capi/libonnxruntime.so.1.31.1"
  if [ -d "$_octopipe_site/nvidia/cu13/lib" ]; then
    export LD_LIBRARY_PATH="$_octopipe_site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
else
  echo "env.sh: onnxruntime is not installed for python3: run scripts/setup.sh" >&2
fi
export OCTOPIPE_DATA="${OCTOPIPE_DATA:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared/data}"
unset _octopipe_site
# The GStreamer plugin (crates/octopipe-gst, libgstoctopipe.so) on GST_PLUGIN_PATH, in a folder
# of its own (GStreamer loads every library under a plugin path): target/gst-plugin links the
# release build (cargo build --release -p octopipe-gst, or scripts/setup.sh --plugin), else the
# debug one. Source this file again after the first build.
_octopipe_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_octopipe_so="$_octopipe_root/target/release/libgstoctopipe.so"
[ -f "$_octopipe_so" ] || _octopipe_so="$_octopipe_root/target/debug/libgstoctopipe.so"
# (what `cargo test -p octopipe-gst` built, beside its test binaries)
[ -f "$_octopipe_so" ] || _octopipe_so="$_octopipe_root/target/debug/deps/libgstoctopipe.so"
if [ -f "$_octopipe_so" ]; then
  mkdir -p "$_octopipe_root/target/gst-plugin"
  ln -sfn "$_octopipe_so" "$_octopipe_root/target/gst-plugin/libgstoctopipe.so"
fi
case ":${GST_PLUGIN_PATH:-}:" in
  *":$_octopipe_root/target/gst-plugin:"*) ;;
  *) export GST_PLUGIN_PATH="$_octopipe_root/target/gst-plugin${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}" ;;
esac
unset _octopipe_root _octopipe_so
