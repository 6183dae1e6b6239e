#!/usr/bin/python3
"""Exports the edgert test model zoo to ONNX (opset 17) with the legacy torch.onnx.export.

No weights are downloaded: torchvision models are randomly initialised (seeded), and their
batch-norm running statistics are recalibrated on random data so that the outputs have a
healthy spread (an uncalibrated random network gives near-constant logits); the classifiers'
last layer is then scaled by a power of two so that logits have std ~1, and the detector's class
logits are scaled so that its scores (and so top-k/NMS) are well separated. One small CNN is
trained on scikit-learn's bundled 8x8 digits so that one model has a real accuracy to check.

For every model NAME this writes, into --out DIR:
  NAME.onnx                      the model
  NAME.inputs/<input>.npy        one sample per graph input (float32)
  NAME.expected/<output>.npy     PyTorch's outputs for that sample (a loose cross-check)
and, for the digits model, digits_test_x.npy / digits_test_y.npy (held-out split).
DIR/manifest.json describes every model present in DIR. Models whose .onnx exists are
skipped unless --force; the manifest is always rebuilt from the files (extra facts such as
the PyTorch accuracy are kept in each ONNX file's metadata_props).

Always run with /usr/bin/python3 (Debian's python3-torch 1.13, torchvision 0.14, onnx 1.12).
"""
import argparse
import inspect
import json
import os
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn as nn
import torchvision
from torchvision.models import detection, segmentation

OPSET = 17
SEED = 2026
CALIB_BATCHES = 4
CALIB_BATCH_SIZE = 4

# name -> spec. shape: static export shape; dynamic: {axis: dim_name}; sample: shape of the
# written sample input; min/opt/max: suggested optimisation-profile shapes for dynamic inputs.
CLASSIFIERS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
               "squeezenet1_1", "shufflenet_v2_x1_0"]
SPECS = {}
for _n in CLASSIFIERS:
    SPECS[_n] = dict(kind="classifier", ctor=_n, shape=[1, 3, 224, 224], outputs=["logits"])
SPECS["lraspp_mobilenet_v3_large"] = dict(
    kind="segmentation", ctor="lraspp", shape=[1, 3, 224, 224], outputs=["out"])
SPECS["ssdlite320_mobilenet_v3_large"] = dict(
    kind="detection", ctor="ssdlite", shape=[1, 3, 320, 320], outputs=["boxes", "scores", "labels"])
SPECS["mobilenet_v2_dynamic"] = dict(
    kind="classifier", ctor="mobilenet_v2", shape=[1, 3, 224, 224], outputs=["logits"],
    dynamic={2: "height", 3: "width"}, sample=[1, 3, 192, 256],
    min=[1, 3, 96, 96], opt=[1, 3, 224, 224], max=[1, 3, 512, 512])
SPECS["lraspp_dynamic"] = dict(
    kind="segmentation", ctor="lraspp", shape=[1, 3, 224, 224], outputs=["out"],
    dynamic={2: "height", 3: "width"}, sample=[1, 3, 256, 320],
    min=[1, 3, 128, 128], opt=[1, 3, 320, 320], max=[1, 3, 512, 512])
SPECS["digits_cnn"] = dict(
    kind="digits", ctor="digits", shape=[1, 1, 8, 8], outputs=["logits"],
    dynamic={0: "batch"}, sample=[16, 1, 8, 8],
    min=[1, 1, 8, 8], opt=[16, 1, 8, 8], max=[512, 1, 8, 8])
ORDER = CLASSIFIERS + ["lraspp_mobilenet_v3_large", "ssdlite320_mobilenet_v3_large",
                       "mobilenet_v2_dynamic", "lraspp_dynamic", "digits_cnn"]
assert sorted(ORDER) == sorted(SPECS)


def seed_all(name):
    # Seed per model (not per run) so that --only gives the same files as a full run.
    s = SEED + sum(ord(c) for c in name)
    torch.manual_seed(s)
    return np.random.default_rng(s)


class SegWrapper(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


class DetWrapper(nn.Module):
    """Takes a 1x3xHxW batch (instead of a list of images) and returns boxes, scores, labels."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        det = self.model([x[0]])[0]
        return det["boxes"], det["scores"], det["labels"]


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(inplace=True), nn.Linear(64, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


def construct(ctor):
    if ctor == "lraspp":
        return SegWrapper(segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None))
    if ctor == "ssdlite":
        return DetWrapper(detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None))
    return getattr(torchvision.models, ctor)(weights=None)


@torch.no_grad()
def recalibrate_bn(model, shape):
    """Replaces BN running stats by the cumulative average over random-normal batches.

    Only the BN layers go to train mode (dropout, stochastic depth and the detector's
    training path stay in eval), with momentum=None (cumulative moving average)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    model.eval()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    if bns:
        batch = [CALIB_BATCH_SIZE] + list(shape[1:])
        for _ in range(CALIB_BATCHES):
            x = torch.randn(batch)
            if isinstance(model, DetWrapper):
                # The detector takes a list of images and its extra layers reach 1x1, where BN
                # needs a batch > 1: run backbone and head on a normalised batch directly.
                det = model.model
                mean = torch.tensor(det.transform.image_mean).view(1, -1, 1, 1)
                std = torch.tensor(det.transform.image_std).view(1, -1, 1, 1)
                det.head(list(det.backbone((x - mean) / std).values()))
            else:
                model(x)
    model.eval()
    return len(bns)


@torch.no_grad()
def scale_logits(model, shape):
    """Random torchvision heads give logits with std from ~0.01 (mobilenet_v3_small) to ~0.5:
    scale the last layer by a power of two so that the logit std is about 1 for every model."""
    last = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))][-1]
    std = float(model(torch.randn([CALIB_BATCH_SIZE] + list(shape[1:]))).std())
    factor = 2.0 ** round(np.log2(1.0 / std))
    last.weight.mul_(factor)
    if last.bias is not None:
        last.bias.mul_(factor)
    print(f"  logit std {std:.4g} before scaling the last layer by {factor:g}")


def train_digits(rng):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]  # N x 1 x 8 x 8 in [0, 1]
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
    gen = torch.Generator().manual_seed(SEED)
    epochs, bs = 15, 64
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for i in range(0, len(xt), bs):
            idx = perm[i:i + bs]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
    model.eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(x_te)).argmax(1).numpy()
    acc = float((pred == y_te).mean())
    print(f"  digits: {len(x_tr)} train / {len(x_te)} test, {epochs} epochs, "
          f"final train loss {total / len(xt):.4f}, held-out accuracy {acc:.4f}")
    return model, x_te, y_te, acc


def calibrated_model(name):
    """The torchvision network of zoo entry `name` as exported: random weights (seeded by the
    caller, seed_all), BatchNorm recalibrated, logits scaled. Returns it with its BN count."""
    spec = SPECS[name]
    model = construct(spec["ctor"])
    n_bn = recalibrate_bn(model, spec["shape"])
    if spec["kind"] == "classifier":
        scale_logits(model, spec["shape"])
    if isinstance(model, DetWrapper):
        # Random class logits have std ~0.4, so all 91 softmax scores sit near 1/91 and the
        # top-k/NMS order hinges on differences of ~1e-7 (float noise). Scaling the last
        # classification convs by 8 (logit std ~3.5) makes the detections well separated.
        with torch.no_grad():
            for block in model.model.head.classification_head.module_list:
                block[-1].weight.mul_(8.0)
                block[-1].bias.mul_(8.0)
    return model, n_bn


def export_one(name, out_dir):
    spec = SPECS[name]
    rng = seed_all(name)
    t0 = time.time()
    meta = {"kind": spec["kind"], "seed": str(SEED)}
    extra = {}
    if spec["ctor"] == "digits":
        model, x_te, y_te, acc = train_digits(rng)
        np.save(os.path.join(out_dir, "digits_test_x.npy"), x_te)
        np.save(os.path.join(out_dir, "digits_test_y.npy"), y_te)
        meta["pytorch_accuracy"] = f"{acc:.6f}"
        sample = x_te[:spec["sample"][0]].copy()
    else:
        model, n_bn = calibrated_model(name)
        extra["bn_layers_recalibrated"] = n_bn
        sample = rng.standard_normal(spec.get("sample", spec["shape"])).astype(np.float32)
    t_prep = time.time() - t0

    with torch.no_grad():
        outs = model(torch.from_numpy(sample))
    outs = outs if isinstance(outs, tuple) else (outs,)
    stds = {n: float(o.float().std()) if o.numel() > 1 else 0.0 for n, o in zip(spec["outputs"], outs)}
    print(f"  {name}: pytorch output shapes {[list(o.shape) for o in outs]}, std "
          + ", ".join(f"{k}={v:.4g}" for k, v in stds.items()))
    if spec["kind"] in ("classifier", "digits", "segmentation"):
        if not stds[spec["outputs"][0]] > 1e-3:
            sys.exit(f"{name}: degenerate output (std {stds[spec['outputs'][0]]:.3g})")

    in_dir = os.path.join(out_dir, name + ".inputs")
    exp_dir = os.path.join(out_dir, name + ".expected")
    os.makedirs(in_dir, exist_ok=True)
    os.makedirs(exp_dir, exist_ok=True)
    np.save(os.path.join(in_dir, "input.npy"), sample)
    for n, o in zip(spec["outputs"], outs):
        np.save(os.path.join(exp_dir, n + ".npy"), o.numpy())

    dynamic_axes = None
    if "dynamic" in spec:
        dynamic_axes = {"input": {int(a): d for a, d in spec["dynamic"].items()}}
        # Outputs with a matching dynamic axis (batch for the classifiers, H/W for segmentation).
        for o in spec["outputs"]:
            if spec["kind"] == "segmentation" or 0 in spec["dynamic"]:
                dynamic_axes[o] = {int(a): d for a, d in spec["dynamic"].items()}
    path = os.path.join(out_dir, name + ".onnx")
    t1 = time.time()
    # PyTorch 2.x defaults to its dynamo exporter; the zoo is the TorchScript exporter's graphs
    # (what torch 1.13, Debian's, has), there too (the GPU machine exports with a newer torch).
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, (torch.from_numpy(sample),), path, opset_version=OPSET,
                      do_constant_folding=True, input_names=["input"],
                      output_names=spec["outputs"], dynamic_axes=dynamic_axes, **legacy)
    t_export = time.time() - t1
    m = onnx.load(path)
    # The exporter names the output dims it could not infer ("Resizeout_dim_0", ...): pin the
    # ones that are really static, and give the detector's data-dependent count one name.
    declared = set(spec.get("dynamic", {}).values())
    for v, o in zip(m.graph.output, outs):
        for i, d in enumerate(v.type.tensor_type.shape.dim):
            if d.HasField("dim_param") and d.dim_param not in declared:
                if spec["kind"] == "detection":
                    d.dim_param = "num_detections"
                else:
                    d.dim_value = o.shape[i]
    for k, v in meta.items():
        m.metadata_props.add(key=k, value=v)
    onnx.checker.check_model(m)
    onnx.save(m, path)
    dt = time.time() - t0
    print(f"  {name}: prepare {t_prep:.1f}s, export {t_export:.1f}s, total {dt:.1f}s, "
          f"{os.path.getsize(path) / 1e6:.1f} MB, {len(m.graph.node)} nodes")
    return dt


DTYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.INT64: "int64",
          onnx.TensorProto.INT32: "int32", onnx.TensorProto.UINT8: "uint8",
          onnx.TensorProto.BOOL: "bool", onnx.TensorProto.DOUBLE: "float64"}


def value_info(v):
    dims = [d.dim_param if d.HasField("dim_param") else d.dim_value for d in v.type.tensor_type.shape.dim]
    return {"name": v.name, "dtype": DTYPES.get(v.type.tensor_type.elem_type, str(v.type.tensor_type.elem_type)),
            "shape": dims}


def manifest_entry(name, out_dir):
    spec = SPECS[name]
    m = onnx.load(os.path.join(out_dir, name + ".onnx"), load_external_data=False)
    props = {p.key: p.value for p in m.metadata_props}
    inits = {i.name for i in m.graph.initializer}
    ops = set()

    def collect(graph):  # includes If/Loop subgraphs (the detector's NMS sits in an If)
        for n in graph.node:
            ops.add(n.op_type)
            for a in n.attribute:
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    collect(g)
    collect(m.graph)
    ops = sorted(ops)
    inputs = []
    for v in m.graph.input:
        if v.name in inits:
            continue
        e = value_info(v)
        e["dynamic_dims"] = {str(i): d for i, d in enumerate(e["shape"]) if isinstance(d, str) or d == 0}
        e["sample"] = f"{name}.inputs/{v.name}.npy"
        e["sample_shape"] = list(np.load(os.path.join(out_dir, e["sample"]), mmap_mode="r").shape)
        if e["dynamic_dims"]:
            e["min_shape"], e["opt_shape"], e["max_shape"] = spec["min"], spec["opt"], spec["max"]
        inputs.append(e)
    entry = {"name": name, "file": name + ".onnx", "kind": spec["kind"], "opset": OPSET,
             "inputs": inputs, "outputs": [value_info(v) for v in m.graph.output],
             "expected_dir": name + ".expected", "nodes": len(m.graph.node), "ops": ops}
    if spec["kind"] == "digits":
        entry["pytorch_accuracy"] = float(props["pytorch_accuracy"]) if "pytorch_accuracy" in props else None
        entry["test_x"], entry["test_y"] = "digits_test_x.npy", "digits_test_y.npy"
    return entry


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory to write the zoo into")
    parser.add_argument("--only", help="comma-separated model names (default: all): " + ",".join(ORDER))
    parser.add_argument("--force", action="store_true", help="re-export models whose .onnx exists")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    names = ORDER
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in SPECS]
        if unknown:
            parser.error(f"unknown model(s) {unknown}; known: {ORDER}")
    if args.threads:
        torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    import warnings
    warnings.filterwarnings("ignore")  # tracer warnings from the detector's postprocess

    t_all = time.time()
    timings = {}
    for name in names:
        if os.path.exists(os.path.join(args.out, name + ".onnx")) and not args.force:
            print(f"{name}: exists, skipped (--force to re-export)")
            continue
        print(f"{name}: exporting")
        timings[name] = export_one(name, args.out)

    entries = [manifest_entry(n, args.out) for n in ORDER if os.path.exists(os.path.join(args.out, n + ".onnx"))]
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump({"opset": OPSET, "generator": "tests/models/make_zoo.py",
                   "torch": torch.__version__, "torchvision": torchvision.__version__,
                   "models": entries}, f, indent=1)
        f.write("\n")
    print(f"manifest: {len(entries)} models -> {os.path.join(args.out, 'manifest.json')}")
    print("timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
          + f"; total {time.time() - t_all:.1f}s")


if __name__ == "__main__":
    main()
