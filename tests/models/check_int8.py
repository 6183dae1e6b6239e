#!/usr/bin/python3
"""INT8 engines of zoo models against their float32 engines, the way CTest runs it.

  check_int8.py --zoo DIR --edgert build/bin/edgert --model NAME [--work DIR]

digits_cnn (trained on sklearn's handwritten digits, real data): calibrated on 128 training
images (entropy), its held-out accuracy in INT8 must be within 0.5 points of float32's. The
calibration cache it wrote must give the same engine again without the calibration inputs, and
be refused, with a message, for another model and for another calibrator. `edgert quantize
--export-qdq` writes the same quantization as a Q/DQ model: edgert builds it back into an engine
whose outputs equal the calibrated engine's, and ONNX Runtime running the Q/DQ model agrees with
it (relative L2 <= MAX_DIGITS_QDQ_REL_L2).
Classifiers (random weights, so no task metric): calibrated on seeded normal inputs (the
distribution their BatchNorm statistics were set with), the INT8 engine must compute what ONNX
Runtime computes on the Q/DQ model `edgert quantize` exports from the same calibration cache
(relative L2 <= MAX_ORT_QDQ_REL_L2), and stay within a relative L2 of MAX_CLASSIFIER_REL_L2 of the float32
logits (random weights amplify 8-bit rounding: resnet18 0.034, squeezenet1_1 0.013,
shufflenet_v2_x1_0 0.16, mobilenet_v2 0.22 with every calibrator, efficientnet_b0 0.47, what the
accuracy guard is for; a wrong scale or layout gives about 1).
BF16 (--bf16, on a CPU with AVX512_BF16; elsewhere said so and not built): with --tactics first
every dense convolution takes its bfloat16 tactic, which inspect must show; the digits CNN's
held-out accuracy must stay within 0.5 points of float32's, a classifier's logits within
MAX_BF16_REL_L2 of float32's (bfloat16 keeps 8 bits of each factor: resnet18 0.008,
mobilenet_v2 0.022 with the builder's accuracy check keeping its first 11 layers float32).
"""
import os
import subprocess

import numpy as np

from check_zoo import dims, run, zoo_model_args

MAX_ACCURACY_LOSS = 0.005
MAX_CLASSIFIER_REL_L2 = 0.3
# ONNX Runtime runs the Q/DQ models unfused (`edgert compare --ort-optimization disabled`):
# DequantizeLinear, the float op, QuantizeLinear, as the model defines them. Its fused integer
# kernels are no reference on every CPU: on AVX2 without VNNI they multiply u8 x s8 in
# vpmaddubsw, which saturates a pair of products (the first convolution of the digits CNN came
# out up to 130 levels off, mobilenet_v2's logits 0.29 relative L2 off). Unfused, a requantized
# value lands on the neighbouring uint8 level where the float sum and edgert's integer one round
# a tie apart, and that grows with depth: digits 4.1e-4, squeezenet1_1 0.003, resnet18 0.008,
# mobilenet_v2 0.041 (ReLU6 and residual adds in every block). A kernel computing wrong bytes
# gives 0.3 or more.
MAX_DIGITS_QDQ_REL_L2 = 2e-3
MAX_ORT_QDQ_REL_L2 = 0.08
# The builder holds a bfloat16 engine within --bf16-tolerance (2e-2) of float32 on its own seeded
# inputs; on the zoo's input the same engine may sit a little past it (mobilenet_v2: 0.0215 where
# the builder measured 0.020). A wrong kernel or layout gives about 1.
MAX_BF16_REL_L2 = 0.04
BF16_BOARD = "x86_64-avx512-bf16"


def host_has_bf16():
    with open("/proc/cpuinfo") as f:
        return " avx512_bf16" in f.read()


def build_bf16(args, entry, work):
    """The bfloat16 engine (every dense convolution on its bfloat16 tactic), or None without
    AVX512_BF16 here."""
    if not host_has_bf16():
        print("this CPU has no AVX512_BF16: the bfloat16 engine is not built or checked here")
        return None
    engine = os.path.join(work, "bf16.engine")
    build(args, entry, engine, ["--bf16", "--board", BF16_BOARD, "--threads", "2"])
    listing = subprocess.run([args.edgert, "inspect", engine], capture_output=True, text=True, check=True).stdout
    layers = listing.count("[bfloat16 (--bf16")
    print(f"bf16: {layers} layer(s) in bfloat16")
    if layers == 0:
        raise SystemExit("FAIL: --bf16 --tactics first put no layer in bfloat16")
    return engine


def build(args, entry, engine, extra, expect_ok=True):
    cmd = [args.edgert, "build", os.path.join(args.zoo, entry["file"]), "-o", engine, "--tactics", "first"] + extra
    ranges = [i for i in entry["inputs"] if i.get("min_shape")]
    for flag, key in (("--min-shapes", "min_shape"), ("--opt-shapes", "opt_shape"), ("--max-shapes", "max_shape")):
        if ranges:
            cmd += [flag, ",".join(f"{i['name']}:{dims(i[key])}" for i in ranges)]
    return run(cmd, expect_ok)


def outputs(args, engine, input_name, x, work, tag):
    path = os.path.join(work, f"{tag}_x.npy")
    np.save(path, x)
    out = os.path.join(work, f"{tag}_out")
    run([args.edgert, "run", engine, "--input", f"{input_name}={path}", "--npy", "--output-dir", out, "-q"])
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}


def check_digits(args, entry, work):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    x_train, _, _, _ = train_test_split(x, digits.target, test_size=0.25, random_state=0, stratify=digits.target)
    calib = os.path.join(work, "calib")
    os.makedirs(calib, exist_ok=True)
    for i in range(8):
        np.save(os.path.join(calib, f"{i:03d}.npy"), x_train[16 * i:16 * (i + 1)])
    cache = os.path.join(work, "digits.calib")
    if os.path.exists(cache):
        os.remove(cache)
    fp32, int8, again = (os.path.join(work, n) for n in ("fp32.engine", "int8.engine", "again.engine"))
    build(args, entry, fp32, [])
    build(args, entry, int8, ["--int8", "--calib", calib, "--calib-cache", cache, "-v"])
    test_x = np.load(os.path.join(args.zoo, entry["test_x"])).astype(np.float32)
    test_y = np.load(os.path.join(args.zoo, entry["test_y"]))
    name, out = entry["inputs"][0]["name"], entry["outputs"][0]["name"]
    acc = {}
    for tag, engine in (("fp32", fp32), ("int8", int8)):
        logits = outputs(args, engine, name, test_x, work, tag)[out]
        acc[tag] = float((logits.argmax(axis=1) == test_y).mean())
    print(f"digits held-out accuracy on {len(test_y)} images: float32 {acc['fp32']:.4f}, int8 {acc['int8']:.4f}")
    if acc["fp32"] - acc["int8"] > MAX_ACCURACY_LOSS:
        raise SystemExit(f"FAIL: int8 loses {100 * (acc['fp32'] - acc['int8']):.2f} points (at most "
                         f"{100 * MAX_ACCURACY_LOSS:.1f})")
    bf16 = build_bf16(args, entry, work)
    if bf16:
        logits = outputs(args, bf16, name, test_x, work, "bf16")[out]
        acc["bf16"] = float((logits.argmax(axis=1) == test_y).mean())
        print(f"digits held-out accuracy: bfloat16 {acc['bf16']:.4f}")
        if acc["fp32"] - acc["bf16"] > MAX_ACCURACY_LOSS:
            raise SystemExit(f"FAIL: bfloat16 loses {100 * (acc['fp32'] - acc['bf16']):.2f} points")

    # The cache alone gives the same engine.
    build(args, entry, again, ["--int8", "--calib-cache", cache])
    if open(again, "rb").read() != open(int8, "rb").read():
        raise SystemExit("FAIL: the engine built from the calibration cache differs from the calibrated one")
    print("the calibration cache alone gives the same engine, byte for byte")

    # Refusals: another calibrator, another model.
    refused = build(args, entry, again, ["--int8", "--calib-cache", cache, "--calibrator", "minmax"],
                    expect_ok=False)
    for result, what in ((refused, "calibrator"),):
        if result.returncode == 0 or what not in result.stderr:
            raise SystemExit(f"FAIL: a cache of another {what} was not refused with a message naming it")
    other = os.path.join(args.zoo, "resnet18.onnx")
    if os.path.exists(other):
        result = run([args.edgert, "build", other, "-o", again, "--int8", "--calib-cache", cache, "--tactics",
                      "first"], expect_ok=False)
        if result.returncode == 0 or "sha256" not in result.stderr:
            raise SystemExit("FAIL: the cache of another model was not refused with a message naming its hash")
    print("caches of another calibrator and another model refused")

    # Explicit quantization: the same ranges as a Q/DQ model, built back without --int8.
    qdq, qdq_engine = os.path.join(work, "digits_qdq.onnx"), os.path.join(work, "qdq.engine")
    run([args.edgert, "quantize", os.path.join(args.zoo, entry["file"]), "--calib-cache", cache, "--export-qdq", qdq])
    qdq_entry = dict(entry, file=qdq)
    build(args, dict(qdq_entry, file=os.path.relpath(qdq, args.zoo)), qdq_engine, [])
    got = outputs(args, qdq_engine, name, test_x, work, "qdq")[out]
    want = outputs(args, int8, name, test_x, work, "int8")[out]
    if not np.array_equal(got, want):
        raise SystemExit(f"FAIL: the Q/DQ model's engine differs from the calibrated engine by "
                         f"{np.abs(got - want).max()}")
    print("the exported Q/DQ model builds into an engine equal to the calibrated one")

    # The accuracy guard on the held-out split, with its labels.
    val = os.path.join(work, "validation")
    os.makedirs(val, exist_ok=True)
    np.save(os.path.join(val, "000.npy"), test_x)
    np.save(os.path.join(val, "labels.npy"), test_y.astype(np.int64))
    guarded = build(args, entry, os.path.join(work, "guarded.engine"),
                    ["--int8", "--calib-cache", cache, "--accuracy-guard", "top1:0.5", "--validation", val])
    if "within tolerance" not in guarded.stdout:
        raise SystemExit("FAIL: the accuracy guard did not report the engine within tolerance")
    run([args.edgert, "compare", qdq, qdq_engine, "--inputs", os.path.join(args.zoo, entry["name"] + ".inputs"),
         "--ort-optimization", "disabled", "--max-rel-l2", str(MAX_DIGITS_QDQ_REL_L2)])


def check_classifier(args, entry, work):
    shape = entry["inputs"][0]["shape"]
    rng = np.random.default_rng(2026)
    calib = os.path.join(work, "calib")
    os.makedirs(calib, exist_ok=True)
    for i in range(8):
        np.save(os.path.join(calib, f"{i:03d}.npy"), rng.standard_normal(shape).astype(np.float32))
    fp32, int8 = os.path.join(work, "fp32.engine"), os.path.join(work, "int8.engine")
    cache, qdq = os.path.join(work, "calib.cache"), os.path.join(work, "qdq.onnx")
    if os.path.exists(cache):
        os.remove(cache)
    build(args, entry, fp32, [])
    build(args, entry, int8, ["--int8", "--calib", calib, "--calib-cache", cache])
    inputs_dir = os.path.join(args.zoo, entry["name"] + ".inputs")
    run([args.edgert, "quantize", os.path.join(args.zoo, entry["file"]), "--calib-cache", cache, "--export-qdq", qdq])
    run([args.edgert, "compare", qdq, int8, "--inputs", inputs_dir, "--ort-optimization", "disabled",
         "--max-rel-l2", str(MAX_ORT_QDQ_REL_L2)])
    sample = np.load(os.path.join(inputs_dir, sorted(f for f in os.listdir(inputs_dir) if f.endswith(".npy"))[0]))
    name, out = entry["inputs"][0]["name"], entry["outputs"][0]["name"]
    ref = outputs(args, fp32, name, sample, work, "fp32")[out]
    got = outputs(args, int8, name, sample, work, "int8")[out]
    rel = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    print(f"{entry['name']}: int8 logits relative L2 {rel:.4f} against float32; top-1 float32 "
          f"{int(ref.argmax())}, int8 {int(got.argmax())}")
    if rel > MAX_CLASSIFIER_REL_L2:
        raise SystemExit("FAIL: int8 drifts from float32")
    bf16 = build_bf16(args, entry, work)
    if bf16:
        got = outputs(args, bf16, name, sample, work, "bf16")[out]
        rel_bf16 = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
        print(f"{entry['name']}: bfloat16 logits relative L2 {rel_bf16:.4f} against float32")
        if rel_bf16 > MAX_BF16_REL_L2:
            raise SystemExit("FAIL: bfloat16 drifts from float32")

    # The accuracy guard asked for less drift than every layer in int8 gives: layers fall back to
    # float32 until the validation set's logits are within it.
    val = os.path.join(work, "validation")
    os.makedirs(val, exist_ok=True)
    rng = np.random.default_rng(7)
    for i in range(2):
        np.save(os.path.join(val, f"{i:03d}.npy"), rng.standard_normal(shape).astype(np.float32))
    guarded = build(args, entry, os.path.join(work, "guarded.engine"),
                    ["--int8", "--calib-cache", cache, "--accuracy-guard", f"rel-l2:{0.7 * rel:.4f}",
                     "--validation", val])
    kept = [line for line in guarded.stdout.splitlines() if "kept float32" in line]
    if "within tolerance" not in guarded.stdout or not kept:
        raise SystemExit("FAIL: the accuracy guard did not bring the engine within tolerance with layers in float32")
    print(f"accuracy guard: {len(kept)} layer(s) kept in float32")


def main():
    args, entry, work = zoo_model_args(__doc__, "edgert-int8-")
    (check_digits if entry["kind"] == "digits" else check_classifier)(args, entry, work)
    print(f"PASS: int8 {entry['name']}")


if __name__ == "__main__":
    main()
