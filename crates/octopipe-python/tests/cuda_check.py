#!/usr/bin/env python3
"""GPU checks of the Python module (needs PyTorch with CUDA and a GPU: scripts/device-python.sh).

    python3 crates/octopipe-python/tests/cuda_check.py

1. A torch CUDA tensor pushed (through __dlpack__, and through __cuda_array_interface__) is read
   by the CUDA preprocess stage where it is; the batch's tensor stays on the GPU and
   torch.from_dlpack takes it without a copy (the same data pointer), writable.
2. The tensors equal the CPU path's (numpy frames, preprocess backend=cpu) within 1e-3, and a
   torch model's labels on them equal the CPU path's.
3. 2,000 frames pushed as new torch CUDA tensors: torch's allocated memory and the GPU's free
   memory do not shrink (every frame's DLPack capsule and every batch tensor is released).
Prints one line per check; exits non-zero at the first failure.
"""

import sys

import numpy as np

import octopipe

DESC = ("app name=cam ! batch max-frames=1 ! preprocess size=64x64 {pre} "
        "! appinfer labels=a,b,c,d ! appsink")


def frames(n, seed=5):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        img = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
        xy = rng.integers(0, 400, (12, 2))
        wh = rng.integers(4, 200, (12, 2))
        out.append((img, np.concatenate([xy, wh], 1).astype(np.float64)))
    return out


def net(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4)).eval()


def run_path(torch, model, data, pre, image_of, on_batch=None):
    """Push every frame, label each batch with `model`; the host tensors and the objects."""
    p = octopipe.Pipeline(DESC.format(pre=pre))
    results = p.results()
    batches = p.batches()
    tensors = []
    for img, boxes in data:
        p.push("cam", image_of(img), boxes)
        b = next(batches)
        x = torch.from_dlpack(b.tensor)
        if on_batch:
            on_batch(b, x)
        tensors.append(x.detach().cpu().numpy().copy())
        with torch.no_grad():
            b.set_labels(model(x))
    p.close()
    return tensors, [o for f in results for o in f.objects]


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        sys.exit(1)


def main():
    import torch

    check("torch sees a GPU", torch.cuda.is_available(), torch.__version__)
    data = frames(6)
    cpu_model = net(torch)
    gpu_model = net(torch).cuda()

    cpu_t, cpu_o = run_path(torch, cpu_model, data, "backend=cpu", lambda a: a)

    def zero_copy(b, x):
        check("batch tensor on the GPU", b.tensor.device == "cuda:0" and x.is_cuda, b.tensor.device)
        check("torch.from_dlpack without a copy", x.data_ptr() == b.tensor.data_ptr,
              f"0x{x.data_ptr():x}")
        y = torch.from_dlpack(b.tensor)
        x[0, 0, 0, 0] += 1.0
        check("writable, shared", float(y[0, 0, 0, 0]) == float(x[0, 0, 0, 0]))
        x[0, 0, 0, 0] -= 1.0

    gpu_t, gpu_o = run_path(torch, gpu_model, data, "backend=cuda memory=device",
                            lambda a: torch.from_numpy(a).cuda(), zero_copy)
    diff = max(float(np.abs(a - b).max()) for a, b in zip(cpu_t, gpu_t))
    check("CUDA-pushed tensors equal the CPU path's", diff <= 1e-3, f"max |diff| {diff:.2e}")
    same = sum(a.get("class_id") == b.get("class_id") for a, b in zip(cpu_o, gpu_o))
    check("labels equal the CPU path's", len(cpu_o) == len(gpu_o) and same == len(cpu_o),
          f"{same} of {len(cpu_o)}")
    bboxes = [o["bbox"] for o in cpu_o] == [o["bbox"] for o in gpu_o]
    check("boxes equal the CPU path's", bboxes)

    class CaiOnly:
        def __init__(self, t):
            self.t = t
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    cai_t, _ = run_path(torch, gpu_model, data[:2], "backend=cuda memory=device",
                        lambda a: CaiOnly(torch.from_numpy(a).cuda()))
    diff = max(float(np.abs(a - b).max()) for a, b in zip(cpu_t, cai_t))
    check("__cuda_array_interface__ frames equal the CPU path's", diff <= 1e-3, f"{diff:.2e}")

    img, boxes = data[0]
    p = octopipe.Pipeline(DESC.format(pre="backend=cuda memory=device"))
    batches = p.batches()
    for i in range(2000):
        # A new CUDA tensor per frame: one whose DLPack capsule were never released would stay
        # allocated in torch; a batch tensor never given back would grow octopipe's pool.
        p.push("cam", torch.from_numpy(img).cuda(), boxes)
        b = next(batches)
        with torch.no_grad():
            b.set_labels(gpu_model(torch.from_dlpack(b.tensor)))
        del b
        if i == 199:
            torch.cuda.synchronize()
            before, free_before = torch.cuda.memory_allocated(), torch.cuda.mem_get_info()[0]
    p.close()
    torch.cuda.synchronize()
    after, free_after = torch.cuda.memory_allocated(), torch.cuda.mem_get_info()[0]
    check("2,000 CUDA frames: torch's memory flat", after <= before, f"{before} -> {after} bytes")
    lost = (free_before - free_after) / 2**20
    check("2,000 CUDA frames: free GPU memory flat", lost < 64, f"{lost:+.1f} MiB used")
    print("all GPU checks passed")


if __name__ == "__main__":
    main()
