#!/usr/bin/env python3
"""The VisDrone classifier from Python: pipelines/visdrone-classify.pipe through octopipe.Pipeline.

    images (the clip's JPEGs) ! boxes format=det (their annotations) ! batch ! preprocess
      ! classify (the shared VisDrone crop classifier) ! jsonl   --> Pipeline.results()

    python3 examples/python/visdrone_classify.py [DATA_DIR [MODEL.onnx]] [--out objects.jsonl]

DATA_DIR defaults to $OCTOPIPE_DATA (scripts/env.sh sets it); it holds
visdrone/clip-9999999/{images,annotations} and models/visdrone-crops-64.onnx. Every frame's
objects come back as dicts with the fields of the JSONL lines; the program counts them per label
and says which share the classifier labels as annotated (the VisDrone category of each box).
"""

import argparse
import collections
import os
import pathlib
import sys
import tempfile

import octopipe

REPO = pathlib.Path(__file__).resolve().parents[2]
# The classifier's class of each VisDrone category (0 and 11 are not classified).
CLASS_OF = {1: 0, 2: 0, 3: 1, 7: 1, 8: 1, 10: 1, 4: 2, 5: 3, 6: 3, 9: 3}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", nargs="?", default=os.environ.get("OCTOPIPE_DATA"))
    ap.add_argument("model", nargs="?")
    ap.add_argument("--out", help="the JSONL file (default: a temporary one)")
    args = ap.parse_args()
    if not args.data:
        ap.error("give DATA_DIR or set OCTOPIPE_DATA")
    data = pathlib.Path(args.data)
    model = args.model or data / "models" / "visdrone-crops-64.onnx"
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or os.path.join(tmp, "objects.jsonl")
        p = octopipe.Pipeline(str(REPO / "pipelines" / "visdrone-classify.pipe"), vars={
            "root": data / "visdrone" / "clip-9999999", "model": model, "out": out})
        per_label = collections.Counter()
        right = total = 0
        for frame in p.results():
            for o in frame.objects:
                per_label[o.get("label", "-")] += 1
                category = o.get("annotation", {}).get("category_id")
                right += CLASS_OF.get(category) == o.get("class_id")
                total += 1
    report = p.report
    print(f"{report['processed']} frames, {total} objects")
    for label, n in sorted(per_label.items()):
        print(f"  {label:<14} {n:>5}")
    print(f"labelled as annotated: {right} of {total} ({100 * right / max(total, 1):.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
