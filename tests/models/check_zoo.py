#!/usr/bin/python3
"""Parity of one zoo model between edgert and ONNX Runtime, the way CTest runs it.

  check_zoo.py --zoo DIR --edgert build/bin/edgert --model NAME [--work DIR]

classifier / segmentation / transformer: build, then `edgert compare` (ONNX Runtime through
Node) with relative L2 error <= 1e-4 on every output. Models with dynamic axes (H/W, batch,
sequence length, frames) are built with the manifest's profile and compared at three shapes
inside it; a shape outside must be refused. Inputs at those shapes are drawn as the manifest's
"values" says (float normal by default, [0, 1] pixels, int64 token ids, attention masks), with
sizes that are multiples of its "dim_multiple".
detection: the outputs must match as sets of boxes (IoU >= 0.99 after sorting by score, same
labels), at the sample and, for a dynamic detector, at the three shapes. digits: accuracy on
the held-out split must equal PyTorch's.
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


def draw(spec, shape, rng):
    """An input at `shape` drawn as the manifest's "values" says (make_zoo.py's random_input)."""
    values = spec.get("values", "normal")
    if values == "normal":
        return rng.standard_normal(shape).astype(np.float32)
    if values == "uniform01":
        return rng.random_sample(shape).astype(np.float32)
    if values == "token_ids":
        return rng.randint(1, spec["values_high"], size=shape).astype(np.int64)
    if values == "attention_mask":
        # Row 0 unpadded, the others padded after a random length of at least half the row.
        lengths = [shape[1]] + [rng.randint(shape[1] // 2, shape[1] + 1) for _ in range(shape[0] - 1)]
        return (np.arange(shape[1])[None, :] < np.array(lengths)[:, None]).astype(np.int64)
    raise SystemExit(f"FAIL: input {spec['name']}: unknown values '{values}' in the manifest")


def profile_steps(spec):
    """Three shapes inside the input's profile (its minimum, a size between, its maximum) and
    one just outside it. The size between is odd-ish ((min + max) / 2 + 3, below the maximum),
    rounded down to the input's dim_multiple where it has one."""
    lo, hi = spec["min_shape"], spec["max_shape"]
    multiple = {int(a): m for a, m in spec.get("dim_multiple", {}).items()}
    middle, outside = [], []
    for axis, (l, h) in enumerate(zip(lo, hi)):
        m = max(l, min((l + h) // 2 + 3, h - 1))
        if axis in multiple:
            m = max(l, m // multiple[axis] * multiple[axis])
        middle.append(m)
        outside.append(h if l == h else h + multiple.get(axis, 32))
    return [lo, middle, hi], outside


def write_inputs(entry, folder, step, rng, zeros=False):
    """Every input of the model at profile step `step` (0, 1, 2: min, middle, max; 3: outside)
    into folder/<name>.npy (zeros for the outside step, which must be refused before running);
    inputs without a profile get their sample shape."""
    os.makedirs(folder, exist_ok=True)
    for spec in entry["inputs"]:
        if spec.get("min_shape"):
            steps, outside = profile_steps(spec)
            shape = outside if step == 3 else steps[step]
        else:
            shape = spec["sample_shape"]
        dtype = np.int64 if spec["dtype"] == "int64" else np.float32
        array = np.zeros(shape, dtype) if zeros else draw(spec, shape, rng)
        np.save(os.path.join(folder, spec["name"] + ".npy"), array)
    return folder


def ranged_shape_name(entry, step):
    spec = next(i for i in entry["inputs"] if i.get("min_shape"))
    steps, outside = profile_steps(spec)
    return dims(outside if step == 3 else steps[step])


def check_refused_outside(args, entry, engine, work):
    folder = write_inputs(entry, os.path.join(work, "outside"), 3, None, zeros=True)
    shape = ranged_shape_name(entry, 3)
    result = run([args.edgert, "run", engine]
                 + [f"--input={i['name']}={folder}/{i['name']}.npy" for i in entry["inputs"]], expect_ok=False)
    if result.returncode == 0 or "outside the engine's optimization profile" not in result.stderr:
        raise SystemExit(f"FAIL: shape {shape} outside the profile was not refused clearly")
    print(f"shape {shape} outside the profile refused as expected")


def check_dense(args, entry, engine, work):
    compare(args, entry, engine, os.path.join(args.zoo, entry["name"] + ".inputs"))
    if not any(i.get("min_shape") for i in entry["inputs"]):
        return
    rng = np.random.RandomState(7)
    for step in range(3):
        compare(args, entry, engine, write_inputs(entry, os.path.join(work, "shape_" + ranged_shape_name(entry, step)),
                                                  step, rng))
    check_refused_outside(args, entry, engine, work)


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 1.0


def check_detection(args, entry, engine, work):
    compare_boxes(args, entry, engine, os.path.join(args.zoo, entry["name"] + ".inputs"), work)
    if not any(i.get("min_shape") for i in entry["inputs"]):
        return
    rng = np.random.RandomState(7)
    for step in range(3):
        folder = os.path.join(work, "shape_" + ranged_shape_name(entry, step))
        compare_boxes(args, entry, engine, write_inputs(entry, os.path.join(folder, "inputs"), step, rng), folder)
    check_refused_outside(args, entry, engine, work)


def compare_boxes(args, entry, engine, inputs, work):
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
    {"classifier": check_dense, "segmentation": check_dense, "transformer": check_dense,
     "detection": check_detection, "digits": check_digits}[entry["kind"]](args, entry, engine, work)
    print(f"PASS: {entry['name']}")


if __name__ == "__main__":
    main()
