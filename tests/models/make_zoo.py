#!/usr/bin/python3
"""Exports the edgert test model zoo to ONNX (opset 17) with the legacy torch.onnx.export.

No weights are downloaded: torchvision models are randomly initialised (seeded), and their
batch-norm running statistics are recalibrated on random data so that the outputs have a
healthy spread (an uncalibrated random network gives near-constant logits); the classifiers'
last layer is then scaled by a power of two so that logits have std ~1, and the detector's class
logits are scaled so that its scores (and so top-k/NMS) are well separated. One small CNN is
trained on scikit-learn's bundled 8x8 digits so that one model has a real accuracy to check.
The transformers (vit_b_16, swin_t, and the encoders of zoo_transformers.py) have LayerNorm, no
batch norm: only the classifiers' logits are scaled. The YOLOv8n-style detector (zoo_yolo.py)
is recalibrated like the CNNs and its class logits are scaled and shifted (separate_scores).

For every model NAME this writes, into --out DIR:
  NAME.onnx                      the model
  NAME.inputs/<input>.npy        one sample per graph input (float32; int64 token ids and masks)
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_transformers  # noqa: E402
import zoo_yolo  # noqa: E402

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
# Transformers and the end-to-end YOLO. A spec may name its inputs (default: one float32
# "input"): name, dtype and values, how a sample is drawn (check_zoo.py draws the same way at
# other shapes: "normal", "uniform01", "token_ids" below "high", "attention_mask" of 1s with
# trailing 0s); "output_dynamic" names the outputs' dynamic axes (default: those of the input);
# "dim_multiple" {axis: m} says that dynamic sizes must be multiples of m. Debian's torch runs
# nn.Linear on the reference BLAS (slow): "expected_from_export" takes PyTorch's outputs from
# the exporter's tracing run, "logit_batch" is scale_logits' batch (0: no measuring run, the
# head's init gives logit std ~1 already).
SPECS["vit_b_16"] = dict(
    kind="classifier", ctor="vit_b_16", shape=[1, 3, 224, 224], outputs=["logits"],
    logit_batch=0, expected_from_export=True,
    dynamic={0: "batch"}, sample=[1, 3, 224, 224],
    min=[1, 3, 224, 224], opt=[1, 3, 224, 224], max=[4, 3, 224, 224])
SPECS["swin_t"] = dict(
    kind="classifier", ctor="swin_t", shape=[1, 3, 224, 224], outputs=["logits"],
    logit_batch=1, expected_from_export=True,
    dynamic={0: "batch"}, sample=[1, 3, 224, 224],
    min=[1, 3, 224, 224], opt=[1, 3, 224, 224], max=[4, 3, 224, 224])
SPECS["bert_encoder"] = dict(
    kind="transformer", ctor="bert", shape=[2, 128], outputs=["last_hidden_state", "pooler_output"],
    expected_from_export=True,
    inputs=[dict(name="input_ids", dtype="int64", values="token_ids", high=30522),
            dict(name="attention_mask", dtype="int64", values="attention_mask")],
    dynamic={0: "batch", 1: "sequence"}, sample=[2, 128],
    output_dynamic={"last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}},
    min=[1, 16], opt=[2, 128], max=[4, 256])
SPECS["speech_encoder"] = dict(
    kind="transformer", ctor="speech", shape=[1, 80, 400], outputs=["last_hidden_state"],
    expected_from_export=True,
    inputs=[dict(name="mel", dtype="float32", values="normal")],
    dynamic={0: "batch", 2: "frames"}, sample=[2, 80, 400],
    output_dynamic={"last_hidden_state": {0: "batch", 1: "encoded_frames"}},
    min=[1, 80, 32], opt=[1, 80, 500], max=[4, 80, 1000])
SPECS["yolov8n_e2e"] = dict(
    kind="detection", ctor="yolov8n", shape=[1, 3, 320, 320], outputs=["boxes", "scores", "labels"],
    inputs=[dict(name="images", dtype="float32", values="uniform01")],
    dynamic={2: "height", 3: "width"}, dim_multiple={2: 32, 3: 32}, sample=[1, 3, 320, 320],
    min=[1, 3, 160, 160], opt=[1, 3, 320, 320], max=[1, 3, 640, 640])
TRANSFORMERS = ["vit_b_16", "swin_t", "bert_encoder", "speech_encoder"]
ORDER = CLASSIFIERS + ["lraspp_mobilenet_v3_large", "ssdlite320_mobilenet_v3_large",
                       "mobilenet_v2_dynamic", "lraspp_dynamic", "digits_cnn"] + TRANSFORMERS + ["yolov8n_e2e"]
DEFAULT_INPUTS = [dict(name="input", dtype="float32", values="normal")]
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
    if ctor == "bert":
        return zoo_transformers.BertStyleEncoder()
    if ctor == "speech":
        return zoo_transformers.SpeechEncoder()
    if ctor == "yolov8n":
        return zoo_yolo.YoloV8n()
    model = getattr(torchvision.models, ctor)(weights=None)
    if ctor == "vit_b_16":
        # torchvision zero-initialises ViT's head (fine-tuning starts from zero logits). Its input
        # is the LayerNorm'd class token (unit variance per feature, affine 1/0 at init), so
        # weights of std 1/sqrt(hidden) give logits of std ~1 without a measuring run.
        nn.init.normal_(model.heads.head.weight, std=model.hidden_dim ** -0.5)
    return model


def input_specs(spec):
    return spec.get("inputs", DEFAULT_INPUTS)


def random_input(values, shape, rng, high=None):
    """One input as check_zoo.py draws it at other shapes (see the SPECS comment)."""
    if values == "normal":
        return rng.standard_normal(shape).astype(np.float32)
    if values == "uniform01":
        return rng.random(shape, dtype=np.float32)
    if values == "token_ids":
        return rng.integers(1, high, size=shape, dtype=np.int64)
    if values == "attention_mask":
        # Row 0 unpadded, the others padded after a random length of at least half the row.
        lengths = [shape[1]] + [int(rng.integers(shape[1] // 2, shape[1] + 1)) for _ in range(shape[0] - 1)]
        return (np.arange(shape[1])[None, :] < np.array(lengths)[:, None]).astype(np.int64)
    raise ValueError(f"unknown input values '{values}'")


def sample_inputs(spec, rng):
    shape = spec.get("sample", spec["shape"])
    arrays = [random_input(i["values"], shape, rng, i.get("high")) for i in input_specs(spec)]
    names = [i["name"] for i in input_specs(spec)]
    if names == ["input_ids", "attention_mask"]:
        arrays[0][arrays[1] == 0] = 0  # the padding token where the mask says padding
    return arrays


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
            if hasattr(model, "calibration_forward"):
                model.calibration_forward(torch.rand(batch))  # the YOLO: [0, 1] pixels, no NMS
                continue
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
def scale_logits(model, shape, batch=CALIB_BATCH_SIZE):
    """Random torchvision heads give logits with std from ~0.01 (mobilenet_v3_small) to ~0.5:
    scale the last layer by a power of two so that the logit std is about 1 for every model."""
    last = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))][-1]
    std = float(model(torch.randn([batch] + list(shape[1:]))).std())
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
    if spec["kind"] == "classifier" and spec.get("logit_batch", CALIB_BATCH_SIZE):
        scale_logits(model, spec["shape"], spec.get("logit_batch", CALIB_BATCH_SIZE))
    if spec["ctor"] == "yolov8n":
        model.facts.update(zoo_yolo.separate_scores(model, torch.rand([CALIB_BATCH_SIZE] + spec["shape"][1:])))
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
        samples = [x_te[:spec["sample"][0]].copy()]
    else:
        model, n_bn = calibrated_model(name)
        extra["bn_layers_recalibrated"] = n_bn
        samples = sample_inputs(spec, rng)
    if name in TRANSFORMERS or spec["ctor"] == "yolov8n":
        # The newer models keep their facts (architecture, thresholds, parameter count) in the
        # file's metadata; the manifest lists them under "facts".
        facts = dict(getattr(model, "facts", {}))
        facts["parameters"] = sum(p.numel() for p in model.parameters())
        meta["facts"] = json.dumps(facts, sort_keys=True)
    t_prep = time.time() - t0

    tensors = tuple(torch.from_numpy(a) for a in samples)
    captured = []
    hook = None
    if spec.get("expected_from_export"):
        # Debian's torch runs nn.Linear on the generic (reference) BLAS, a ViT-B/16 forward takes
        # ~25 s there: take PyTorch's outputs from the exporter's tracing run, not a run of their own.
        hook = model.register_forward_hook(lambda module, args, out: captured.append(out))
    else:
        with torch.no_grad():
            captured.append(model(*tensors))
    input_names = [i["name"] for i in input_specs(spec)]
    dynamic_axes = None
    if "dynamic" in spec:
        dynamic_axes = {n: {int(a): d for a, d in spec["dynamic"].items()} for n in input_names}
        if "output_dynamic" in spec:
            dynamic_axes.update(spec["output_dynamic"])
        else:
            # Outputs with a matching dynamic axis (batch for the classifiers, H/W for segmentation).
            for o in spec["outputs"]:
                if spec["kind"] == "segmentation" or 0 in spec["dynamic"]:
                    dynamic_axes[o] = {int(a): d for a, d in spec["dynamic"].items()}
    path = os.path.join(out_dir, name + ".onnx")
    t1 = time.time()
    # PyTorch 2.x defaults to its dynamo exporter; the zoo is the TorchScript exporter's graphs
    # (what torch 1.13, Debian's, has), there too (the GPU machine exports with a newer torch).
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    # Grad stays enabled here: under no_grad, nn.MultiheadAttention and nn.TransformerEncoderLayer
    # take fused fast paths (_native_multi_head_attention) that have no ONNX symbolic.
    torch.onnx.export(model, tensors, path, opset_version=OPSET,
                      do_constant_folding=True, input_names=input_names,
                      output_names=spec["outputs"], dynamic_axes=dynamic_axes, **legacy)
    t_export = time.time() - t1
    if hook is not None:
        hook.remove()
    outs = captured[0] if isinstance(captured[0], tuple) else (captured[0],)
    outs = tuple(o.detach() for o in outs)
    stds = {n: float(o.float().std()) if o.numel() > 1 else 0.0 for n, o in zip(spec["outputs"], outs)}
    print(f"  {name}: pytorch output shapes {[list(o.shape) for o in outs]}, std "
          + ", ".join(f"{k}={v:.4g}" for k, v in stds.items()))
    if spec["kind"] in ("classifier", "digits", "segmentation", "transformer"):
        if not stds[spec["outputs"][0]] > 1e-3:
            os.remove(path)
            sys.exit(f"{name}: degenerate output (std {stds[spec['outputs'][0]]:.3g})")

    in_dir = os.path.join(out_dir, name + ".inputs")
    exp_dir = os.path.join(out_dir, name + ".expected")
    os.makedirs(in_dir, exist_ok=True)
    os.makedirs(exp_dir, exist_ok=True)
    for n, a in zip(input_names, samples):
        np.save(os.path.join(in_dir, n + ".npy"), a)
    for n, o in zip(spec["outputs"], outs):
        np.save(os.path.join(exp_dir, n + ".npy"), o.numpy())
    m = onnx.load(path)
    # The exporter names the output dims it could not infer ("Resizeout_dim_0", ...): pin the
    # ones that are really static (a box's 4 coordinates too), and give the detector's
    # data-dependent count (axis 0) one name.
    declared = set(spec.get("dynamic", {}).values())
    for axes in spec.get("output_dynamic", {}).values():
        declared |= set(axes.values())
    for v, o in zip(m.graph.output, outs):
        for i, d in enumerate(v.type.tensor_type.shape.dim):
            if d.HasField("dim_param") and d.dim_param not in declared:
                if spec["kind"] == "detection" and i == 0:
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
    op_counts = {}

    def collect(graph):  # includes If/Loop subgraphs (the detector's NMS sits in an If)
        for n in graph.node:
            op_counts[n.op_type] = op_counts.get(n.op_type, 0) + 1
            for a in n.attribute:
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    collect(g)
    collect(m.graph)
    ops = sorted(op_counts)
    drawn = {i["name"]: i for i in input_specs(spec)}
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
        if "inputs" in spec:  # how check_zoo.py draws this input at other shapes
            e["values"] = drawn[v.name]["values"]
            if "high" in drawn[v.name]:
                e["values_high"] = drawn[v.name]["high"]
            if "dim_multiple" in spec:
                e["dim_multiple"] = {str(a): k for a, k in spec["dim_multiple"].items()}
        inputs.append(e)
    entry = {"name": name, "file": name + ".onnx", "kind": spec["kind"], "opset": OPSET,
             "inputs": inputs, "outputs": [value_info(v) for v in m.graph.output],
             "expected_dir": name + ".expected", "nodes": len(m.graph.node), "ops": ops}
    if "facts" in props:
        entry["facts"] = json.loads(props["facts"])
        entry["op_counts"] = dict(sorted(op_counts.items()))
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
