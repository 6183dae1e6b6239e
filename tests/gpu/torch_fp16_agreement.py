#!/usr/bin/env python3
"""PyTorch's own float16 on a zoo classifier, as the yardstick for edgert's FP16 engines.

  torch_fp16_agreement.py NAME [COUNT]

Builds zoo entry NAME exactly as tests/models/make_zoo.py exports it (same seed, recalibrated
BatchNorm, scaled logits), runs COUNT standard-normal inputs through it on the GPU in float32
(no TF32) and in float16 channels-last (torch_anchor.py's FP16 mode), and prints one JSON object
in edgert_engine_agreement's terms: how often the top-1 classes agree, and the largest and
median relative L2 distance of the float16 logits from the float32 ones.
"""
import json, os, sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import make_zoo  # noqa: E402


def main():
    name, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    make_zoo.seed_all(name)
    model, _ = make_zoo.calibrated_model(name)
    fp32 = model.eval().cuda()
    shape = make_zoo.SPECS[name]["shape"]
    x = torch.randn([count] + list(shape[1:]), generator=torch.Generator().manual_seed(2026))
    agree, rel = 0, []
    with torch.no_grad():
        ref = torch.cat([fp32(x[i:i + 25].cuda()) for i in range(0, count, 25)]).float()
        half = fp32.half().to(memory_format=torch.channels_last)
        got = torch.cat([half(x[i:i + 25].cuda().half().to(memory_format=torch.channels_last))
                         for i in range(0, count, 25)]).float()
    agree = (ref.argmax(1) == got.argmax(1)).float().mean().item()
    rel = ((got - ref).norm(dim=1) / ref.norm(dim=1)).cpu()
    print(json.dumps({"model": name, "count": count, "top1_agreement": agree, "max_rel_l2": rel.max().item(),
                      "median_rel_l2": rel.median().item()}))


if __name__ == "__main__":
    main()
