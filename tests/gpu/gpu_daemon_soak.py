#!/usr/bin/env python3
"""edgertd sharing one GPU (a recorded run on the GPU machine: tests/gpu/run-on-device --soak).

Four pipelines on the test pattern (1920x1080 NV12 at 60 fps each, frames in host-mapped
memory), all camera engines built on the machine: two classifiers (mobilenet_v2, resnet18, each
ending in its own top-5), a detector (SSDlite) and a segmenter (LRASPP, ending in its own
per-pixel class map), at stream priority 5. Three phases, each a fresh daemon, each measured
from every result the pipelines publish (after a warm-up):

  alone         the four pipelines; then --swaps hot swaps of the mobilenet_v2 pipeline between
                its FP32 and FP16 engines while all four stream (RSS and GPU memory sampled:
                flat = no leak; every missing sequence number must be a counted drop), and a deploy
                refused for want of GPU memory (taken by this script) while the pipelines stream on
  slow_prio5    the four beside a fifth, deliberately slow pipeline (a stack of wide 3x3
                convolutions on 1024x1024 that cannot keep up with 60 fps) at their priority
  slow_prio0    the same with the slow pipeline at priority 0
  slow_prio0_shareN  and confined to N% of the GPU's multiprocessors (gpu_share: N)

and reports each pipeline's fps, drops, copies per frame and latency percentiles (total and
GPU), and the ratio of the four's p99 beside the slow pipeline to their p99 alone.

  gpu_daemon_soak.py BUNDLE_DIR SOURCE_DIR [--seconds 15] [--swaps 100] [--json OUT]
      [--size 1920x1080] [--fps 60] [--slow-layers 12]
EDGERT_SOAK_BOARD (default x86_64-cuda-sm90; another board: a dry run of the script) and
EDGERT_SOAK_ZOO (a folder with the zoo's models already made).
"""
import argparse, hashlib, json, os, socket, subprocess, sys, tempfile, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("bundle")
ap.add_argument("source")
ap.add_argument("--seconds", type=float, default=15)
ap.add_argument("--warmup", type=float, default=3)
ap.add_argument("--swaps", type=int, default=100)
ap.add_argument("--size", default="1920x1080")
ap.add_argument("--fps", type=int, default=60)
ap.add_argument("--slow-layers", type=int, default=12)
ap.add_argument("--slow-size", type=int, default=1024)
ap.add_argument("--slow-phases", default="prio5,prio0,share50,share25")
# Threads of the CPU kernels (the detector's NMS runs in them): EDGERT_CPU_THREADS for edgertd;
# 0 leaves the CPU plugin's default, every core.
ap.add_argument("--cpu-threads", type=int, default=0)
ap.add_argument("--json", default="")
a = ap.parse_args()
WIDTH, HEIGHT = (int(v) for v in a.size.split("x"))
edgertd, edgertctl, edgert = (os.path.join(a.bundle, "bin", n) for n in ("edgertd", "edgertctl", "edgert"))
work = tempfile.mkdtemp(prefix="edgert-gpu-soak-")
BOARD = os.environ.get("EDGERT_SOAK_BOARD", "x86_64-cuda-sm90")
GPU = "cuda" in BOARD
MEAN, STD = "0.485,0.456,0.406", "0.229,0.224,0.225"
failures = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        failures.append(what)


def sh(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return r.stdout


def ctl(*args):
    return subprocess.run([edgertctl, "--socket", f"{work}/control.sock", *args], capture_output=True, text=True,
                          timeout=60)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))] if values else float("nan")


def slow_model(path, layers, size):
    """A model too heavy for 60 fps: 3x3 convolutions of 64 channels on size x size."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    rng = np.random.default_rng(7)
    nodes, weights, x = [], [], "image"
    for i in range(layers):
        cin = 3 if i == 0 else 64
        w = (rng.standard_normal((64, cin, 3, 3)) * np.sqrt(2 / (cin * 9))).astype(np.float32)
        weights.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        x = f"r{i}"
    nodes += [helper.make_node("GlobalAveragePool", [x], ["pooled"]), helper.make_node("Flatten", ["pooled"], ["logits"])]
    graph = helper.make_graph(nodes, "slow", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 64])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


# Engines: camera engines for the source's frames, built (and timed) here.
zoo = os.environ.get("EDGERT_SOAK_ZOO", "")
if not zoo:
    zoo = f"{work}/zoo"
    sh(sys.executable, os.path.join(a.source, "tests/models/make_zoo.py"), "--out", zoo, "--only",
       "mobilenet_v2,resnet18,ssdlite320_mobilenet_v3_large,lraspp_mobilenet_v3_large")
slow_model(f"{work}/slow.onnx", a.slow_layers, a.slow_size)
camera = ["--camera", f"nv12:{WIDTH}x{HEIGHT}", "--camera-mean", MEAN, "--camera-std", STD]
cache = ["--timing-cache", f"{work}/timing.cache"]
# The swap's second engine: FP16 on the GPU (another engine of the same model; a dry run on a
# CPU board takes the same model without prepared weights).
second = ["--fp16"] if GPU else ["--no-prepared-weights"]
top5 = ["--postprocess", "classification:5"]
engines = {}
for name, model, extra in (("mnv2", f"{zoo}/mobilenet_v2.onnx", top5), ("mnv2_fp16", f"{zoo}/mobilenet_v2.onnx", top5 + second),
                           ("r18", f"{zoo}/resnet18.onnx", top5),
                           ("ssd", f"{zoo}/ssdlite320_mobilenet_v3_large.onnx", []),
                           ("seg", f"{zoo}/lraspp_mobilenet_v3_large.onnx", ["--postprocess", "segmentation"]),
                           ("slow", f"{work}/slow.onnx", top5)):
    engines[name] = f"{work}/{name}.engine"
    t0 = time.time()
    sh(edgert, "build", model, "--board", BOARD, "-o", engines[name], *cache, *camera, *extra)
    print(f"built {name} in {time.time() - t0:.1f} s", flush=True)

POSTPROCESS = {"classification": "{type: classification, top_k: 5}", "detection": "{type: detection, score_threshold: 0.3}",
               "segmentation": "{type: segmentation}"}
FOUR = [("cls_mnv2", "mnv2", "classification", 5, 100), ("cls_r18", "r18", "classification", 5, 100),
        ("detector", "ssd", "detection", 5, 100), ("segmenter", "seg", "segmentation", 5, 100)]


class Daemon:
    """edgertd on `pipelines`, with a reader per pipeline keeping (arrival, result) of everything published."""

    def __init__(self, phase, pipelines):
        self.phase, self.names = phase, [p[0] for p in pipelines]
        config = f"{work}/{phase}.yaml"
        with open(config, "w") as f:
            f.write(f"board: {BOARD}\ncontrol_socket: {work}/control.sock\nstate_dir: {work}/state-{phase}\npipelines:\n")
            for name, engine, post, priority, share in pipelines:
                f.write(f"""  - name: {name}
    source: {{type: test-pattern, width: {WIDTH}, height: {HEIGHT}, fps: {a.fps}, format: nv12}}
    engine: {engines[engine]}
    priority: {priority}
    gpu_share: {share}
    postprocess: {POSTPROCESS[post]}
    sinks:
      socket: {{path: {work}/{phase}-{name}.sock}}
""")
        # The daemon's log goes to a file: a pipe nobody drains fills up and blocks its loop.
        self.log_path = f"{work}/{phase}.log"
        self.log = open(self.log_path, "w")
        env = dict(os.environ, **({"EDGERT_CPU_THREADS": str(a.cpu_threads)} if a.cpu_threads else {}))
        self.process = subprocess.Popen([edgertd, "--config", config], stderr=self.log, text=True, env=env)
        self.results = {n: [] for n in self.names}
        self.stop = threading.Event()
        deadline = time.time() + 60
        while not all(os.path.exists(f"{work}/{phase}-{n}.sock") for n in self.names):
            if time.time() > deadline or self.process.poll() is not None:
                sys.exit(f"edgertd ({phase}) did not open its sockets:\n" + open(self.log_path).read()[-2000:])
            time.sleep(0.1)
        self.readers = [threading.Thread(target=self.read, args=(n,), daemon=True) for n in self.names]
        for r in self.readers:
            r.start()

    def read(self, name):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(f"{work}/{self.phase}-{name}.sock")
            s.settimeout(1)
            buffer = b""
            while not self.stop.is_set():
                try:
                    chunk = s.recv(1 << 20)
                except socket.timeout:
                    continue
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                now = time.time()
                self.results[name].extend((now, json.loads(l)) for l in lines if l)

    def measure(self, seconds):
        """Per pipeline over the next `seconds`: fps, latency percentiles, copies and drops."""
        before = {s["name"]: s for s in json.loads(ctl("--json", "stats").stdout)}
        t0 = time.time()
        time.sleep(seconds)
        t1 = time.time()
        after = {s["name"]: s for s in json.loads(ctl("--json", "stats").stdout)}
        status = {p["name"]: p for p in json.loads(ctl("--json", "status").stdout)["pipelines"]}
        rows = {}
        for name in self.names:
            window = [r for t, r in self.results[name] if t0 <= t < t1]
            total = [r["latency_us"]["total"] / 1000 for r in window]
            gpu = [r["latency_us"].get("gpu", -1) / 1000 for r in window if r["latency_us"].get("gpu", -1) >= 0]
            rows[name] = {"fps": round(len(window) / (t1 - t0), 1), "results": len(window),
                          "dropped": after[name]["dropped"] - before[name]["dropped"],
                          "p50_ms": round(percentile(total, 50), 3), "p99_ms": round(percentile(total, 99), 3),
                          "gpu_p50_ms": round(percentile(gpu, 50), 3) if gpu else None,
                          "frame_copies_per_frame": sum(r["frame_copies"] for r in window) / max(1, len(window)),
                          "device_copies_per_frame": sum(r["device_copies"] for r in window) / max(1, len(window)),
                          "frame_input": status[name].get("frame_input"), "frame_memory": status[name].get("frame_memory"),
                          # Which results copied (sequence, device copies, seconds into the window): where a
                          # copy comes from when the path should have none.
                          "copying_results": [(r["sequence"], r["device_copies"], round(t - t0, 2)) for t, r in
                                              self.results[name] if t0 <= t < t1 and r["device_copies"]][:8]}
            r = rows[name]
            print(f"{self.phase:14s} {name:10s} fps {r['fps']:5.1f}  dropped {r['dropped']:4d}  p50 {r['p50_ms']:7.3f} ms  "
                  f"p99 {r['p99_ms']:7.3f} ms  gpu p50 {r['gpu_p50_ms']} ms  copies/frame "
                  f"{r['frame_copies_per_frame'] + r['device_copies_per_frame']:.2f}", flush=True)
        return rows

    def rss_mib(self):
        with open(f"/proc/{self.process.pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) >> 10

    def close(self):
        self.stop.set()
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for r in self.readers:
            r.join(timeout=5)
        self.log.close()
        check(f"edgertd ({self.phase}) stops with exit 0", self.process.returncode == 0,
              "" if self.process.returncode == 0 else open(self.log_path).read()[-600:])


def gpu_used_mib():
    g = json.loads(ctl("--json", "status").stdout).get("gpu_memory")
    return (g["total_bytes"] - g["free_bytes"]) >> 20 if g else 0


def hot_swaps(d, out):
    shas = {}
    for name in ("mnv2_fp16", "mnv2"):
        r = ctl("--json", "deploy", engines[name], "--pipeline", "cls_mnv2")
        check(f"deploy {name}", r.returncode == 0, r.stderr[-300:])
        shas[name] = hashlib.sha256(open(engines[name], "rb").read()).hexdigest()
    first_seq = len(d.results["cls_mnv2"])
    drops_before = {s["name"]: s for s in json.loads(ctl("--json", "stats").stdout)}["cls_mnv2"]["dropped"]
    samples, outcomes, t0 = [], [], time.time()
    for i in range(a.swaps):
        r = ctl("swap", "cls_mnv2", shas["mnv2_fp16" if i % 2 == 0 else "mnv2"][:16])
        outcomes.append(r.returncode)
        if i in (0, 9, a.swaps // 2, a.swaps - 1):
            time.sleep(0.5)
            samples.append({"swap": i + 1, "rss_mib": d.rss_mib(), "gpu_used_mib": gpu_used_mib()})
            print(f"after swap {i + 1}: RSS {samples[-1]['rss_mib']} MiB, GPU used {samples[-1]['gpu_used_mib']} MiB", flush=True)
    out["swaps"] = {"count": a.swaps, "ok": outcomes.count(0), "seconds": round(time.time() - t0, 1), "samples": samples}
    check(f"{a.swaps} swaps between GPU engines succeed", outcomes.count(0) == a.swaps, str(outcomes[:10]))
    grow_rss = samples[-1]["rss_mib"] - samples[1]["rss_mib"]
    grow_gpu = samples[-1]["gpu_used_mib"] - samples[1]["gpu_used_mib"]
    check("RSS flat from swap 10 to the last (within 16 MiB)", abs(grow_rss) <= 16, f"{grow_rss:+d} MiB")
    check("GPU memory flat from swap 10 to the last (within 16 MiB)", abs(grow_gpu) <= 16, f"{grow_gpu:+d} MiB")
    time.sleep(1)
    stats = {s["name"]: s for s in json.loads(ctl("--json", "stats").stdout)}["cls_mnv2"]
    seen = [r["sequence"] for _, r in d.results["cls_mnv2"][first_seq:]]
    gaps = sum(b - x - 1 for x, b in zip(seen, seen[1:]) if b > x + 1)
    dropped = stats["dropped"] - drops_before + stats.get("socket_dropped", 0)
    engines_seen = sorted({r["engine"] for _, r in d.results["cls_mnv2"][first_seq:]})
    out["swapped_pipeline"] = {"results": len(seen), "missing_sequence_numbers": gaps, "counted_drops": dropped,
                               "engines": engines_seen}
    print(json.dumps(out["swapped_pipeline"]), flush=True)
    check("both engines produced results during the swaps", len(engines_seen) == 2, str(engines_seen))
    check("every missing sequence number of the swapped pipeline is a counted drop", gaps <= dropped,
          f"{gaps} missing, {dropped} dropped")


def over_budget_refusal(d, out):
    """With the GPU's memory taken but for 64 MiB, a deploy of the slow engine (hundreds of MiB of
    device arena) is refused with the numbers, and the pipeline streams on."""
    try:
        import torch
    except ImportError:
        print("no torch here: the over-budget refusal is not exercised", flush=True)
        return
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(max(0, free - (64 << 20)), dtype=torch.uint8, device="cuda")
    try:
        r = ctl("--json", "deploy", engines["slow"], "--pipeline", "cls_mnv2")
    finally:
        del hog
        torch.cuda.empty_cache()
    out["over_budget_refusal"] = r.stderr.strip()[-400:]
    check("a deploy that does not fit the GPU's free memory is refused with the numbers",
          r.returncode != 0 and "MiB of GPU memory" in r.stderr and "are free" in r.stderr, r.stderr[-400:])
    before = len(d.results["cls_mnv2"])
    time.sleep(1)
    check("the pipeline streams on after the refusal", len(d.results["cls_mnv2"]) - before >= 0.9 * a.fps,
          f"{len(d.results['cls_mnv2']) - before} results in 1 s")


out = {"board": BOARD, "size": a.size, "fps": a.fps, "seconds": a.seconds, "phases": {}}
d = Daemon("alone", FOUR)
try:
    time.sleep(a.warmup)
    out["phases"]["alone"] = d.measure(a.seconds)
    hot_swaps(d, out)
    if GPU:
        over_budget_refusal(d, out)
finally:
    d.close()
alone = out["phases"]["alone"]
# The detector's NMS is data-dependent and runs on the CPU between its GPU layers (its engine
# copies between the two inside each run): its rate is reported, not required.
ON_GPU = ("cls_mnv2", "cls_r18", "segmenter")
check("the classifiers and the segmenter keep up with the source", all(alone[n]["fps"] >= 0.9 * a.fps for n in ON_GPU),
      json.dumps({n: r["fps"] for n, r in alone.items()}))
check("no frame copied on the host-mapped path" if GPU else "no frame copied on the CPU board",
      all(r["frame_copies_per_frame"] == 0 for r in alone.values()),
      json.dumps({n: r["frame_copies_per_frame"] for n, r in alone.items()}))
check("no device copy in engines wholly on the GPU", all(alone[n]["device_copies_per_frame"] == 0 for n in ON_GPU),
      json.dumps({n: [alone[n]["device_copies_per_frame"], alone[n]["copying_results"]] for n in ON_GPU}))
SLOW_PHASES = {"prio5": ("slow_prio5", 5, 100), "prio0": ("slow_prio0", 0, 100),
               "share50": ("slow_prio0_share50", 0, 50), "share25": ("slow_prio0_share25", 0, 25)}
for phase, priority, share in (SLOW_PHASES[p] for p in a.slow_phases.split(",")):
    d = Daemon(phase, FOUR + [("slow", "slow", "classification", priority, share)])
    try:
        time.sleep(a.warmup)
        out["phases"][phase] = d.measure(a.seconds)
    finally:
        d.close()
    rows = out["phases"][phase]
    check(f"{phase}: the slow pipeline runs but cannot keep up (it drops its own frames)",
          0 < rows["slow"]["fps"] < 0.9 * a.fps and rows["slow"]["dropped"] > 0,
          f"{rows['slow']['fps']} fps, {rows['slow']['dropped']} dropped")
    check(f"{phase}: the classifiers and the segmenter keep up with the source beside it",
          all(rows[n]["fps"] >= 0.9 * a.fps for n in ON_GPU), json.dumps({n: rows[n]["fps"] for n in alone}))
    ratios = {n: round(rows[n]["p99_ms"] / alone[n]["p99_ms"], 3) for n in alone}
    out["phases"][phase]["p99_ratio_to_alone"] = ratios
    print(f"{phase}: p99 beside the slow pipeline / alone: {json.dumps(ratios)} (target <= 1.10: "
          f"{'met' if all(v <= 1.10 for v in ratios.values()) else 'not met'})", flush=True)

out["failures"] = failures
if a.json:
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
print(f"{len(failures)} failure(s)" if failures else "all checks passed")
sys.exit(1 if failures else 0)
