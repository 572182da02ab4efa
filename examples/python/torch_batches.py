#!/usr/bin/env python3
"""A PyTorch model fed by batches(): octopipe decodes, batches and preprocesses the clip's
crops; the application's own torch model labels them; the labels go on to the JSONL sink.

    images (the clip) ! boxes format=det ! batch ! preprocess [backend=cuda memory=device]
      ! appinfer labels=person,two-wheeler,car,large-vehicle ! jsonl
        ^ batches(): torch.from_dlpack(batch.tensor) (no copy) -> model -> batch.set_labels(logits)

    python3 examples/python/torch_batches.py [DATA_DIR] [--device cpu|cuda] [--out objects.jsonl]

The model is a small convolutional network with fixed random weights (an application would load
its own): the point is the plumbing, not the labels. Without torch installed the program says so
and exits 0 (it is skipped, not failed). With --device cuda the crops stay on the GPU: the
preprocess stage leaves its tensor in device memory and torch reads it in place.
"""

import argparse
import os
import pathlib
import sys
import tempfile

import octopipe

REPO = pathlib.Path(__file__).resolve().parents[2]
LABELS = ["person", "two-wheeler", "car", "large-vehicle"]


def model(torch, device):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, len(LABELS)))
    return net.eval().to(device)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", nargs="?", default=os.environ.get("OCTOPIPE_DATA"))
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--out", help="the JSONL file (default: a temporary one)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed (pip install torch)")
        return 0
    if not args.data:
        ap.error("give DATA_DIR or set OCTOPIPE_DATA")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("skipped: torch sees no CUDA device")
        return 0
    clip = pathlib.Path(args.data) / "visdrone" / "clip-9999999"
    preprocess = "preprocess size=64x64"
    if args.device == "cuda":
        preprocess += " backend=cuda memory=device"
    net = model(torch, args.device)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or os.path.join(tmp, "objects.jsonl")
        description = (
            "images location=${root}/images framerate=30 ! boxes format=det location=${root}/annotations"
            f" ! batch max-crops=256 ! {preprocess}"
            f" ! appinfer labels={','.join(LABELS)} ! jsonl location=${{out}}")
        with octopipe.Pipeline(description, vars={"root": clip, "out": out}) as p:
            crops = 0
            for batch in p.batches():
                x = torch.from_dlpack(batch.tensor)  # the preprocess stage's memory, no copy
                assert x.data_ptr() == batch.tensor.data_ptr
                with torch.no_grad():
                    logits = net(x)
                batch.set_labels(logits)  # softmax and top-1, as the classify stage does
                crops += len(batch)
        with open(out) as f:
            lines = sum(1 for _ in f)
    print(f"{p.report['processed']} frames, {crops} crops through torch on {args.device}, "
          f"{lines} lines written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
