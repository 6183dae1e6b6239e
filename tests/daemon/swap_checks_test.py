#!/usr/bin/python3
"""What edgertd checks about the engines it runs, against a real edgertd on the test-pattern source:

  trial_frame   a swap to an engine that cannot serve the pipeline is refused and recorded
  frame_errors  frames that keep failing are logged and recorded as events, rate-limited
  signed_start  require_signed applies to the configured engine at start and in --check
  store_cleanup refused uploads leave the store; delete and prune spare active and rollback engines

  swap_checks_test.py BUILD_DIR SOURCE_DIR CASE
"""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time

from daemon_case import Daemon, build_engine, check, ctl, demo_onnx, edgert, edgertd, flat_onnx, run_case, work


def write_config(engine, top="", postprocess="{type: classification, top_k: 2}"):
    path = f"{work}/edgertd{len([n for n in os.listdir(work) if n.endswith('.yaml')])}.yaml"
    with open(path, "w") as f:
        f.write(f"""board: x86_64-generic
control_socket: {work}/control.sock
state_dir: {work}/state
{top}pipelines:
  - name: cam
    source: {{type: test-pattern, width: 64, height: 64, fps: 30, format: nv12}}
    engine: {engine}
    postprocess: {postprocess}
    sinks:
      sqlite: {{retention_days: 1}}
""")
    return path


def events(kind):
    with sqlite3.connect(f"{work}/state/edgertd.db") as db:
        return [m for (m,) in db.execute("select message from events where kind = ?", (kind,))]


def sha256(path):
    return subprocess.run(["sha256sum", path], capture_output=True, text=True, check=True).stdout.split()[0]


def store():
    return sorted(n[:-len(".engine")] for n in os.listdir(f"{work}/state/engines") if n.endswith(".engine"))


def case_trial_frame():
    good = build_engine(demo_onnx(), "demo")
    flat = build_engine(flat_onnx(), "flat")
    daemon = Daemon(write_config(good))
    try:
        res = ctl("deploy", flat, "--pipeline", "cam")
        check("a swap to an engine whose input is not an image is refused", res.returncode == 1 and
              "incompatible_engine" in res.stderr and "trial_frame" in res.stderr, res.stdout + res.stderr)
        stats = json.loads(ctl("--json", "stats", "cam").stdout)[0]
        check("the pipeline still runs its engine, without errors", stats["engine"] == sha256(good) and stats["errors"] == 0,
              json.dumps(stats))
        refused = [m for m in events("swap_refused") if "trial_frame" in m]
        check("the refusal is recorded in events", len(refused) == 1 and "4-D image tensor" in refused[0], str(refused))
        res = ctl("deploy", build_engine(demo_onnx(), "demo2", "--no-self-test"), "--pipeline", "cam")
        check("a swap to an engine that serves the pipeline passes the trial frame", res.returncode == 0 and
              "trial_frame" in res.stdout, res.stdout + res.stderr)
    finally:
        daemon.stop()


def case_frame_errors():
    # The demo classifier's [1, 10] output is not a segmentation map: every frame fails.
    daemon = Daemon(write_config(build_engine(demo_onnx(), "demo"), postprocess="{type: segmentation}"))
    try:
        deadline, recorded = time.time() + 10, []
        while time.time() < deadline and not recorded:
            recorded = events("frame_errors")
            time.sleep(0.2)
        check("failing frames are recorded in events with the error", len(recorded) == 1 and
              "frame(s) failed" in recorded[0] and "segmentation output" in recorded[0], str(recorded))
        time.sleep(3)  # ~90 more failing frames
        logged = daemon.stderr().count("frame(s) failed")
        check("and logged once per interval, not per frame", logged == 1 and len(events("frame_errors")) == 1,
              f"{logged} log lines, {len(events('frame_errors'))} events")
    finally:
        daemon.stop()


def case_signed_start():
    subprocess.run([edgert, "keygen", "ops", "--dir", work], check=True, capture_output=True)
    os.makedirs(f"{work}/keys")
    shutil.copy(f"{work}/ops.pub", f"{work}/keys/ops.pub")
    top = f"require_signed: true\ntrusted_keys_dir: {work}/keys\n"
    unsigned = build_engine(demo_onnx(), "demo")
    config = write_config(unsigned, top=top)
    for args in (["--check"], []):
        try:
            res = subprocess.run([edgertd, "--config", config, *args], capture_output=True, text=True, timeout=15)
        except subprocess.TimeoutExpired:  # it started and ran
            res = subprocess.CompletedProcess([], "still running after 15 s", "", "")
        check(f"{' '.join(args) or 'start'} refuses an unsigned configured engine under require_signed",
              res.returncode == 78 and "is not signed and require_signed is true" in res.stderr,
              f"rc {res.returncode} {res.stderr[-500:]}")
    signed = build_engine(demo_onnx(), "signed", "--sign", f"{work}/ops.key")
    res = subprocess.run([edgertd, "--config", write_config(signed, top=top), "--check"], capture_output=True, text=True)
    check("--check accepts a signed engine", res.returncode == 0, res.stderr)
    config = write_config(signed, top=top)
    daemon = Daemon(config)
    try:
        # A reload that adds a pipeline on an unsigned engine does not start it.
        with open(config, "a") as f:
            f.write(f"""  - name: extra
    source: {{type: test-pattern, width: 64, height: 64, fps: 30, format: nv12}}
    engine: {unsigned}
    postprocess: {{type: classification, top_k: 2}}
""")
        daemon.process.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while time.time() < deadline and "reload" not in daemon.stderr():
            time.sleep(0.1)
        time.sleep(0.2)
        names = [p["name"] for p in json.loads(ctl("--json", "pipelines").stdout)]
        check("a reload does not start a pipeline on an unsigned engine", names == ["cam"] and
              "is not signed and require_signed is true" in daemon.stderr(), f"{names} {daemon.stderr()[-500:]}")
    finally:
        daemon.stop()
    check("a signed engine starts and stops cleanly", daemon.process.returncode == 0, daemon.stderr()[-500:])


def case_store_cleanup():
    subprocess.run([edgert, "keygen", "ops", "--dir", work], check=True, capture_output=True)
    os.makedirs(f"{work}/keys")
    shutil.copy(f"{work}/ops.pub", f"{work}/keys/ops.pub")
    a = build_engine(demo_onnx(), "a", "--sign", f"{work}/ops.key")
    daemon = Daemon(write_config(a, top=f"require_signed: true\ntrusted_keys_dir: {work}/keys\n"))
    try:
        unsigned = build_engine(demo_onnx(), "unsigned", "--no-self-test")
        res = ctl("deploy", unsigned, "--pipeline", "cam")
        check("an unsigned upload is refused", res.returncode == 1 and "unsigned_engine" in res.stderr, res.stderr)
        check("and removed from the store", store() == [sha256(a)], str(store()))
        b = build_engine(demo_onnx(), "b", "--sign", f"{work}/ops.key", "--no-self-test")
        c = build_engine(demo_onnx(), "c", "--sign", f"{work}/ops.key", "--no-optimize")
        for engine in (b, c):
            res = ctl("deploy", engine, "--pipeline", "cam")
            check(f"deploy {os.path.basename(engine)}", res.returncode == 0, res.stderr)
        res = ctl("delete", sha256(c))
        check("delete refuses the active engine", res.returncode == 1 and "in_use" in res.stderr and "runs in pipeline 'cam'" in res.stderr,
              res.stderr)
        res = ctl("delete", sha256(b)[:12])
        check("delete refuses the rollback engine", res.returncode == 1 and "rollback engine of pipeline 'cam'" in res.stderr,
              res.stderr)
        res = ctl("--json", "prune")
        pruned = json.loads(res.stdout) if res.returncode == 0 else {}
        check("prune deletes only the engine nothing uses", pruned.get("deleted") == [sha256(a)] and
              store() == sorted([sha256(b), sha256(c)]), res.stdout + res.stderr)
        res = ctl("rollback", "cam")
        check("rollback still works after prune", res.returncode == 0, res.stderr)
        res = ctl("delete", sha256(a))
        check("deleting an engine no longer in the store is a typed error", res.returncode == 1 and "no_such_engine" in res.stderr,
              res.stderr)
    finally:
        daemon.stop()


run_case({name[len("case_"):]: f for name, f in dict(globals()).items() if name.startswith("case_")})
