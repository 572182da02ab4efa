#!/usr/bin/env bash
# Regenerate the pictures in docs/ (shown in docs/guide.md, "Seeing what happens") from the synthetic demo:
# the latency plot of the live 30 fps demo, one annotated frame (a crop of it, to stay small) and
# the crop mosaic. Nothing here comes from the shared VisDrone data.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet
if [ ! -f demo-data/model.onnx ]; then
  python3 scripts/make_demo.py demo-data
fi
tmp=$(mktemp -d)
# --force: the images replace the committed ones.
./target/release/octopipe run pipelines/demo.pipe --set root=demo-data --set out="$tmp/objects.jsonl" --force \
    --plot docs/latency.svg --mosaic docs/crop-mosaic.png --mosaic-crops 32
# Annotated frames as fast as they can be written (file rate, so that none is skipped).
sed 's/live=true/live=false/' pipelines/demo.pipe > "$tmp/demo-file.pipe"
./target/release/octopipe run "$tmp/demo-file.pipe" --set root=demo-data --set out="$tmp/objects-file.jsonl" \
    --annotate "$tmp/frames" --report json > /dev/null
python3 - "$tmp/frames/s0-000030.png" docs/annotated-frame.png <<'PY'
# Crop the annotated frame (written with PNG filter Sub on every row) and write it compressed.
import sys, struct, zlib
import numpy as np
sys.path.insert(0, "scripts")
from make_demo import write_png
data = open(sys.argv[1], "rb").read()
pos, idat, w, h = 8, b"", 0, 0
while pos < len(data):
    n, tag = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if tag == b"IHDR":
        w, h = struct.unpack(">II", body[:8])
    elif tag == b"IDAT":
        idat += body
    pos += 12 + n
rows = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, w * 3 + 1)
assert (rows[:, 0] == 1).all(), "expected filter Sub on every row"
rgb = (np.cumsum(rows[:, 1:].reshape(h, w, 3).astype(np.uint32), axis=1) % 256).astype(np.uint8)
write_png(sys.argv[2], np.ascontiguousarray(rgb[0:300, 560:1040]), level=9)
PY
rm -rf "$tmp"
ls -l docs/latency.svg docs/crop-mosaic.png docs/annotated-frame.png
