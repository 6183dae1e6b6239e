#!/usr/bin/env python3
"""edgertd sharing one GPU (a recorded run on the GPU machine: tests/gpu/run-on-device --soak).

Four pipelines on the test pattern at 30 fps each, all on GPU engines: two camera engines
(mobilenet_v2 on 640x480 NV12, one at stream priority 5), one mobilenet_v2 fed by CPU
preprocessing, one resnet18 camera engine. For --seconds it samples every pipeline's fps, drops
and latency; then it hot-swaps the priority-0 camera pipeline --swaps times between its FP32
and FP16 engines while every pipeline keeps streaming, and records the daemon's RSS and the
GPU's used memory along the way (flat = no leak per swap), every swap's outcome, and the
swapped pipeline's sequence numbers (every missing one must be a counted drop).

  gpu_daemon_soak.py BUNDLE_DIR SOURCE_DIR [--seconds 10] [--swaps 100] [--json OUT]
"""
import argparse, hashlib, json, os, socket, subprocess, sys, tempfile, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("bundle")
ap.add_argument("source")
ap.add_argument("--seconds", type=float, default=10)
ap.add_argument("--swaps", type=int, default=100)
ap.add_argument("--json", default="")
a = ap.parse_args()
edgertd, edgertctl, edgert = (os.path.join(a.bundle, "bin", n) for n in ("edgertd", "edgertctl", "edgert"))
work = tempfile.mkdtemp(prefix="edgert-gpu-soak-")
BOARD = os.environ.get("EDGERT_SOAK_BOARD", "x86_64-cuda-sm90")  # another board: a dry run of the script
MEAN, STD = "0.485,0.456,0.406", "0.229,0.224,0.225"
failures = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        failures.append(what)


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def ctl(*args):
    return subprocess.run([edgertctl, "--socket", f"{work}/control.sock", *args], capture_output=True, text=True,
                          timeout=60)


zoo = os.environ.get("EDGERT_SOAK_ZOO", "")  # a folder with the zoo's models already made
if not zoo:
    zoo = f"{work}/zoo"
    sh(sys.executable, os.path.join(a.source, "tests/models/make_zoo.py"), "--out", zoo, "--only", "mobilenet_v2,resnet18")
camera = ["--camera", "nv12:640x480", "--camera-mean", MEAN, "--camera-std", STD]
cache = ["--timing-cache", f"{work}/timing.cache"]
engines = {}
# The swap's second engine: FP16 on the GPU (another engine of the same model; a dry run on a
# CPU board takes the same model without prepared weights).
second = ["--fp16"] if "cuda" in BOARD else ["--no-prepared-weights"]
for name, model, extra in (("mnv2_cam", "mobilenet_v2", camera), ("mnv2_cam_fp16", "mobilenet_v2", camera + second),
                           ("mnv2", "mobilenet_v2", []), ("r18_cam", "resnet18", camera)):
    engines[name] = f"{work}/{name}.engine"
    sh(edgert, "build", f"{zoo}/{model}.onnx", "--board", BOARD, "-o", engines[name], *cache, *extra)

pipelines = [("urgent", "mnv2_cam", 5), ("swapped", "mnv2_cam", 0), ("cpu_pre", "mnv2", 0), ("r18", "r18_cam", 0)]
config = f"{work}/edgertd.yaml"
with open(config, "w") as f:
    f.write(f"board: {BOARD}\ncontrol_socket: {work}/control.sock\nstate_dir: {work}/state\npipelines:\n")
    for name, engine, priority in pipelines:
        f.write(f"""  - name: {name}
    source: {{type: test-pattern, width: 640, height: 480, fps: 30, format: nv12}}
    preprocess: {{mean: [{MEAN}], std: [{STD}]}}
    engine: {engines[engine]}
    priority: {priority}
    postprocess: {{type: classification, top_k: 1}}
    sinks:
      socket: {{path: {work}/{name}.sock}}
""")

# The daemon's log goes to a file: a pipe nobody drains fills up and blocks its loop.
log = open(f"{work}/edgertd.log", "w")
daemon = subprocess.Popen([edgertd, "--config", config], stderr=log, text=True)
out = {"board": BOARD}
try:
    deadline = time.time() + 20
    while not os.path.exists(f"{work}/swapped.sock") and time.time() < deadline:
        time.sleep(0.1)
    # The swapped pipeline's results, read throughout: sequence numbers and engines.
    seen, stop = [], threading.Event()

    def read_results():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(f"{work}/swapped.sock")
            s.settimeout(1)
            buffer = b""
            while not stop.is_set():
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    continue
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                seen.extend(json.loads(l)["sequence"] for l in lines if l)

    reader = threading.Thread(target=read_results, daemon=True)
    reader.start()
    time.sleep(a.seconds)
    stats = json.loads(ctl("--json", "stats").stdout)
    out["pipelines"] = {s["name"]: {"fps": s["fps"], "dropped": s["dropped"], "processed": s["processed"],
                                    "p50_ms": s["latency"]["total"]["p50_ms"], "p99_ms": s["latency"]["total"]["p99_ms"]}
                        for s in stats}
    for name, row in out["pipelines"].items():
        print(f"{name:8s} fps {row['fps']:5.1f}  processed {row['processed']:5d}  dropped {row['dropped']:3d}  "
              f"latency p50 {row['p50_ms']:.2f} ms  p99 {row['p99_ms']:.2f} ms", flush=True)
    check("four pipelines share the GPU at about 30 fps each",
          all(25 <= r["fps"] <= 35 for r in out["pipelines"].values()), json.dumps(out["pipelines"]))

    def rss_kib():
        with open(f"/proc/{daemon.pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

    def gpu_used():
        g = json.loads(ctl("--json", "status").stdout).get("gpu_memory")
        return (g["total_bytes"] - g["free_bytes"]) >> 20 if g else 0

    shas = {}
    for name in ("mnv2_cam_fp16", "mnv2_cam"):
        r = ctl("--json", "deploy", engines[name], "--pipeline", "swapped")
        check(f"deploy {name}", r.returncode == 0, r.stderr[-300:])
        shas[name] = hashlib.sha256(open(engines[name], "rb").read()).hexdigest()
    samples, outcomes, t0 = [], [], time.time()
    for i in range(a.swaps):
        target = "mnv2_cam_fp16" if i % 2 == 0 else "mnv2_cam"
        r = ctl("swap", "swapped", shas[target][:16])
        outcomes.append(r.returncode)
        if i in (0, 9, a.swaps // 2, a.swaps - 1):
            time.sleep(0.5)
            samples.append({"swap": i + 1, "rss_mib": rss_kib() >> 10, "gpu_used_mib": gpu_used()})
            print(f"after swap {i + 1}: RSS {samples[-1]['rss_mib']} MiB, GPU used {samples[-1]['gpu_used_mib']} MiB", flush=True)
    out["swaps"] = {"count": a.swaps, "ok": outcomes.count(0), "seconds": round(time.time() - t0, 1), "samples": samples}
    check(f"{a.swaps} swaps between GPU engines succeed", outcomes.count(0) == a.swaps, str(outcomes[:10]))
    grow_rss = samples[-1]["rss_mib"] - samples[1]["rss_mib"]
    grow_gpu = samples[-1]["gpu_used_mib"] - samples[1]["gpu_used_mib"]
    check("RSS flat from swap 10 to the last (within 16 MiB)", abs(grow_rss) <= 16, f"{grow_rss:+d} MiB")
    check("GPU memory flat from swap 10 to the last (within 16 MiB)", abs(grow_gpu) <= 16, f"{grow_gpu:+d} MiB")
    time.sleep(1)
    stop.set()
    reader.join(timeout=5)
    stats = {s["name"]: s for s in json.loads(ctl("--json", "stats").stdout)}
    gaps = sum(b - a_ - 1 for a_, b in zip(seen, seen[1:]) if b > a_ + 1)
    dropped = stats["swapped"]["dropped"]
    out["swapped_pipeline"] = {"results": len(seen), "missing_sequence_numbers": gaps, "counted_drops": dropped,
                               "socket_dropped": stats["swapped"].get("socket_dropped", 0)}
    print(json.dumps(out["swapped_pipeline"]), flush=True)
    check("every missing sequence number of the swapped pipeline is a counted drop",
          gaps <= dropped + stats["swapped"].get("socket_dropped", 0), f"{gaps} missing, {dropped} dropped")
    out["after_swaps"] = {n: {"fps": s["fps"], "dropped": s["dropped"], "p99_ms": s["latency"]["total"]["p99_ms"]}
                          for n, s in stats.items()}
finally:
    daemon.terminate()
    try:
        daemon.wait(timeout=20)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
    log.close()
with open(f"{work}/edgertd.log") as f:
    err = f.read()
check("edgertd stops with exit 0", daemon.returncode == 0, err[-400:])
out["failures"] = failures
if a.json:
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
print(f"{len(failures)} failure(s)" if failures else "all checks passed")
sys.exit(1 if failures else 0)
