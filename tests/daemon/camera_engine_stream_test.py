#!/usr/bin/python3
"""edgertd with a camera engine (edgert build --camera): the test-pattern source's NV12 frames go
to the engine as they are, its first node converts them, and the results equal those of the
same model fed by edgertd's CPU preprocessing, frame for frame (the pattern is a function of the
sequence number). Status names the path; no frame is copied. Where the source's buffers are
not host-mapped (test pattern io mmap, as V4L2 MMAP buffers) a GPU board copies each frame once.
An engine that ends in its own top-k (edgert build --postprocess classification:3) gives the same
results. A hot swap to a camera engine built for other frames is refused by the trial frame,
saying what the engine takes.

  camera_engine_stream_test.py BUILD_DIR SOURCE_DIR
EDGERT_TEST_BOARD names the board the engines and edgertd use (default x86_64-generic; on the
GPU machine x86_64-cuda-sm90: tests/gpu/run-on-device --daemon), EDGERT_TEST_MODEL an image
model to use instead of the demo model and EDGERT_TEST_FRAME the frames' size (default 320x240).
Prints each path's median stage latencies.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

build, source = sys.argv[1], sys.argv[2]
edgertd, edgertctl = (os.path.join(build, "bin", n) for n in ("edgertd", "edgertctl"))
# The CLI only builds the test engines: the TSan tier points this at the main build's (uninstrumented) edgert.
edgert = os.environ.get("EDGERT_TEST_CLI") or os.path.join(build, "bin", "edgert")
work = tempfile.mkdtemp(prefix="edgert-camera-")
failures = []
MEAN, STD = "0.485,0.456,0.406", "0.229,0.224,0.225"
BOARD = os.environ.get("EDGERT_TEST_BOARD", "x86_64-generic")
MODEL = os.environ.get("EDGERT_TEST_MODEL", f"{work}/demo.onnx")
WIDTH, HEIGHT = (int(v) for v in os.environ.get("EDGERT_TEST_FRAME", "320x240").split("x"))


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""))
    if not ok:
        failures.append(what)


def build_engine(name, *extra):
    path = f"{work}/{name}.engine"
    subprocess.run([edgert, "build", "--board", BOARD, MODEL, "-o", path, *extra],
                   check=True, capture_output=True)
    return path


def ctl(*args):
    return subprocess.run([edgertctl, "--socket", f"{work}/control.sock", *args], capture_output=True, text=True)


def stream(engine, count, during=None, io="userptr", gpu_share=100):
    """Runs edgertd on `engine` and returns `count` results (sequence -> result), the pipeline's
    status, and what `during(…)` returned while it ran."""
    run = f"{os.path.basename(engine)}-{io}"
    state = f"{work}/state-{run}"
    config = f"{work}/{run}.yaml"
    with open(config, "w") as f:
        f.write(f"""board: {BOARD}
control_socket: {work}/control.sock
state_dir: {state}
pipelines:
  - name: cam
    source: {{type: test-pattern, width: {WIDTH}, height: {HEIGHT}, fps: 30, format: nv12, io: {io}}}
    preprocess: {{mean: [{MEAN}], std: [{STD}]}}
    engine: {engine}
    priority: 4
    gpu_share: {gpu_share}
    postprocess: {{type: classification, top_k: 3}}
    sinks:
      socket: {{path: {work}/results.sock}}
""")
    for stale in (f"{work}/results.sock", f"{work}/control.sock"):
        if os.path.exists(stale):
            os.unlink(stale)
    # The daemon's log goes to a file: a pipe nobody drains fills up and blocks its loop.
    log = open(f"{work}/{run}.log", "w+")
    daemon = subprocess.Popen([edgertd, "--config", config], stderr=log, text=True)
    results, status, extra = {}, None, None
    try:
        deadline = time.time() + 10
        while not os.path.exists(f"{work}/results.sock") and time.time() < deadline:
            time.sleep(0.05)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(f"{work}/results.sock")
            s.settimeout(10)
            buffer = b""
            while len(results) < count:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line:
                        r = json.loads(line)
                        results[r["sequence"]] = r
        status = json.loads(ctl("--json", "status").stdout)
        if during:
            extra = during()
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
        log.seek(0)
        err = log.read()
    check(f"edgertd on {run} stops with exit 0", daemon.returncode == 0, err[-500:])
    return results, status, extra


subprocess.run([sys.executable, os.path.join(source, "tests/models/make_demo_model.py"),
                "--output", f"{work}/demo.onnx", "--input", f"{work}/demo.npy"], check=True, capture_output=True)
plain = build_engine("plain")
camera = build_engine("camera", "--camera", f"nv12:{WIDTH}x{HEIGHT}", "--camera-mean", MEAN, "--camera-std", STD)
other = build_engine("other", "--camera", f"yuyv:{WIDTH + 2}x{HEIGHT}", "--camera-mean", MEAN, "--camera-std", STD)
top3 = build_engine("top3", "--camera", f"nv12:{WIDTH}x{HEIGHT}", "--camera-mean", MEAN, "--camera-std", STD,
                    "--postprocess", "classification:3")

refusal = lambda: ctl("deploy", other, "--pipeline", "cam")
by_camera, status, refused = stream(camera, 60, during=refusal)
by_cpu, cpu_status, _ = stream(plain, 60)
by_copy, copy_status, _ = stream(camera, 30, io="mmap")
# On a GPU board its kernels run on half the SMs (a green context): the same results.
by_top3, top3_status, _ = stream(top3, 30, gpu_share=50)

pipeline = status["pipelines"][0] if status else {}
check("status names the camera engine's path", pipeline.get("frame_input") == "camera-engine", json.dumps(pipeline)[:400])
check("the CPU path is named too", (cpu_status or {"pipelines": [{}]})["pipelines"][0].get("frame_input") == "cpu-preprocess")
check("60 results from the camera engine", len(by_camera) >= 60, str(len(by_camera)))
check("no frame copied (the engine reads the source's buffer)", all(r["frame_copies"] == 0 for r in by_camera.values()))
cpu_pipeline = (cpu_status or {"pipelines": [{}]})["pipelines"][0]
if BOARD.startswith("x86_64-cuda") or "jetson" in BOARD:
    # The test pattern's buffers are host-mapped: the camera engine's first kernel reads them and
    # its outputs land in host-mapped buffers, with no copy; the CPU path copies its float image
    # in and the outputs out.
    check("frame buffers in host-mapped memory", pipeline.get("frame_memory") == "host-mapped (cuda)", str(pipeline))
    check("the camera engine runs with no device copy", pipeline.get("device_copies_per_frame") == 0 and
          all(r["device_copies"] == 0 for r in by_camera.values()), str(pipeline.get("device_copies_per_frame")))
    check("the CPU path copies to and from the GPU", cpu_pipeline.get("device_copies_per_frame", 0) >= 1,
          str(cpu_pipeline.get("device_copies_per_frame")))
    check("every result carries its GPU time, within its inference time",
          all(0 < r["latency_us"]["gpu"] <= r["latency_us"]["inference"] for r in by_camera.values()),
          str([r["latency_us"] for r in list(by_camera.values())[:2]]))
    check("stats give the GPU time's percentiles", pipeline.get("latency", {}).get("gpu", {}).get("p50_ms", 0) > 0,
          str(pipeline.get("latency")))
    copy_pipeline = (copy_status or {"pipelines": [{}]})["pipelines"][0]
    check("frames in memory the GPU cannot map (test pattern io mmap) are copied once each, into host-mapped memory",
          copy_pipeline.get("frame_memory", "").startswith("host (test pattern io mmap") and
          len(by_copy) >= 30 and all(r["frame_copies"] == 1 and r["device_copies"] == 0 for r in by_copy.values()),
          str(copy_pipeline)[:400])
else:
    check("frame buffers in host memory", pipeline.get("frame_memory", "").startswith("host (board"), str(pipeline))
    check("no device: frames of io mmap are read in place too", len(by_copy) >= 30 and
          all(r["frame_copies"] == 0 for r in by_copy.values()))
    check("no device, no device copies", pipeline.get("device_copies_per_frame") == 0 and
          cpu_pipeline.get("device_copies_per_frame") == 0)
    check("no device, no GPU time", all(r["latency_us"]["gpu"] == -1 for r in by_camera.values()) and
          "gpu" not in pipeline.get("latency", {}), str(pipeline.get("latency")))
common = sorted(set(by_camera) & set(by_cpu))
check("the two runs share frames (sequence numbers)", len(common) >= 30, f"{len(common)} in common")


def mismatches(results):
    found = []
    for seq in sorted(set(results) & set(by_cpu)):
        a, b = results[seq]["result"]["top_k"], by_cpu[seq]["result"]["top_k"]
        if [x["class"] for x in a] != [x["class"] for x in b] or any(
                abs(x["score"] - y["score"]) > 1e-4 * (1 + abs(y["score"])) for x, y in zip(a, b)):
            found.append((seq, a, b))
    return found


check("the camera engine's results equal CPU preprocessing's, frame for frame", not mismatches(by_camera),
      str(mismatches(by_camera)[:2]))
check("so do the copied frames' (io mmap)", not mismatches(by_copy), str(mismatches(by_copy)[:2]))
check("so do those of the engine ending in its own top-3, on half the GPU", len(by_top3) >= 30 and
      not mismatches(by_top3), str(mismatches(by_top3)[:2]))
top3_pipeline = (top3_status or {"pipelines": [{}]})["pipelines"][0]
check("status shows the pipeline's GPU priority and share", top3_pipeline.get("priority") == 4 and
      top3_pipeline.get("gpu_share") == 50, str({k: top3_pipeline.get(k) for k in ("priority", "gpu_share")}))
check("a swap to a camera engine for other frames is refused with what it takes",
      refused is not None and refused.returncode == 1 and f"takes yuyv {WIDTH + 2}x{HEIGHT} frames" in refused.stderr and
      f"nv12 {WIDTH}x{HEIGHT}" in refused.stderr, refused.stderr if refused else "")

copy_state = (copy_status or {"pipelines": [{}]})["pipelines"][0]
for name, results, state in (("camera engine", by_camera, pipeline), ("camera engine, io mmap", by_copy, copy_state),
                             ("cpu preprocess", by_cpu, cpu_pipeline)):
    def median(stage):
        values = sorted(r["latency_us"][stage] for r in results.values())
        return values[len(values) // 2] if values else float("nan")
    print(f"{BOARD} {name}: median us preprocess {median('preprocess'):.0f}, inference {median('inference'):.0f}, "
          f"total {median('total'):.0f} over {len(results)} frames; frame copies per frame "
          f"{state.get('frame_copies_per_frame')}, device copies per frame {state.get('device_copies_per_frame')}")
print(f"{len(failures)} failure(s)" if failures else "all checks passed")
sys.exit(1 if failures else 0)
