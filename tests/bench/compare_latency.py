#!/usr/bin/python3
"""Latency of edgert vs ONNX Runtime (CPU) on the zoo's classifier models.

  /usr/bin/python3 tests/bench/compare_latency.py --zoo DIR [--threads 1] [--iterations 5] [--rounds 2]

For every model of the given kinds in DIR/manifest.json (written by tests/models/make_zoo.py)
this builds an engine with `edgert build`, then, for each round, times
`edgert run ENGINE --input ... --iterations N -q` (which prints "latency: median X ms") and
`node tests/models/ort_reference.js MODEL IN_DIR OUT --bench M --threads T` (3 warm-up runs,
then M timed runs) one after the other, so that both see the same machine state. The reported
figure for each runtime is the median over rounds of the per-round medians. Prints a Markdown
table (and the exact command line and machine) on stdout, for tests/bench/RESULTS.md.
Runs one benchmark process at a time. edgert has no thread option: its figure is what
`edgert run` does by default, while ORT runs with intraOpNumThreads=--threads.
"""
import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORT_JS = os.path.join(REPO, "tests", "models", "ort_reference.js")
LATENCY_RE = re.compile(r"latency:\s*median\s+([0-9.eE+-]+)\s*ms")


def run(cmd, timeout):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{(p.stdout + p.stderr).strip()[-2000:]}")
    return p.stdout


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", required=True, help="directory written by tests/models/make_zoo.py")
    ap.add_argument("--threads", type=int, default=1, help="ORT intraOpNumThreads (default 1)")
    ap.add_argument("--iterations", type=int, default=5, help="timed edgert runs per round (default 5)")
    ap.add_argument("--ort-iterations", type=int, default=20, help="timed ORT runs per round (default 20)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating edgert/ORT rounds (default 2)")
    ap.add_argument("--kinds", default="classifier", help="comma-separated manifest kinds (default classifier)")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--edgert", default=os.path.join(REPO, "build", "bin", "edgert"))
    ap.add_argument("--board", default="x86_64-generic")
    ap.add_argument("--work", default="/tmp/edgert_bench", help="engines and scratch outputs go here")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per command")
    args = ap.parse_args()

    with open(os.path.join(args.zoo, "manifest.json")) as f:
        manifest = json.load(f)
    kinds = set(args.kinds.split(","))
    models = [m for m in manifest["models"] if m["kind"] in kinds]
    if args.only:
        keep = set(args.only.split(","))
        models = [m for m in models if m["name"] in keep]
    if not models:
        sys.exit("no models selected")
    os.makedirs(args.work, exist_ok=True)

    rows = []
    for m in models:
        name = m["name"]
        onnx_path = os.path.join(args.zoo, m["file"])
        in_dir = os.path.join(args.zoo, name + ".inputs")
        engine = os.path.join(args.work, name + ".engine")
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            run([args.edgert, "build", onnx_path, "--board", args.board, "-o", engine], args.timeout)
        except RuntimeError as e:
            rows.append((name, None, None, f"build failed: {str(e).splitlines()[-1]}"))
            continue
        e_cmd = [args.edgert, "run", engine, "--iterations", str(args.iterations), "-q"]
        for i in m["inputs"]:
            e_cmd += ["--input", f"{i['name']}={os.path.join(args.zoo, i['sample'])}"]
        o_cmd = ["node", ORT_JS, onnx_path, in_dir, os.path.join(args.work, name + ".ort_out"),
                 "--threads", str(args.threads), "--bench", str(args.ort_iterations)]
        e_meds, o_meds, note = [], [], ""
        try:
            for r in range(args.rounds):
                out = run(e_cmd, args.timeout)
                mt = LATENCY_RE.search(out)
                if not mt:
                    raise RuntimeError(f"no 'latency: median' line in edgert output:\n{out.strip()[-500:]}")
                e_meds.append(float(mt.group(1)))
                out = run(o_cmd, args.timeout)
                js = [ln for ln in out.splitlines() if ln.startswith("{")]
                o_meds.append(float(json.loads(js[-1])["median_ms"]))
                print(f"   round {r + 1}: edgert {e_meds[-1]:.2f} ms, ORT {o_meds[-1]:.2f} ms", file=sys.stderr, flush=True)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
            note = "failed: " + str(e).strip().splitlines()[-1]
        e_med = statistics.median(e_meds) if e_meds else None
        o_med = statistics.median(o_meds) if o_meds else None
        rows.append((name, e_med, o_med, note))

    try:
        ort_version = json.load(open(os.path.join(REPO, "node_modules", "onnxruntime-node", "package.json")))["version"]
    except OSError:
        ort_version = "?"
    try:
        e_version = subprocess.run([args.edgert, "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        e_version = "?"
    cmdline = " ".join(shlex.quote(a) for a in ["/usr/bin/python3", os.path.relpath(os.path.abspath(sys.argv[0]), REPO)] + sys.argv[1:])
    print(f"Command: `{cmdline}` (from the repository root)")
    print()
    print(f"Machine: {cpu_name()}, {os.cpu_count()} logical CPUs; {time.strftime('%Y-%m-%d %H:%M %Z')}; "
          f"{e_version or 'edgert'}; onnxruntime-node {ort_version} (CPU EP, graphOptimizationLevel all, "
          f"intraOpNumThreads {args.threads}, interOpNumThreads 1). edgert: median of {args.iterations} runs, "
          f"ORT: median of {args.ort_iterations} runs after 3 warm-up runs; each figure is the median over "
          f"{args.rounds} alternating round(s).")
    print()
    print("| model | input | edgert median ms | ORT median ms | edgert / ORT |")
    print("|---|---|---:|---:|---:|")
    for name, e, o, note in rows:
        m = next(x for x in models if x["name"] == name)
        shape = "x".join(str(d) for d in m["inputs"][0]["sample_shape"])
        es = f"{e:.2f}" if e is not None else "—"
        os_ = f"{o:.2f}" if o is not None else "—"
        ratio = f"{e / o:.1f}x" if e is not None and o else (note or "—")
        print(f"| {name} | {shape} | {es} | {os_} | {ratio} |")
    notes = [(n, note) for n, _, _, note in rows if note]
    for n, note in notes:
        print(f"\n{n}: {note}")


if __name__ == "__main__":
    main()
