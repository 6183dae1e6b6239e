#!/usr/bin/env python3
"""The Python package on a GPU engine: CUDA tensors in and out through DLPack.

  gpu_python_test.py DIGITS_DIR    (PYTHONPATH holds the edgert package; torch with CUDA)

The digits CNN (tests/models/make_zoo.py) built by edgert.build for x86_64-cuda-sm90 runs from
torch CUDA tensors: the input read in place through __dlpack__, the output written into a torch
CUDA tensor given in `outputs`. Its logits must equal those of the same engine run from NumPy
arrays (host memory staged by the runtime), and agree with the CPU engine's within 1e-4 relative
L2; a device input without a place for a device-resident output is refused with a message; and
the held-out accuracy must be the CPU engine's. The same on a CUDA stream of the caller's, given
as `stream`.
"""
import os
import sys

import numpy as np
import torch

import edgert


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


def main():
    if not torch.cuda.is_available():
        raise SystemExit("FAIL: no CUDA GPU here (or torch without CUDA): this test runs on the GPU machine "
                         "(tests/gpu/run-on-device --python)")
    digits = sys.argv[1]
    model = os.path.join(digits, "digits_cnn.onnx")
    test_x = np.load(os.path.join(digits, "digits_test_x.npy")).astype(np.float32)
    test_y = np.load(os.path.join(digits, "digits_test_y.npy"))
    shapes = dict(min_shapes={"input": (1, 1, 8, 8)}, opt_shapes={"input": (16, 1, 8, 8)},
                  max_shapes={"input": (512, 1, 8, 8)})
    gpu = edgert.build(model, board="x86_64-cuda-sm90", **shapes)
    placed = {n["precision"] for n in gpu.load().inspect()["graphs"][0]["nodes"]}
    plugins = [p["name"] for p in gpu.load().inspect()["plugins"]]
    assert "cuda" in plugins, f"no node on the CUDA plugin: {plugins}"
    cpu = edgert.build(model, board="x86_64-generic", **shapes).load()
    engine = gpu.load()
    context = engine.context()

    batch = np.ascontiguousarray(test_x[:16])
    from_numpy = context.run({"input": batch})["logits"]
    x = torch.from_numpy(batch).cuda()
    y = torch.full((16, 10), float("nan"), device="cuda")
    result = context.run({"input": x}, outputs={"logits": y})
    assert result["logits"] is y
    torch.cuda.synchronize()
    from_torch = y.cpu().numpy()
    assert np.array_equal(from_torch, from_numpy), np.abs(from_torch - from_numpy).max()
    reference = cpu.context().run({"input": batch})["logits"]
    error = rel_l2(from_torch, reference)
    assert error < 1e-4, error
    print(f"CUDA tensors through DLPack: logits equal the NumPy run's, {error:.2e} relative L2 from the CPU engine's "
          f"(precisions {sorted(placed)})")

    # On a stream of the caller's: the input made there is read after it is written (the
    # producer orders it through __dlpack__(stream=...)), and CUDA graphs capture on it.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for _ in range(3):
            x_side = torch.from_numpy(batch).cuda(non_blocking=False) * 1.0
            y_side = torch.full((16, 10), float("nan"), device="cuda")
            context.run({"input": x_side}, outputs={"logits": y_side}, stream=side.cuda_stream)
            assert np.array_equal(y_side.cpu().numpy(), from_numpy)
    print("on a caller's CUDA stream (three runs, CUDA graphs): logits equal the NumPy run's")

    try:
        context.run({"input": x})
        raise SystemExit("FAIL: a device input with the output left in device memory was not refused")
    except edgert.EdgertError as e:
        assert "outputs" in str(e), e
        print(f"refused as expected: {e}")

    logits = context.run({"input": torch.from_numpy(test_x).cuda()},
                         outputs={"logits": torch.empty((len(test_x), 10), device="cuda")})["logits"]
    accuracy = float((logits.cpu().numpy().argmax(axis=1) == test_y).mean())
    cpu_accuracy = float((cpu.context().run({"input": test_x})["logits"].argmax(axis=1) == test_y).mean())
    assert accuracy == cpu_accuracy, (accuracy, cpu_accuracy)
    print(f"digits held-out accuracy from CUDA tensors: {accuracy:.4f} (CPU engine {cpu_accuracy:.4f})")
    print("PASS")


if __name__ == "__main__":
    main()
