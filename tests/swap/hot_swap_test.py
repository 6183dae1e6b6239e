#!/usr/bin/python3
"""Hot swap end to end. edgertd streams a 30 fps test pattern into engine A; then:
  - `edgert deploy` over a real sshd on 127.0.0.1 (own host key, authorized key, StrictModes no)
    installs and swaps to engine B, and is idempotent;
  - 100 swaps A <-> B while streaming: no frame sequence number missing from the results, every
    result after a switch from the new engine, RSS first vs last;
  - bad deploys refused with precise messages while the old engine serves: corrupted, wrong
    board, missing plugin, over budget, failed self-test, unsigned/untrusted/tampered when
    require_signed, a local user outside group edgert;
  - kill -9 at several points of a deploy: the daemon restarts on the recorded engine.
Writes the measured numbers to BUILD_DIR/swap_results.json.

  hot_swap_test.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import pwd
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
bindir = os.path.join(build, "bin")
edgertd, edgertctl, edgert, tamper = (os.path.join(bindir, n) for n in ("edgertd", "edgertctl", "edgert", "engine_tamper"))
work = tempfile.mkdtemp(prefix="edgert-swap-")
os.chmod(work, 0o755)
sock = f"{work}/control.sock"
failures = []
measured = {}
# The random moments (swap pacing, kill -9 points) come from one seed, printed so that a failing
# run can be replayed: EDGERT_TEST_SEED=N.
SEED = int(os.environ.get("EDGERT_TEST_SEED", time.time_ns() % 2**32))
random.seed(SEED)
print(f"random seed {SEED} (EDGERT_TEST_SEED={SEED} replays it)", flush=True)


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else "")
          + (f" (random seed {SEED})" if not ok else ""), flush=True)
    if not ok:
        failures.append(what)


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)


def ctl(*args):
    return run(edgertctl, "--socket", sock, *args)


def ctl_json(*args):
    r = ctl("--json", *args)
    if r.returncode != 0:
        raise RuntimeError(f"edgertctl {' '.join(args)}: {r.stderr}")
    return json.loads(r.stdout)


def write_config(require_signed=False, budget=64, extra=""):
    with open(f"{work}/edgertd.yaml", "w") as f:
        f.write(f"""board: x86_64-generic
memory_budget_mb: {budget}
control_socket: {sock}
state_dir: {work}/state
trusted_keys_dir: {work}/trusted-keys.d
require_signed: {"true" if require_signed else "false"}
{extra}pipelines:
  - name: cam
    source: {{type: test-pattern, width: 320, height: 240, fps: 30, format: nv12, buffers: 10}}
    engine: {work}/a.engine
    queue_depth: 8
    postprocess: {{type: classification, top_k: 1}}
    sinks:
      socket: {{path: {work}/results.sock}}
""")
    return f"{work}/edgertd.yaml"


class Daemon:
    def __init__(self, env_extra=None):
        env = dict(os.environ)
        env.update(env_extra or {})
        self.log = open(f"{work}/edgertd.log", "a")
        for p in (sock, f"{work}/results.sock"):
            if os.path.exists(p):
                os.unlink(p)
        self.proc = subprocess.Popen([edgertd, "--config", f"{work}/edgertd.yaml"], stderr=self.log, env=env)
        deadline = time.time() + 20
        while time.time() < deadline and not (os.path.exists(sock) and os.path.exists(f"{work}/results.sock")):
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.alive():
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.log.close()

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])


class ResultReader(threading.Thread):
    """Collects (receive time, result) from the socket sink."""

    def __init__(self):
        super().__init__(daemon=True)
        self.results, self.stop_flag = [], False
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(f"{work}/results.sock")
        self.s.settimeout(0.5)
        self.start()

    def run(self):
        buf = b""
        while not self.stop_flag:
            try:
                chunk = self.s.recv(1 << 20)
            except socket.timeout:
                continue
            if not chunk:
                break
            now = time.monotonic()
            buf += chunk
            *lines, buf = buf.split(b"\n")
            self.results += [(now, json.loads(l)) for l in lines if l]

    def close(self):
        self.stop_flag = True
        self.join(timeout=5)
        self.s.close()

    def wait_for(self, predicate, seconds=10, start=0):
        deadline = time.time() + seconds
        while time.time() < deadline:
            for i in range(start, len(self.results)):
                if predicate(self.results[i][1]):
                    return i
            time.sleep(0.002)
        return None


def sha256(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def cam():
    return ctl_json("stats", "cam")[0]


# ---------------------------------------------------------------- engines and keys
for name, seed in (("a", 2026), ("b", 7)):
    run("/usr/bin/python3", f"{source}/tests/models/make_demo_model.py", "--output", f"{work}/{name}.onnx",
        "--input", f"{work}/{name}.npy", "--seed", str(seed))
r = run(edgert, "keygen", "ci", "--dir", work)
check("edgert keygen writes a key pair", r.returncode == 0 and os.path.exists(f"{work}/ci.key"), r.stderr)
run(edgert, "keygen", "stranger", "--dir", work)
os.makedirs(f"{work}/trusted-keys.d")
shutil.copy(f"{work}/ci.pub", f"{work}/trusted-keys.d/ci.pub")
for name in ("a", "b"):
    r = run(edgert, "build", "--board", "x86_64-generic", f"{work}/{name}.onnx", "-o", f"{work}/{name}.engine", "-v")
    check(f"engine {name} built with a self-test vector", r.returncode == 0 and "self-test vector: seed" in r.stderr,
          r.stderr[-400:])
    r = run(edgert, "build", "--board", "x86_64-generic", f"{work}/{name}.onnx", "-o", f"{work}/{name}-signed.engine", "--sign", f"{work}/ci.key")
    check(f"engine {name} built and signed", r.returncode == 0 and "signed by 'ci'" in r.stdout, r.stdout + r.stderr)
run(edgert, "build", "--board", "x86_64-generic", f"{work}/a.onnx", "-o", f"{work}/a-stranger.engine", "--sign", f"{work}/stranger.key")
sha_a, sha_b = sha256(f"{work}/a.engine"), sha256(f"{work}/b.engine")
sha_as, sha_bs = sha256(f"{work}/a-signed.engine"), sha256(f"{work}/b-signed.engine")

write_config()
daemon = Daemon()
uname, created_user = "edgert-swap-nobody", False
try:
    check("edgertd starts on engine A", daemon.alive() and cam()["engine"] == sha_a,
          open(f"{work}/edgertd.log").read()[-800:])
    reader = ResultReader()
    check("results flow and carry the engine's sha256", reader.wait_for(lambda r: r["engine"] == sha_a) is not None)

    # ------------------------------------------------------------ edgert deploy over ssh
    os.makedirs("/run/sshd", exist_ok=True)
    for key in ("host", "user"):
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{work}/ssh_{key}_key")
    shutil.copy(f"{work}/ssh_user_key.pub", f"{work}/authorized_keys")
    # A port the kernel says is free now (bound and released; sshd takes it a moment later).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    user = pwd.getpwuid(os.getuid()).pw_name
    with open(f"{work}/sshd_config", "w") as f:
        f.write(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {work}/ssh_host_key
AuthorizedKeysFile {work}/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
PidFile {work}/sshd.pid
Subsystem sftp /usr/lib/openssh/sftp-server
""")
    sshd = subprocess.Popen(["/usr/sbin/sshd", "-f", f"{work}/sshd_config", "-D", "-e"], stderr=open(f"{work}/sshd.log", "w"))
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        deploy_cmd = [edgert, "deploy", "--host", f"{user}@127.0.0.1", "-p", str(port), "-i", f"{work}/ssh_user_key",
                      "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={work}/known_hosts",
                      "--edgertctl", edgertctl, "--socket", sock, "--staging", f"{work}/staging", "--pipeline", "cam"]
        t0 = time.monotonic()
        start = len(reader.results)
        r = run(*deploy_cmd, f"{work}/b.engine")
        i = reader.wait_for(lambda x: x["engine"] == sha_b, start=start)
        ssh_swap_ms = (reader.results[i][0] - t0) * 1000 if i is not None else None
        print(r.stdout)
        check("edgert deploy over ssh copies, verifies and swaps to B",
              r.returncode == 0 and "[2/5] copying" in r.stdout and f"runs engine {sha_b}" in r.stdout and
              cam()["engine"] == sha_b, r.stdout + r.stderr + open(f"{work}/sshd.log").read()[-500:])
        check("every step is printed", all(s in r.stdout for s in ("verify", "load", "warm_up", "self_test", "switch", "record")),
              r.stdout)
        measured["ssh_deploy_to_first_new_frame_ms"] = ssh_swap_ms
        r = run(*deploy_cmd, f"{work}/b.engine")
        check("a second deploy of the same engine is a no-op (idempotent by sha256)",
              r.returncode == 0 and "nothing to do" in r.stdout and "copying" not in r.stdout, r.stdout + r.stderr)
        r = run(*deploy_cmd, f"{work}/a.engine")
        check("deploying an engine the board already has swaps without copying",
              r.returncode == 0 and "not copying" in r.stdout and cam()["engine"] == sha_a, r.stdout + r.stderr)
    finally:
        sshd.terminate()
        sshd.wait(timeout=10)

    engines = ctl_json("engines")
    check("edgertctl engines lists sha256, board, size, signer",
          {e["sha256"] for e in engines} >= {sha_a, sha_b} and all(e["board"] == "x86_64-generic" and e["size"] > 0 for e in engines),
          json.dumps(engines)[:400])

    # ------------------------------------------------------------ 100 swaps while streaming
    time.sleep(1)
    rss_first = daemon.rss_kib()
    before = cam()
    start = len(reader.results)
    swap_ms, around = [], []
    target = [sha_b, sha_a]
    refused = 0
    for n in range(100):
        want = target[n % 2]
        t0 = time.monotonic()
        mark = len(reader.results)
        r = ctl("swap", "cam", want[:16])
        if r.returncode != 0:
            refused += 1
            print(r.stderr)
            if refused > 3:
                break
            continue
        i = reader.wait_for(lambda x: x["engine"] == want, start=mark, seconds=5)
        if i is not None:
            swap_ms.append((reader.results[i][0] - t0) * 1000)
        time.sleep(0.1 + random.random() * 0.1)
    time.sleep(0.5)
    after = cam()
    rss_last = daemon.rss_kib()
    got = [x for _, x in reader.results[start:]]
    check("100 swaps all succeed", refused == 0, f"{refused} refused")
    seqs = [x["sequence"] for x in got]
    check("results arrive in sequence order", all(b > a for a, b in zip(seqs, seqs[1:])))
    missing = (seqs[-1] - seqs[0] + 1) - len(seqs) if seqs else -1
    slot_drops = after["dropped"] - before["dropped"]
    errors = after["errors"] - before["errors"]
    check("no frame sequence number missing from the result stream across the swaps", missing == 0 and errors == 0,
          f"missing {missing}, queue drops {slot_drops}, errors {errors}")
    # Start from the engine running before the first swap: the first swap can land before any
    # result of the old engine reaches the window. Each swap waits for a result of the new engine,
    # so a stale result of the old one after it would add transitions, a missed switch remove one.
    engine_order = [before["engine"]] + [x["engine"] for x in got]
    transitions = sum(1 for a, b in zip(engine_order, engine_order[1:]) if a != b)
    check("each swap is one clean switch: no result from the old engine after the new one's first",
          transitions == 100, f"{transitions} transitions")
    scores = {e: {json.dumps(x["result"]) for x in got if x["engine"] == e} for e in (sha_a, sha_b)}
    check("the two engines' outputs are distinguishable", scores[sha_a].isdisjoint(scores[sha_b]),
          f"{len(scores[sha_a] & scores[sha_b])} shared outputs")
    check("daemon RSS does not grow across 100 swaps", rss_last <= rss_first * 1.10 + 2048,
          f"first {rss_first} KiB, last {rss_last} KiB")
    steady = sorted(x["latency_us"]["total"] for x in got if x["engine"] == got[0]["engine"])
    lat_switch = []
    for k in range(1, len(got)):
        if got[k]["engine"] != got[k - 1]["engine"]:
            lat_switch += [got[j]["latency_us"]["total"] for j in range(max(0, k - 1), min(len(got), k + 2))]
    all_lat = sorted(x["latency_us"]["total"] for x in got)
    q = lambda v, p: v[min(len(v) - 1, int(p * len(v)))] / 1000 if v else None
    lat_switch.sort()
    swap_ms.sort()
    measured.update({
        "swaps": 100, "refused": refused, "missing_results": missing, "slot_drops": slot_drops, "errors": errors,
        "frames": after["frames_in"] - before["frames_in"], "results": len(got),
        "rss_first_kib": rss_first, "rss_last_kib": rss_last,
        "swap_to_first_new_frame_ms": {"p50": swap_ms[len(swap_ms) // 2] if swap_ms else None,
                                        "p90": swap_ms[int(0.9 * len(swap_ms))] if swap_ms else None,
                                        "min": swap_ms[0] if swap_ms else None, "max": swap_ms[-1] if swap_ms else None},
        "latency_total_ms": {"all_p50": q(all_lat, 0.5), "all_p99": q(all_lat, 0.99),
                             "around_switch_p50": q(lat_switch, 0.5), "around_switch_p99": q(lat_switch, 0.99),
                             "around_switch_max": lat_switch[-1] / 1000 if lat_switch else None},
    })
    print(json.dumps(measured, indent=1))

    # ------------------------------------------------------------ rollback and history
    r = ctl("rollback", "cam")
    check("edgertctl rollback goes back to the previous engine", r.returncode == 0 and cam()["engine"] == sha_b,
          r.stdout + r.stderr)
    hist = ctl_json("history", "cam")
    check("edgertctl history lists deployments with their final step",
          len(hist) == 50 and hist[0]["state"] == "active" and hist[0]["step"] == "record", json.dumps(hist[:2]))

    # ------------------------------------------------------------ bad deploys
    def refused_deploy(what, path, *needles, code=None):
        before_engine = cam()["engine"]
        mark = len(reader.results)
        r = ctl("deploy", path, "--pipeline", "cam")
        time.sleep(1.0)
        after_r = [x for _, x in reader.results[mark:]]
        now_engine = cam()["engine"]
        serving = len(after_r) >= 3 and all(x["engine"] == before_engine for x in after_r) and now_engine == before_engine
        ok = r.returncode != 0 and all(n in r.stderr for n in needles) and (code is None or code in r.stderr)
        check(f"refused: {what}, the old engine keeps serving", ok and serving,
              f"refused {ok}, {len(after_r)} results since, engines {set(x['engine'][:12] for x in after_r)}, "
              f"before {before_engine[:12]}, now {now_engine[:12]}: " + r.stderr[-300:])
        print("    " + r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "")

    run(tamper, "corrupt", f"{work}/a.engine", f"{work}/bad-corrupt.engine")
    refused_deploy("corrupted file", f"{work}/bad-corrupt.engine", "checksum", code="corrupt_engine")
    run(edgert, "build", f"{work}/a.onnx", "--board", "raspberry-pi-5-8gb", "-o", f"{work}/bad-board.engine")
    refused_deploy("wrong board", f"{work}/bad-board.engine", "built for board 'raspberry-pi-5-8gb'", "this board is 'x86_64-generic'",
                   code="wrong_board")
    run(tamper, "plugin", f"{work}/a.engine", f"{work}/bad-plugin.engine")
    refused_deploy("missing plugin", f"{work}/bad-plugin.engine", "not installed", code="missing_plugin")
    heavy = f"{work}/heavy.onnx"
    run("/usr/bin/python3", "-c", f"""
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
w = numpy_helper.from_array(np.full((1, 3, 32, 32), 0.5, np.float32), 'w')
big = numpy_helper.from_array(np.full((20, 1024, 1024), 0.5, np.float32), 'big')
g = helper.make_graph([helper.make_node('Mul', ['x', 'w'], ['m']),
                       helper.make_node('ReduceSum', ['big'], ['s'], keepdims=0),
                       helper.make_node('Add', ['m', 's'], ['y'])], 'heavy',
                      [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 3, 32, 32])],
                      [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 3, 32, 32])], [w, big])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]), '{heavy}')
""")
    r = run(edgert, "build", "--board", "x86_64-generic", heavy, "--no-optimize", "-o", f"{work}/heavy.engine", timeout=300)
    refused_deploy("over the memory budget", f"{work}/heavy.engine", "needs", "memory budget is 64.0 MiB", code="over_budget")
    # Stop-first: two 36 MiB engines do not fit the 64 MiB budget together; each fits alone.
    for tag, fill in (("mid1", 0.25), ("mid2", 0.75)):
        run("/usr/bin/python3", "-c", f"""
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
big = numpy_helper.from_array(np.full((9, 1024, 1024), {fill}, np.float32), 'big')
g = helper.make_graph([helper.make_node('ReduceMax', ['big'], ['s'], keepdims=0),
                       helper.make_node('Add', ['x', 's'], ['y'])], '{tag}',
                      [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 3, 32, 32])],
                      [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 3, 32, 32])], [big])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]), '{work}/{tag}.onnx')
""")
        run(edgert, "build", "--board", "x86_64-generic", f"{work}/{tag}.onnx", "--no-optimize", "-o", f"{work}/{tag}.engine", timeout=300)
    r = ctl("deploy", f"{work}/mid1.engine", "--pipeline", "cam")
    check("a 36 MiB engine deploys alongside the small one (overlap)", r.returncode == 0 and "overlap" in r.stdout,
          r.stdout + r.stderr)
    refused_deploy("both engines over the budget and swap_stop_first is off", f"{work}/mid2.engine",
                   "swap_stop_first: true", code="over_budget")
    write_config(extra="swap_stop_first: true\n")
    daemon.proc.send_signal(signal.SIGHUP)
    time.sleep(1)
    sha_mid2 = sha256(f"{work}/mid2.engine")
    before = cam()
    mark = len(reader.results)
    r = ctl("deploy", f"{work}/mid2.engine", "--pipeline", "cam")
    got_new = reader.wait_for(lambda x: x["engine"] == sha_mid2, start=mark, seconds=5)
    after = cam()
    check("stop-first swap when both engines do not fit: the old one goes, the new one serves",
          r.returncode == 0 and "stop-first" in r.stdout and after["engine"] == sha_mid2 and got_new is not None,
          r.stdout + r.stderr)
    print(f"    frames dropped while no engine was loaded: {after['unloaded_drops'] - before['unloaded_drops']}")
    r = ctl("deploy", f"{work}/a.engine", "--pipeline", "cam")
    write_config()
    daemon.proc.send_signal(signal.SIGHUP)
    time.sleep(1)
    check("back on engine A after the stop-first swap", r.returncode == 0 and cam()["engine"] == sha_a, r.stdout + r.stderr)
    run(tamper, "selftest", f"{work}/a.engine", f"{work}/bad-selftest.engine")
    refused_deploy("failed self-test", f"{work}/bad-selftest.engine", "self-test failed", code="self_test_failed")

    # require_signed: reload the configuration (SIGHUP keeps the running pipeline)
    write_config(require_signed=True)
    daemon.proc.send_signal(signal.SIGHUP)
    time.sleep(1)
    run(edgert, "build", "--board", "x86_64-generic", f"{work}/a.onnx", "--no-optimize", "-o", f"{work}/unsigned.engine")
    refused_deploy("unsigned engine when require_signed", f"{work}/unsigned.engine", "not signed", code="unsigned_engine")
    refused_deploy("engine signed by an untrusted key", f"{work}/a-stranger.engine", "'stranger'", "not a trusted key",
                   code="untrusted_signer")
    run(tamper, "signature", f"{work}/a-signed.engine", f"{work}/bad-sig.engine")
    refused_deploy("tampered signature", f"{work}/bad-sig.engine", "does not match", code="bad_signature")
    run(tamper, "content", f"{work}/a-signed.engine", f"{work}/bad-content.engine")
    refused_deploy("signed engine with tampered weights", f"{work}/bad-content.engine", "does not match", code="bad_signature")
    r = ctl("deploy", f"{work}/a-signed.engine", "--pipeline", "cam")
    check("a signed engine by a trusted key is accepted", r.returncode == 0 and cam()["engine"] == sha_as, r.stdout + r.stderr)
    engines = {e["sha256"]: e for e in ctl_json("engines")}
    check("edgertctl engines shows the signer", engines.get(sha_as, {}).get("signer") == "ci", json.dumps(engines.get(sha_as)))

    # a local user outside group edgert
    # (uname set above, so the finally clause can remove what it created)
    created_user = subprocess.run(["id", uname], capture_output=True).returncode != 0
    if created_user:
        run("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", uname)
    # The refusals below prove something only if this user exists and is outside group edgert.
    ident = run("id", "-nG", uname)
    check("the test user exists, outside group edgert", ident.returncode == 0 and "edgert" not in ident.stdout.split(),
          ident.stdout + ident.stderr)
    r = run("runuser", "-u", uname, "--", edgertctl, "--socket", sock, "engines")
    check("a user outside group edgert cannot use the socket",
          r.returncode != 0 and "Permission denied" in r.stderr, r.stdout + r.stderr)
    os.chmod(sock, 0o666)  # even with the socket's mode loosened, the daemon checks SO_PEERCRED
    r = run("runuser", "-u", uname, "--", edgertctl, "--socket", sock, "swap", "cam", sha_a)
    check("...and with the socket mode loosened the daemon refuses by SO_PEERCRED",
          r.returncode != 0 and "permission_denied" in r.stderr and "group 'edgert'" in r.stderr and cam()["engine"] == sha_as,
          r.stderr)
    print("    " + r.stderr.strip())
    reader.close()
finally:
    daemon.stop()
    if created_user:
        subprocess.run(["userdel", uname], capture_output=True)
check("SIGTERM stops the daemon cleanly", daemon.proc.returncode == 0, open(f"{work}/edgertd.log").read()[-500:])

db = sqlite3.connect(f"{work}/state/edgertd.db")
states = dict(db.execute("select state, count(*) from deployments group by state").fetchall())
check("every swap is recorded in SQLite (active, superseded, failed)",
      states.get("failed", 0) >= 9 and states.get("superseded", 0) >= 100, str(states))
db.close()

# ---------------------------------------------------------------- kill -9 during deploys
write_config(require_signed=False)


def store_consistent():
    store = f"{work}/state/engines"
    names = os.listdir(store)
    return all(n.endswith(".engine") and sha256(f"{store}/{n}") == n[:-7] for n in names), names


def recorded():
    with open(f"{work}/state/active/cam.json") as f:
        return json.load(f)["sha256"]


for point in ("install-tmp", "install-renamed", "switched", "active-tmp", "active-renamed"):
    # A fresh engine per point so each deploy installs a new file.
    seed = 100 + len(point)
    run("/usr/bin/python3", f"{source}/tests/models/make_demo_model.py", "--output", f"{work}/k.onnx",
        "--input", f"{work}/k.npy", "--seed", str(seed + random.randint(0, 10000)))
    run(edgert, "build", "--board", "x86_64-generic", f"{work}/k.onnx", "-o", f"{work}/k.engine")
    d = Daemon({"EDGERTD_DEBUG_CRASH_AT": point})
    r = ctl("deploy", f"{work}/k.engine", "--pipeline", "cam")
    d.proc.wait(timeout=20)
    killed = d.proc.returncode == -signal.SIGKILL
    d.log.close()
    d = Daemon()
    try:
        ok_store, names = store_consistent()
        running = cam()["engine"] if d.alive() else None
        check(f"kill -9 at {point}: the daemon restarts on the recorded engine, the store holds only whole files",
              killed and d.alive() and running == recorded() and ok_store,
              f"killed {killed}, running {running}, recorded {recorded()}, store {names}")
        hist = ctl_json("history", "cam")
        # Killed while copying into the store, the swap had not begun: no row to close.
        check(f"kill -9 at {point}: the deployment is closed as interrupted (or recorded active once recorded)",
              all(h["state"] != "in_progress" for h in hist) and
              (hist[0]["state"] == "interrupted" or point.startswith("install") or point == "active-renamed"),
              json.dumps(hist[:2]))
    finally:
        d.stop()

# kill -9 from outside at random moments of back-to-back deploys
for n in range(5):
    d = Daemon()
    target = [f"{work}/a.engine", f"{work}/b.engine"]
    # Deploys one after another, alternating engines, until a random moment 0.3-1 s in; the
    # kill lands wherever the deploy in flight then is.
    stop = time.time() + 0.3 + random.random() * 0.7
    p = None
    deploys = 0
    while time.time() < stop:
        p = subprocess.Popen([edgertctl, "--socket", sock, "deploy", target[deploys % 2], "--pipeline", "cam"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deploys += 1
        try:
            p.wait(timeout=max(0.0, stop - time.time()))
        except subprocess.TimeoutExpired:
            break
    d.proc.kill()
    d.proc.wait()
    d.log.close()
    if p:
        p.wait(timeout=10)
    d = Daemon()
    try:
        ok_store, names = store_consistent()
        running = cam()["engine"] if d.alive() else None
        check(f"random kill -9 #{n + 1} during back-to-back deploys ({deploys} begun): restart on the recorded engine",
              d.alive() and running == recorded() and ok_store, f"running {running}, recorded {recorded()}, {names}")
    finally:
        d.stop()

with open(os.path.join(build, "swap_results.json"), "w") as f:
    json.dump(measured, f, indent=1)
if not failures:
    subprocess.run(["rm", "-rf", work])
else:
    print(f"work directory kept: {work}")
print(f"{len(failures)} checks failed" if failures else "ALL CHECKS PASSED")
sys.exit(1 if failures else 0)
