#!/usr/bin/python3
"""Checks the model zoo written by tests/models/make_zoo.py against ONNX Runtime and edgert.

  /usr/bin/python3 tests/bench/verify_zoo.py --zoo DIR [--work DIR] [--edgert PATH] [--only a,b]

For every model in DIR/manifest.json:
  1. runs tests/models/ort_reference.js on the sample inputs; checks the outputs (no NaN/Inf,
     float outputs with a non-degenerate spread) and their relative L2 error against the
     PyTorch outputs saved by make_zoo.py (NAME.expected/);
  2. builds it with `edgert build` and runs it with `edgert run ... --npy`, and reports the
     relative L2 error ||edgert - ort|| / ||ort|| for each output, or the build/run error verbatim;
  3. for digits_cnn, also the accuracy of ORT and edgert on the held-out split.
Prints a Markdown summary to stdout. Runs one process at a time (frugal on CPU).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORT_JS = os.path.join(REPO, "tests", "models", "ort_reference.js")


def rel_l2(a, ref):
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if a.shape != ref.shape:
        return None
    den = np.linalg.norm(ref)
    return float(np.linalg.norm(a - ref) / (den if den > 0 else 1.0))


def run(cmd, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return p.returncode, p.stdout, time.time() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n[timed out after {timeout}s]", time.time() - t0


def load_outputs(d, names):
    return {n: np.load(os.path.join(d, n.replace("/", "_") + ".npy")) for n in names}


def sanity(name, arr):
    msgs = []
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all():
            msgs.append(f"{name}: {int((~np.isfinite(arr)).sum())} non-finite values")
        elif arr.size > 1 and float(arr.std()) < 1e-3:
            msgs.append(f"{name}: degenerate spread (std {float(arr.std()):.3g})")
    return msgs


def fmt(v):
    return "n/a" if v is None else f"{v:.2e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--work", default="/tmp/edgert_verify", help="engines and outputs go here")
    ap.add_argument("--edgert", default=os.path.join(REPO, "build", "bin", "edgert"))
    ap.add_argument("--board", default="x86_64-generic")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per edgert/ORT command")
    args = ap.parse_args()

    with open(os.path.join(args.zoo, "manifest.json")) as f:
        manifest = json.load(f)
    models = manifest["models"]
    if args.only:
        keep = set(args.only.split(","))
        models = [m for m in models if m["name"] in keep]
    os.makedirs(args.work, exist_ok=True)

    rows, errors = [], []
    for m in models:
        name = m["name"]
        onnx_path = os.path.join(args.zoo, m["file"])
        in_dir = os.path.join(args.zoo, name + ".inputs")
        out_names = [o["name"] for o in m["outputs"]]
        row = {"model": name, "ort": "", "torch": "", "build": "", "run": "", "edgert": ""}
        print(f"== {name}", file=sys.stderr, flush=True)

        # --- ONNX Runtime
        ort_dir = os.path.join(args.work, name, "ort")
        rc, out, dt = run(["node", ORT_JS, onnx_path, in_dir, ort_dir], args.timeout)
        if rc != 0:
            row["ort"] = "FAILED"
            errors.append((name, "ort_reference.js", out.strip()))
            rows.append(row)
            continue
        ort = load_outputs(ort_dir, out_names)
        problems = [p for n, a in ort.items() for p in sanity(n, a)]
        row["ort"] = "ok" if not problems else "; ".join(problems)
        row["ort_std"] = ", ".join(f"{n} {float(a.std()):.3g}" for n, a in ort.items() if a.dtype.kind == "f")
        exp_dir = os.path.join(args.zoo, m.get("expected_dir", name + ".expected"))
        if os.path.isdir(exp_dir):
            exp = load_outputs(exp_dir, out_names)
            row["torch"] = ", ".join(f"{n} {fmt(rel_l2(ort[n], exp[n]))}" for n in out_names)

        # --- edgert build
        engine = os.path.join(args.work, name + ".engine")
        if os.path.exists(engine):
            os.remove(engine)
        rc, out, dt = run([args.edgert, "build", onnx_path, "--board", args.board, "-o", engine], args.timeout)
        if rc != 0:
            row["build"] = "FAILED"
            errors.append((name, "edgert build", out.strip()))
            rows.append(row)
            continue
        row["build"] = f"ok ({dt:.1f}s)"

        # --- edgert run
        e_dir = os.path.join(args.work, name, "edgert")
        os.makedirs(e_dir, exist_ok=True)
        for f in os.listdir(e_dir):
            os.remove(os.path.join(e_dir, f))
        cmd = [args.edgert, "run", engine, "--output-dir", e_dir, "--npy", "-q"]
        for i in m["inputs"]:
            cmd += ["--input", f"{i['name']}={os.path.join(args.zoo, i['sample'])}"]
        rc, out, dt = run(cmd, args.timeout)
        if rc != 0:
            row["run"] = "FAILED"
            errors.append((name, "edgert run", out.strip()))
            rows.append(row)
            continue
        row["run"] = f"ok ({dt:.1f}s)"
        try:
            eo = load_outputs(e_dir, out_names)
        except (OSError, ValueError) as e:
            row["edgert"] = f"cannot read outputs: {e}"
            rows.append(row)
            continue
        parts = []
        for n in out_names:
            a, b = eo[n], ort[n]
            if a.shape != b.shape:
                parts.append(f"{n} shape {list(a.shape)} vs ORT {list(b.shape)}")
            elif a.dtype.kind in "iub":
                parts.append(f"{n} {float((a == b).mean()) * 100:.1f}% equal")
            else:
                bad = "" if np.isfinite(a).all() else " (non-finite!)"
                parts.append(f"{n} {fmt(rel_l2(a, b))}{bad}")
        row["edgert"] = ", ".join(parts)

        # --- digits: accuracy on the held-out split for both runtimes
        if m["kind"] == "digits" and "test_x" in m:
            tx = os.path.join(args.zoo, m["test_x"])
            ty = np.load(os.path.join(args.zoo, m["test_y"]))
            acc_dir = os.path.join(args.work, name, "acc_in")
            os.makedirs(acc_dir, exist_ok=True)
            iname = m["inputs"][0]["name"]
            np.save(os.path.join(acc_dir, iname + ".npy"), np.load(tx))
            accs = {}
            rc, out, _ = run(["node", ORT_JS, onnx_path, acc_dir, os.path.join(args.work, name, "acc_ort")], args.timeout)
            if rc == 0:
                accs["ort"] = float((load_outputs(os.path.join(args.work, name, "acc_ort"), out_names)[out_names[0]].argmax(1) == ty).mean())
            ea = os.path.join(args.work, name, "acc_edgert")
            os.makedirs(ea, exist_ok=True)
            rc, out, _ = run([args.edgert, "run", engine, "--input", f"{iname}={os.path.join(acc_dir, iname + '.npy')}",
                              "--output-dir", ea, "--npy", "-q"], args.timeout)
            if rc == 0:
                accs["edgert"] = float((load_outputs(ea, out_names)[out_names[0]].argmax(1) == ty).mean())
            else:
                errors.append((name, "edgert run (full test split, batch %d)" % len(ty), out.strip()))
            row["edgert"] += "; held-out acc: pytorch %.4f, %s" % (
                m.get("pytorch_accuracy") or float("nan"), ", ".join(f"{k} {v:.4f}" for k, v in accs.items()))
        rows.append(row)

    print("| model | ORT sanity | ORT output std | ORT vs PyTorch rel L2 | edgert build | edgert run | edgert vs ORT rel L2 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['ort']} | {r.get('ort_std', '')} | {r['torch']} | {r['build']} | {r['run']} | {r['edgert']} |")
    if errors:
        print("\n### Errors (verbatim)\n")
        for name, what, text in errors:
            print(f"**{name}** — `{what}`:\n```\n{text[-3000:]}\n```")


if __name__ == "__main__":
    main()
