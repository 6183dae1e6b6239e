#!/usr/bin/env python3
"""The zoo on the GPU machine: accuracy of GPU engines and their speed against PyTorch.

Run by tests/gpu/run-on-device (which sets up the bundle's paths); on its own:

  gpu_zoo.py --edgert BIN --agreement BIN --anchor torch_anchor.py --work DIR
             [--models resnet18,...] [--accuracy] [--bench] [--anchor-modes graph] [--fp32-layouts nhwc]

Speed: the networks torch_anchor.py --export writes (the very ones PyTorch is timed on; random
weights, seed 0). Accuracy: the zoo of tests/models/make_zoo.py exported on the machine (the
same architectures with calibrated BatchNorm statistics; LR-ASPP and SSDlite with --extra).
Engines are built for board x86_64-cuda-sm90 with the CUDA plugin preferred, FP32 and --fp16.

--accuracy: every FP32 engine against ONNX Runtime on one input (relative L2 <= 1e-4; SSDlite
  boxes compared as a set); every FP16 engine within 1e-2 of ONNX Runtime and, for the
  classifiers, the FP32 engine's top-1 on >= 99% of 200 random inputs (edgert_engine_agreement);
  the device arena at most 50% of the summed activation sizes (inspect --json). Beside each
  classifier's FP16 agreement, PyTorch's own float16 on the same network and 200 inputs
  (torch_fp16_agreement.py), the peer's figure for the same criterion. With --digits, the task
  metric on real data: the trained digits CNN's accuracy on its held-out split, FP16 within half
  a point of FP32.
--bench: edgert bench (GPU compute time, CUDA graph replay) beside torch_anchor.py's eager and
  CUDA-graph times in the same run; prints the ratios and their geometric means.
Prints a table last and writes everything to --json.
"""
import argparse, json, math, os, re, subprocess, sys, time

import numpy as np

CLASSIFIERS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1",
               "shufflenet_v2_x1_0", "resnet50"]
# The vision transformers (fused attention on the GPU): accuracy against ONNX Runtime and speed,
# as the CNNs; their zoo exports have a dynamic batch, so no 200-input top-1 agreement.
TRANSFORMERS = ["vit_b_16", "swin_t"]
BOARD = "x86_64-cuda-sm90"


def sh(cmd, warnings=None, **kw):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}, {time.time() - t0:.1f} s):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    if warnings is not None:
        warnings += [line for line in p.stderr.splitlines() if "warning" in line]
    return p.stdout


def export_zoo(work, names):
    """The zoo as CI has it (tests/models/make_zoo.py: BatchNorm statistics calibrated on random
    batches, logits scaled to unit spread), exported on this machine: realistic activations for
    the accuracy criteria, where torchvision's random initialisation gives logits of ~1e-9 that
    float16 cannot hold."""
    zoo = f"{work}/zoo"
    sh([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "make_zoo.py"),
        "--out", zoo, "--only", ",".join(names)])
    return {n: f"{zoo}/{n}.onnx" for n in names if os.path.exists(f"{zoo}/{n}.onnx")}


def rel_l2(a, b):
    a = a.astype(np.float64).ravel(); b = b.astype(np.float64).ravel()
    if a.shape != b.shape or not np.all(np.isfinite(a)):
        return float("inf")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def run_edgert(args, engine, inputs, work, tag):
    out_dir = f"{work}/out-{tag}"
    os.makedirs(out_dir, exist_ok=True)
    cmd = [args.edgert, "run", engine, "--npy", "--output-dir", out_dir, "-q"]
    for name, arr in inputs.items():
        p = f"{work}/in-{tag}-{name}.npy"
        np.save(p, arr)
        cmd += ["--input", f"{name}={p}"]
    sh(cmd)
    return {f[:-4]: np.load(f"{out_dir}/{f}") for f in os.listdir(out_dir) if f.endswith(".npy")}


def accuracy(args, name, onnx_path, work, results):
    import onnxruntime as ort
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    sample = os.path.join(os.path.dirname(onnx_path), f"{name}.inputs", "input.npy")
    rng = np.random.default_rng(7)
    inputs = {i.name: (np.load(sample) if os.path.exists(sample) else
                       rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32))
              for i in sess.get_inputs()}
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))
    row = results.setdefault(name, {})
    for tag, extra in (("fp32", []), ("fp16", ["--fp16"])):
        engine = f"{work}/{name}.{tag}.accuracy.engine"
        t0 = time.time()
        warnings = []
        built = sh([args.edgert, "build", onnx_path, "--board", BOARD, "-o", engine, "--timing-cache",
                    f"{work}/timing.cache"] + extra, warnings=warnings)
        if warnings:
            row[f"{tag}_build_warnings"] = warnings
        row[f"{tag}_build_s"] = round(time.time() - t0, 1)
        if tag == "fp16":
            # The accuracy check's report: "fp16: N layer(s) in float16[, the first K that take it
            # kept float32 ...]: relative L2 E against float32".
            m = re.search(r"fp16: (\d+) layer\(s\) in float16(?:, the first (\d+) that take it)?.*?relative L2 ([0-9.e+-]+)", built)
            if m:
                row["fp16_layers"] = int(m.group(1))
                row["fp16_kept_float32"] = int(m.group(2) or 0)
                row["fp16_check_rel_l2"] = float(m.group(3))
        info = json.loads(sh([args.edgert, "inspect", "--json", engine]))
        nodes = info["graphs"][0]["nodes"]
        row[f"{tag}_gpu_nodes"] = sum(n["plugin"] == "cuda" for n in nodes)
        row[f"{tag}_nodes"] = len(nodes)
        plan = info["memory_plan"] or {}
        if tag == "fp32" and plan.get("activation_bytes"):
            row["device_arena_share"] = (plan.get("device_arena_bytes", 0) + plan.get("unified_arena_bytes", 0) +
                                         plan.get("arena_bytes", 0)) / plan["activation_bytes"]
        got = run_edgert(args, engine, inputs, work, f"{name}-{tag}")
        if name.startswith("ssdlite"):
            # Boxes as a set: every reference box above 0.3 score has an edgert box within 1e-2.
            wb, gb = want["boxes"], got.get("boxes", np.zeros((0, 4)))
            keep = want["scores"] > 0.3
            matched = all(np.any(np.all(np.abs(gb - b) <= 1e-2 * (1 + np.abs(b)), axis=1)) for b in wb[keep]) if gb.size else not keep.any()
            row[f"{tag}_boxes_match"] = bool(matched)
            row[f"{tag}_ok"] = bool(matched) and abs(len(gb) - len(wb)) <= max(1, len(wb) // 20)
            continue
        errs = {o: rel_l2(got[o], want[o]) for o in want if o in got}
        row[f"{tag}_rel_l2"] = max(errs.values()) if errs else float("inf")
        row[f"{tag}_ok"] = row[f"{tag}_rel_l2"] <= (1e-4 if tag == "fp32" else 1e-2)
    if name in CLASSIFIERS:
        agree = json.loads(sh([args.agreement, f"{work}/{name}.fp16.accuracy.engine",
                               f"{work}/{name}.fp32.accuracy.engine", "200"]))
        row["fp16_top1_agreement"] = agree["top1_agreement"]
        row["fp16_max_rel_l2_200"] = agree["max_rel_l2"]
        row["fp16_ok"] = row["fp16_ok"] and agree["top1_agreement"] >= 0.99
        # PyTorch's own float16 on the same network and as many inputs: the peer's figure.
        torch_agree = json.loads(sh([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "torch_fp16_agreement.py"), name, "200"])
                                 .strip().splitlines()[-1])  # after make_zoo's progress lines
        row["torch_fp16_top1_agreement"] = torch_agree["top1_agreement"]
        row["torch_fp16_max_rel_l2_200"] = torch_agree["max_rel_l2"]


def digits_task(args, work, results):
    """The task metric on real data: the trained digits CNN (tests/models/make_zoo.py) on its
    held-out split, FP32 and FP16 engines built for the whole split as one batch."""
    x = np.load(f"{args.digits}/digits_test_x.npy")
    y = np.load(f"{args.digits}/digits_test_y.npy")
    n = len(x)
    row = results.setdefault("digits_cnn", {"test_samples": n})
    for tag, extra in (("fp32", []), ("fp16", ["--fp16"])):
        engine = f"{work}/digits_cnn.{tag}.engine"
        sh([args.edgert, "build", f"{args.digits}/digits_cnn.onnx", "--board", BOARD, "-o", engine,
            "--min-shapes", "input:1x1x8x8", "--opt-shapes", f"input:{n}x1x8x8", "--max-shapes", f"input:{n}x1x8x8",
            "--timing-cache", f"{work}/timing.cache"] + extra)
        got = run_edgert(args, engine, {"input": x}, work, f"digits-{tag}")
        row[f"{tag}_accuracy"] = float(np.mean(np.argmax(got["logits"], axis=1) == y))
    row["fp16_ok"] = row["fp16_accuracy"] >= row["fp32_accuracy"] - 0.5 / 100


def bench(args, name, onnx_path, work, results):
    row = results.setdefault(name, {})
    # FP16 as PyTorch's .half() runs it: every layer that takes float16 in it, no accuracy check
    # (the anchor's networks have torchvision's random initialisation, whose float16 logits
    # underflow: a check would keep them float32). The zoo's FP16 engine of the same
    # architecture, built with the check, is timed beside it as fp16_checked.
    variants = [("fp32", []), ("fp16", ["--fp16", "--fp16-tolerance", "0"])]
    checked = f"{work}/{name}.fp16.accuracy.engine"
    if os.path.exists(checked):
        variants.append(("fp16_checked", None))
    # Other layouts of the FP32 engine, for comparison (the ratios use the default build).
    variants += [(f"fp32_{layout}", ["--gpu-layout", layout]) for layout in args.fp32_layouts.split(",") if layout]
    if args.int8:
        # INT8 calibrated on inputs drawn as the anchor's (uniform [0, 1)); "int8": the rest of
        # the network (the classifier) in float32, "int8_fp16": in float16 (trtexec --int8 --fp16).
        calib = calibration_inputs(work, name)
        cache = f"{work}/{name}.calib"
        int8 = ["--int8", "--calib", calib, "--calib-cache", cache]
        variants += [("int8", int8), ("int8_fp16", int8 + ["--fp16", "--fp16-tolerance", "0"])]
    for tag, extra in variants:
        engine = checked if extra is None else f"{work}/{name}.{tag}.engine"
        if not os.path.exists(engine):
            sh([args.edgert, "build", onnx_path, "--board", BOARD, "-o", engine, "--timing-cache",
                f"{work}/timing.cache"] + extra)
        # The zoo's transformers have a dynamic batch and their checked engine no profile: timed
        # at the zoo's sample (batch 1), as the anchor's networks are.
        sample = os.path.join(work, "zoo", f"{name}.inputs", "input.npy")
        at_sample = ["--input", f"input={sample}"] if extra is None and os.path.exists(sample) else []
        j = json.loads(sh([args.edgert, "bench", engine, "--iterations", str(args.iters), "--warmup", "20",
                           "--json", "-"] + at_sample))
        # None where host kernels in the run wait for the device (no device time to tell).
        row[f"edgert_{tag}_gpu_ms"] = (j["gpu_compute_ms"] or {}).get("median")
        row[f"edgert_{tag}_latency_ms"] = j["latency_ms"]["median"]
        row[f"edgert_{tag}_cuda_graph"] = j["cuda_graph"]
    if args.int8:
        int8_agreement(args, name, onnx_path, work, row)


def calibration_inputs(work, name, samples=8):
    folder = f"{work}/calib-{name}"
    if not os.path.isdir(folder):
        os.makedirs(folder)
        rng = np.random.default_rng(3)
        for i in range(samples):
            np.save(f"{folder}/{i:03d}.npy", rng.random((1, 3, 224, 224), dtype=np.float32))
    return folder


def int8_agreement(args, name, onnx_path, work, row):
    """The GPU's INT8 engine against the CPU's INT8 engine of the same calibration cache (the
    same quantization: the GPU's INT8 kernels compute the CPU reference's bytes, so what differs
    is the float32 classifier's summation order) and against the GPU's FP32 engine."""
    cpu = f"{work}/{name}.int8_cpu.engine"
    sh([args.edgert, "build", onnx_path, "--board", "x86_64-avx512", "-o", cpu, "--int8", "--calib-cache",
        f"{work}/{name}.calib", "--tactics", "first"])
    x = {"input": np.random.default_rng(5).random((1, 3, 224, 224), dtype=np.float32)}
    got = {tag: run_edgert(args, engine, x, work, f"{name}-{tag}")["output"]
           for tag, engine in (("int8", f"{work}/{name}.int8.engine"), ("int8_cpu", cpu),
                               ("fp32", f"{work}/{name}.fp32.engine"))}
    row["int8_gpu_vs_cpu_int8_rel_l2"] = rel_l2(got["int8"], got["int8_cpu"])
    row["int8_vs_fp32_rel_l2"] = rel_l2(got["int8"], got["fp32"])
    info = json.loads(sh([args.edgert, "inspect", "--json", f"{work}/{name}.int8.engine"]))
    nodes = info["graphs"][0]["nodes"]
    row["int8_gpu_qlinear_conv"] = sum(n["plugin"] == "cuda" and n["op"] == "QLinearConv" for n in nodes)
    row["int8_cpu_nodes"] = sum(n["plugin"] == "cpu" for n in nodes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgert", required=True)
    ap.add_argument("--agreement", required=True)
    ap.add_argument("--anchor", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default=",".join(CLASSIFIERS + TRANSFORMERS))
    ap.add_argument("--accuracy", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--extra", action="store_true", help="LR-ASPP and SSDlite too (accuracy)")
    ap.add_argument("--anchor-modes", default="eager,graph", help="torch_anchor.py --modes (compile: torch.compile)")
    ap.add_argument("--anchor-dtypes", default="fp32,fp16", help="torch_anchor.py --dtypes")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--json", default="")
    ap.add_argument("--digits", default="", help="folder with digits_cnn.onnx and its test split (accuracy)")
    ap.add_argument("--fp32-layouts", default="", help="also bench FP32 engines built with these --gpu-layout values")
    ap.add_argument("--int8", action="store_true", help="also bench INT8 engines (calibrated) beside FP16 (--bench)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    models = args.models.split(",")
    anchor = []
    anchor_cmd = [sys.executable, args.anchor, "--models", ",".join(models), "--dtypes", args.anchor_dtypes,
                  "--export", args.work,
                  "--modes", args.anchor_modes if args.bench else "eager", "--iters", str(args.iters if args.bench else 1),
                  "--json", f"{args.work}/anchor.json"]
    print(f"# {' '.join(anchor_cmd)}", file=sys.stderr, flush=True)
    sh(anchor_cmd)
    with open(f"{args.work}/anchor.json") as f:
        anchor = json.load(f)
    # Speed on the anchor's own networks; accuracy on the zoo's (same architectures, calibrated).
    paths = {m: f"{args.work}/{m}.onnx" for m in models}
    zoo_names = [m for m in models if m != "resnet50"] + (["lraspp_mobilenet_v3_large", "ssdlite320_mobilenet_v3_large"]
                                                          if args.extra else [])
    zoo = export_zoo(args.work, zoo_names) if args.accuracy else {}
    results, failures = {}, []
    for name in dict.fromkeys(list(paths) + list(zoo)):
        try:
            if args.accuracy and name in zoo:
                accuracy(args, name, zoo[name], args.work, results)
            if args.bench and name in paths:
                bench(args, name, paths[name], args.work, results)
        except Exception as e:
            failures.append(name)
            results.setdefault(name, {})["error"] = str(e)[-2000:]
            print(f"# {name}: {e}", file=sys.stderr, flush=True)
        print(f"# {name}: {json.dumps(results.get(name))}", file=sys.stderr, flush=True)
    if args.accuracy and args.digits:
        try:
            digits_task(args, args.work, results)
        except Exception as e:
            failures.append("digits_cnn")
            results.setdefault("digits_cnn", {})["error"] = str(e)[-2000:]
        print(f"# digits_cnn: {json.dumps(results.get('digits_cnn'))}", file=sys.stderr, flush=True)
    for a in anchor:
        r = results.setdefault(a["model"], {})
        r[f"torch_{a['dtype']}_{a['mode']}_ms"] = a["median_ms"]
        mine = r.get(f"edgert_{a['dtype']}_gpu_ms")
        if a["mode"] == "compile" and mine:
            r[f"ratio_{a['dtype']}_vs_compile"] = mine / a["median_ms"]
            print(f"{a['model']} {a['dtype']}: edgert {mine:.3f} ms, torch.compile (max-autotune) "
                  f"{a['median_ms']:.3f} ms, ratio {mine / a['median_ms']:.3f}")
    # Ratios: edgert GPU compute time over PyTorch's CUDA-graph replay, per precision.
    table = []
    geo = {"fp16": [], "fp32": [], "fp16_checked": []}
    for name in models:
        r = results.get(name, {})
        line = [name]
        for dt in ("fp16", "fp32", "fp16_checked"):
            e, t = r.get(f"edgert_{dt}_gpu_ms"), r.get(f"torch_{dt[:4]}_graph_ms")
            ratio = e / t if e and t else None
            r[f"ratio_{dt}"] = ratio
            if ratio:
                geo[dt].append(ratio)
            line += [e, t, ratio]
        table.append(line)
    summary = {dt: math.exp(sum(map(math.log, v)) / len(v)) if v else None for dt, v in geo.items()}
    out = {"results": results, "geomean_ratio": summary, "failures": failures}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if args.accuracy:
        print("\nmodel                          fp32 relL2   fp16 relL2  top1(200) torch top1  gpu/all nodes  arena/act  ok")
        for name in zoo:
            r = results.get(name, {})
            print(f"{name:30s} {r.get('fp32_rel_l2', float('nan')):10.2e} {r.get('fp16_rel_l2', float('nan')):10.2e}"
                  f" {r.get('fp16_top1_agreement', float('nan')):9.3f} {r.get('torch_fp16_top1_agreement', float('nan')):9.3f}"
                  f"  {r.get('fp32_gpu_nodes', 0):5d}/{r.get('fp32_nodes', 0):<5d}"
                  f"      {r.get('device_arena_share', float('nan')):7.2f}  {r.get('fp32_ok')}/{r.get('fp16_ok')}"
                  f"  kept fp32 {r.get('fp16_kept_float32', '-')}/{r.get('fp16_layers', '-')}"
                  f"  build s {r.get('fp32_build_s', '-')}/{r.get('fp16_build_s', '-')}"
                  f"{'  ERROR' if 'error' in r else ''}")
    if "digits_cnn" in results and "fp32_accuracy" in results["digits_cnn"]:
        d = results["digits_cnn"]
        print(f"\ndigits_cnn on its {d['test_samples']} held-out digits: accuracy FP32 {d['fp32_accuracy']:.4f},"
              f" FP16 {d['fp16_accuracy']:.4f}  ok {d['fp16_ok']}")
    if args.bench:
        print("\nmodel               edgert fp16  torch fp16  ratio   edgert fp32  torch fp32  ratio"
              "   fp16 checked  ratio   (GPU ms, median)")
        for line in table:
            f = lambda v, w=10: f"{v:{w}.3f}" if v else " " * (w - 1) + "-"
            print(f"{line[0]:18s} {f(line[1])} {f(line[2])} {f(line[3], 7)} {f(line[4])} {f(line[5])} {f(line[6], 7)}"
                  f"  {f(line[7], 12)} {f(line[9], 7)}")
        print(f"geometric mean ratio: fp16 {summary['fp16']}, fp32 {summary['fp32']}, "
              f"fp16 checked {summary['fp16_checked']} (models with a zoo engine)")
    if args.bench and args.int8:
        print("\nmodel               edgert fp16  int8 (fp32 rest)  int8/fp16  int8+fp16  int8+fp16/fp16"
              "  rel L2 vs CPU int8  vs fp32  (GPU ms, median)")
        for name in models:
            r = results.get(name, {})
            f16, i8, i8h = (r.get(f"edgert_{t}_gpu_ms") for t in ("fp16", "int8", "int8_fp16"))
            f = lambda v, w=10, p=3: f"{v:{w}.{p}f}" if v else " " * (w - 1) + "-"
            print(f"{name:18s} {f(f16)} {f(i8, 17)} {f(i8 / f16 if i8 and f16 else None)} {f(i8h)}"
                  f" {f(i8h / f16 if i8h and f16 else None, 15)}  {r.get('int8_gpu_vs_cpu_int8_rel_l2', float('nan')):18.2e}"
                  f" {r.get('int8_vs_fp32_rel_l2', float('nan')):8.3f}  QLinearConv on the GPU"
                  f" {r.get('int8_gpu_qlinear_conv', '-')}, CPU nodes {r.get('int8_cpu_nodes', '-')}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
