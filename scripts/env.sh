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
