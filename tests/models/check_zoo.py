#!/usr/bin/python3
"""Parity of one zoo model between edgert and ONNX Runtime, the way CTest runs it.

  check_zoo.py --zoo DIR --edgert build/bin/edgert --model NAME [--work DIR]

classifier / segmentation: build, then `edgert compare` (ONNX Runtime through Node) with
relative L2 error <= 1e-4 on every output. Models with dynamic H/W are built with the
manifest's profile and compared at three shapes inside it; a shape outside must be refused.
detection: the outputs must match as sets of boxes (IoU >= 0.99 after sorting by score, same
labels). digits: accuracy on the held-out split must equal PyTorch's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORT_REFERENCE = os.path.join(ROOT, "tests", "models", "ort_reference.js")
MAX_REL_L2 = 1e-4


def run(cmd, expect_ok=True):
    print("$ " + " ".join(cmd), flush=True)
    result = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(result.stdout)
    sys.stdout.write(result.stderr)
    if expect_ok and result.returncode != 0:
        raise SystemExit(f"FAIL: exit code {result.returncode}: {' '.join(cmd)}")
    return result


def dims(shape):
    return "x".join(str(d) for d in shape)


def build(args, entry, engine):
    # No --board: native, the most capable shipped profile this machine satisfies, so the engine
    # has (and the comparison with ONNX Runtime covers) the widest kernels this machine runs.
    cmd = [args.edgert, "build", os.path.join(args.zoo, entry["file"]), "-o", engine]
    ranges = [i for i in entry["inputs"] if i.get("min_shape")]
    if ranges:
        for flag, key in (("--min-shapes", "min_shape"), ("--opt-shapes", "opt_shape"), ("--max-shapes", "max_shape")):
            cmd += [flag, ",".join(f"{i['name']}:{dims(i[key])}" for i in ranges)]
    run(cmd)


def compare(args, entry, engine, inputs_dir):
    run([args.edgert, "compare", os.path.join(args.zoo, entry["file"]), engine, "--inputs", inputs_dir,
         "--max-rel-l2", str(MAX_REL_L2)])


def check_dense(args, entry, engine, work):
    compare(args, entry, engine, os.path.join(args.zoo, entry["name"] + ".inputs"))
    ranged = [i for i in entry["inputs"] if i.get("min_shape")]
    if not ranged:
        return
    rng = np.random.RandomState(7)
    spec = ranged[0]
    lo, hi = spec["min_shape"], spec["max_shape"]
    # Three shapes inside the profile: its minimum, an odd size between, and its maximum.
    middle = [l if l == h else (l + h) // 2 + 3 for l, h in zip(lo, hi)]
    for shape in (lo, middle, hi):
        folder = os.path.join(work, "shape_" + dims(shape))
        os.makedirs(folder, exist_ok=True)
        np.save(os.path.join(folder, spec["name"] + ".npy"), rng.standard_normal(shape).astype(np.float32))
        compare(args, entry, engine, folder)
    outside = [h + 32 if l != h else h for l, h in zip(lo, hi)]
    folder = os.path.join(work, "outside")
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, spec["name"] + ".npy"), np.zeros(outside, np.float32))
    result = run([args.edgert, "run", engine, "--input", f"{spec['name']}={folder}/{spec['name']}.npy"], expect_ok=False)
    if result.returncode == 0 or "outside the engine's optimization profile" not in result.stderr:
        raise SystemExit(f"FAIL: shape {dims(outside)} outside the profile was not refused clearly")
    print(f"shape {dims(outside)} outside the profile refused as expected")


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 1.0


def check_detection(args, entry, engine, work):
    inputs = os.path.join(args.zoo, entry["name"] + ".inputs")
    ours, theirs = os.path.join(work, "edgert"), os.path.join(work, "ort")
    os.makedirs(theirs, exist_ok=True)
    run([args.edgert, "run", engine, "--npy", "--output-dir", ours, "-q"]
        + [f"--input={i['name']}={inputs}/{i['name']}.npy" for i in entry["inputs"]])
    run(["node", ORT_REFERENCE, os.path.join(args.zoo, entry["file"]), inputs, theirs])
    names = [o["name"] for o in entry["outputs"]]
    boxes_name, scores_name, labels_name = names[0], names[1], names[2]
    load = lambda d, n: np.load(os.path.join(d, n + ".npy"))
    ob, os_, ol = load(ours, boxes_name), load(ours, scores_name), load(ours, labels_name)
    tb, ts, tl = load(theirs, boxes_name), load(theirs, scores_name), load(theirs, labels_name)
    print(f"detections: edgert {len(os_)}, ONNX Runtime {len(ts)}")
    if len(os_) != len(ts):
        raise SystemExit("FAIL: different numbers of detections")
    if len(ts) == 0:
        raise SystemExit("FAIL: the detector found nothing; the comparison would mean nothing")
    oo, to = np.argsort(-os_, kind="stable"), np.argsort(-ts, kind="stable")
    used = set()
    worst = 1.0
    for i in oo:
        # Equal scores may come in either order: match each box to the best unused one with the same label.
        best, best_j = -1.0, None
        for j in to:
            if j in used or tl[j] != ol[i] or abs(float(ts[j]) - float(os_[i])) > 1e-3:
                continue
            v = iou(ob[i], tb[j])
            if v > best:
                best, best_j = v, j
        if best_j is None or best < 0.99:
            raise SystemExit(f"FAIL: edgert box {ob[i]} (label {ol[i]}, score {os_[i]:.4f}) has no match (best IoU {best:.4f})")
        used.add(best_j)
        worst = min(worst, best)
    print(f"every box matched: minimum IoU {worst:.6f}, labels equal, scores within 1e-3")


def check_digits(args, entry, engine, work):
    compare(args, entry, engine, os.path.join(args.zoo, entry["name"] + ".inputs"))
    x = np.load(os.path.join(args.zoo, entry["test_x"])).astype(np.float32)
    y = np.load(os.path.join(args.zoo, entry["test_y"]))
    np.save(os.path.join(work, "test_x.npy"), x)
    name = entry["inputs"][0]["name"]
    out = os.path.join(work, "out")
    run([args.edgert, "run", engine, "--input", f"{name}={work}/test_x.npy", "--npy", "--output-dir", out, "-q"])
    logits = np.load(os.path.join(out, entry["outputs"][0]["name"] + ".npy"))
    accuracy = float((logits.argmax(axis=1) == y).mean())
    reference = entry["pytorch_accuracy"]
    print(f"digits held-out accuracy: edgert {accuracy:.6f} on {len(y)} images, PyTorch {reference:.6f}")
    if abs(accuracy - reference) > 0.5 / len(y):
        raise SystemExit("FAIL: edgert's accuracy differs from PyTorch's")


def zoo_model_args(description, work_prefix):
    """--zoo, --edgert, --model, --work: the parsed arguments, the model's manifest entry and the
    work directory (made)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zoo", required=True)
    parser.add_argument("--edgert", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--work")
    args = parser.parse_args()
    manifest = json.load(open(os.path.join(args.zoo, "manifest.json")))
    entry = next((m for m in manifest["models"] if m["name"] == args.model), None)
    if entry is None:
        raise SystemExit(f"FAIL: {args.model} is not in {args.zoo}/manifest.json")
    work = args.work or tempfile.mkdtemp(prefix=work_prefix)
    os.makedirs(work, exist_ok=True)
    return args, entry, work


def main():
    args, entry, work = zoo_model_args(__doc__, "edgert-zoo-")
    engine = os.path.join(work, entry["name"] + ".engine")
    build(args, entry, engine)
    {"classifier": check_dense, "segmentation": check_dense, "detection": check_detection,
     "digits": check_digits}[entry["kind"]](args, entry, engine, work)
    print(f"PASS: {entry['name']}")


if __name__ == "__main__":
    main()
