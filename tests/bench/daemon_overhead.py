#!/usr/bin/python3
"""edgertd's own overhead on the test pattern: capture timestamp to result published, minus the
engine's execute time, over a run at 640x480 30 fps with a small model (the demo CNN); plus
extra frame copies per frame. Prints a Markdown table for tests/bench/RESULTS.md.

  daemon_overhead.py BUILD_DIR [--seconds 20] [--format yuyv]
"""
import argparse
import json
import os
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--format", default="yuyv")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="edgert-overhead-")
    subprocess.run(["/usr/bin/python3", f"{ROOT}/tests/models/make_demo_model.py", "--output", f"{work}/demo.onnx",
                    "--input", f"{work}/in.npy"], check=True, capture_output=True)
    subprocess.run([f"{build}/bin/edgert", "build", "--board", "x86_64-generic", f"{work}/demo.onnx", "-o", f"{work}/demo.engine"], check=True,
                   capture_output=True)
    with open(f"{work}/edgertd.yaml", "w") as f:
        f.write(f"""board: x86_64-generic
control_socket: {work}/control.sock
state_dir: {work}/state
pipelines:
  - name: bench
    source: {{type: test-pattern, width: 640, height: 480, fps: 30, format: {args.format}}}
    preprocess: {{mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}}
    engine: {work}/demo.engine
    postprocess: {{type: classification, top_k: 5}}
    sinks:
      socket: {{path: {work}/results.sock}}
""")
    daemon = subprocess.Popen([f"{build}/bin/edgertd", "--config", f"{work}/edgertd.yaml"], stderr=subprocess.DEVNULL)
    try:
        while not os.path.exists(f"{work}/results.sock"):
            time.sleep(0.05)
        results, buffer = [], b""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(f"{work}/results.sock")
            end = time.time() + args.seconds
            while time.time() < end:
                buffer += s.recv(65536)
                *lines, buffer = buffer.split(b"\n")
                results += [json.loads(l) for l in lines if l]
        stats = json.loads(subprocess.run([f"{build}/bin/edgertctl", "--socket", f"{work}/control.sock", "--json",
                                           "stats", "bench"], capture_output=True, text=True, check=True).stdout)[0]
    finally:
        daemon.terminate()
        daemon.wait()
    results = results[30:]  # the first second warms caches and the allocator
    overhead = [r["latency_us"]["total"] - r["latency_us"]["inference"] for r in results]
    inference = [r["latency_us"]["inference"] for r in results]
    pre = [r["latency_us"]["preprocess"] for r in results]
    copies = sum(r["frame_copies"] for r in results) / len(results)
    print(f"Command: `/usr/bin/python3 tests/bench/daemon_overhead.py build --seconds {args.seconds:g} --format {args.format}`\n")
    print(f"{len(results)} results, {stats['fps']:.1f} fps, {stats['dropped']} dropped of {stats['frames_in']} frames\n")
    print("| measure | p50 | p99 |\n|---|---:|---:|")
    print(f"| daemon overhead: capture -> result published, minus engine execute (ms) | {percentile(overhead, .5) / 1000:.3f} | {percentile(overhead, .99) / 1000:.3f} |")
    print(f"| of which preprocess 640x480 {args.format} -> 1x3x32x32 float (ms) | {percentile(pre, .5) / 1000:.3f} | {percentile(pre, .99) / 1000:.3f} |")
    print(f"| engine execute, demo CNN (ms) | {percentile(inference, .5) / 1000:.3f} | {percentile(inference, .99) / 1000:.3f} |")
    print(f"\nExtra frame copies per frame: {copies:.2f} (the one preprocess pass reads the source buffer in place)")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
