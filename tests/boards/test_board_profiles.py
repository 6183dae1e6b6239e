#!/usr/bin/python3
"""Every shipped board profile validates and builds the same model; fingerprints are equal exactly
where the hardware facts they cover (architecture, CPU features, GPU) are equal; every engine
either runs on this machine or is refused for what this machine lacks (architecture, a CPU
feature), naming the engine's board and this machine's (the profile `--board native` picks),
never as a broken board record (Jetson engines, whose GPU is in the record, included), and
edgertd refuses it at start the same way; `edgert boards` agrees with what runs; a build
without --board is for native, which is the most specific shipped profile this machine has
every CPU feature of; an unknown --board lists the profiles; an engine built for an aarch64
board is refused naming both boards, and the expert override loads and runs it.

usage: test_board_profiles.py EDGERT SOURCE_DIR WORK_DIR
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def main():
    edgert, source, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    model, image = os.path.join(work, "demo.onnx"), os.path.join(work, "input.npy")
    r = run(["/usr/bin/python3", os.path.join(source, "tests/models/make_demo_model.py"), "--output", model, "--input", image])
    if r.returncode != 0:
        print(r.stdout)
        return 1

    profiles = sorted(glob.glob(os.path.join(source, "board_profiles", "*.yaml")))
    required = {"jetson-orin-nano-8gb", "jetson-orin-nx-16gb", "jetson-agx-orin-64gb", "raspberry-pi-5-8gb",
                "x86_64-generic", "qemu-virt-x86_64", "qemu-virt-aarch64"}
    names = {os.path.basename(p)[:-5] for p in profiles}
    check(required <= names, "shipped profiles include " + ", ".join(sorted(required)) +
          (" (missing: " + ", ".join(sorted(required - names)) + ")" if not required <= names else ""))

    r = run([edgert, "boards", "--json"])
    check(r.returncode == 0, "edgert boards --json")
    listing = json.loads(r.stdout) if r.returncode == 0 else {"machine": {}, "profiles": []}
    machine = listing["machine"]
    listed = {p["name"]: p for p in listing["profiles"]}
    native = machine.get("native", {}).get("name", "?")
    print("this machine: %s %s, GPU %s; native: %s" % (machine.get("architecture"), " ".join(machine.get("cpu_features", [])),
                                                      machine.get("gpu"), native))
    check(names <= set(listed), "edgert boards lists every shipped profile")

    boards = {}
    for path in profiles:
        name = os.path.basename(path)[:-5]
        engine = os.path.join(work, name + ".engine")
        r = run([edgert, "build", model, "--board", path, "-o", engine])
        check(r.returncode == 0, "profile %s validates and builds the demo model" % name)
        if r.returncode != 0:
            print(r.stdout)
            continue
        r = run([edgert, "inspect", engine, "--json"])
        check(r.returncode == 0, "inspect %s.engine" % name)
        if r.returncode != 0:
            print(r.stdout)
            continue
        board = json.loads(r.stdout)["board"]
        check(board["name"] == name, "%s.engine records board name %s" % (name, board["name"]))
        boards[name] = board

    # Broken copies of a shipped profile: refused with the file, line and field named.
    jetson = open(os.path.join(source, "board_profiles", "jetson-orin-nano-8gb.yaml")).read()
    for label, text, expect in [
            ("typo in a key", jetson.replace("swappiness:", "swapiness:"), ["broken.yaml:", "unknown key 'swapiness'"]),
            ("cuda without compute capability", "\n".join(l for l in jetson.split("\n") if "compute_capability" not in l),
             ["broken.yaml:", "compute_capability"]),
            ("budget above RAM", jetson.replace("edgertd_budget_mb: 3072", "edgertd_budget_mb: 9000"),
             ["broken.yaml:", "memory.edgertd_budget_mb"]),
            ("unknown CPU feature", jetson.replace("dotprod]", "dotprod, sve2]"), ["broken.yaml:", "unknown CPU feature 'sve2'"])]:
        broken = os.path.join(work, "broken.yaml")
        with open(broken, "w") as f:
            f.write(text)
        r = run([edgert, "build", model, "--board", broken, "-o", os.path.join(work, "broken.engine")])
        msg = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "(no message)"
        check(r.returncode != 0 and all(e in r.stdout for e in expect), "%s refused: %s" % (label, msg))

    # The engine records the GPU the fingerprint covers, as the profile spells it.
    def gpu_of(name):
        text = open(os.path.join(source, "board_profiles", name + ".yaml")).read()
        if "type: cuda" not in text:
            return "none"
        cc = text.split("compute_capability:")[1].split("\n")[0].strip().strip('"')
        unified = "unified_memory: true" in text
        return "cuda-sm%s%s" % (cc, "-unified" if unified else "")

    for n, b in sorted(boards.items()):
        check(b.get("gpu") == gpu_of(n), "%s.engine records GPU %s (profile: %s)" % (n, b.get("gpu"), gpu_of(n)))
    facts = {n: (b["architecture"], tuple(sorted(set(b["cpu_features"]))), b.get("gpu")) for n, b in boards.items()}
    for a in sorted(boards):
        for b in sorted(boards):
            if a >= b:
                continue
            same_hw = facts[a] == facts[b]
            same_fp = boards[a]["fingerprint"] == boards[b]["fingerprint"]
            check(same_hw == same_fp, "%s vs %s: hardware %s, fingerprints %s (%s / %s)" % (
                a, b, "equal" if same_hw else "differs", "equal" if same_fp else "differ",
                boards[a]["fingerprint"], boards[b]["fingerprint"]))
    # Boards whose hardware must differ, whatever the files say.
    for a, b in [("jetson-orin-nano-8gb", "raspberry-pi-5-8gb"), ("raspberry-pi-5-8gb", "qemu-virt-aarch64"),
                 ("x86_64-generic", "qemu-virt-x86_64"), ("qemu-virt-x86_64", "qemu-virt-aarch64")]:
        if a in boards and b in boards:
            check(boards[a]["fingerprint"] != boards[b]["fingerprint"], "%s and %s have different fingerprints" % (a, b))

    # Every engine on this machine: it runs, or it is refused for what this machine lacks, naming
    # both boards, exactly where `edgert boards` says so. Never a broken record.
    arch = machine.get("architecture")
    have = set(machine.get("cpu_features", []))
    for name in sorted(boards):
        engine = os.path.join(work, name + ".engine")
        r = run([edgert, "run", engine, "--input", "input=" + image, "--output-dir", os.path.join(work, "here-" + name)])
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "(no output)"
        board = boards[name]
        lacks = [f for f in board["cpu_features"] if f not in have]
        should_run = board["architecture"] == arch and not lacks
        check("inconsistent" not in r.stdout, "%s.engine: no broken-record refusal" % name)
        check(listed.get(name, {}).get("runs_here") == should_run,
              "edgert boards says %s's engines %s here" % (name, "run" if should_run else "do not run"))
        if should_run:
            check(r.returncode == 0, "%s.engine runs here" % name)
            if r.returncode != 0:
                print(r.stdout)
            continue
        if board["architecture"] != arch:
            honest = "built for board '%s' (%s) but this machine is '%s' (%s)" % (name, board["architecture"], native, arch)
        else:
            honest = "built for board '%s', which has CPU feature '%s'; this machine, '%s'" % (name, lacks[0], native)
        check(r.returncode != 0 and honest in r.stdout, "%s.engine refused for what this machine lacks: %s" % (name, last))

    # edgertd (board: native, the default) refuses a Jetson engine at start the same way, and
    # runs the engine built without --board.
    edgertd = os.path.join(os.path.dirname(edgert), "edgertd")
    r = run([edgert, "build", model, "-o", os.path.join(work, "native.engine")])
    check(r.returncode == 0 and "for board %s (native)" % native in r.stdout, "a build without --board is for native: " +
          (r.stdout.strip().splitlines()[0] if r.stdout.strip() else "(no output)"))
    r = run([edgert, "inspect", "--json", os.path.join(work, "native.engine")])
    check(r.returncode == 0 and json.loads(r.stdout)["board"]["name"] == native, "native.engine records board " + native)

    def daemon(engine):
        state = os.path.join(work, "edgertd-" + os.path.basename(engine))
        # A fresh state directory: edgertd resumes the engine a previous run recorded there.
        shutil.rmtree(state, ignore_errors=True)
        config = state + ".yaml"
        with open(config, "w") as f:
            f.write("control_socket: %s/control.sock\nstate_dir: %s\npipelines:\n  - name: main\n"
                    "    source: {type: test-pattern, width: 64, height: 64, fps: 10, format: yuyv}\n"
                    "    engine: %s\n    postprocess: {type: classification, top_k: 1}\n" % (state, state, engine))
        p = subprocess.Popen([edgertd, "--config", config], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 20
        while time.time() < deadline and p.poll() is None and not os.path.exists(os.path.join(state, "control.sock")):
            time.sleep(0.1)
        running = p.poll() is None
        if running:
            p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=20)[0]
        return running, out

    if os.path.exists(edgertd):
        jetson = "jetson-orin-nano-8gb"
        if jetson in boards and boards[jetson]["architecture"] != arch:
            running, out = daemon(os.path.join(work, jetson + ".engine"))
            honest = "built for board '%s' (aarch64) but this machine is '%s'" % (jetson, native)
            check(not running and honest in out, "edgertd refuses the %s engine at start naming both boards: %s" % (
                jetson, out.strip().splitlines()[-1] if out.strip() else "(no output)"))
        running, out = daemon(os.path.join(work, "native.engine"))
        check(running, "edgertd (board: native) starts with the engine built without --board")
        if not running:
            print(out)

    # native is the shipped profile of this architecture with this machine's GPU, else the one
    # with the most CPU features, all present here, unless this machine has features it does not
    # list (then a detected native-* profile).
    fits = [n for n, b in boards.items() if b["architecture"] == arch and set(b["cpu_features"]) <= have and
            b.get("gpu") in ("none", machine.get("gpu"))]
    with_gpu = [n for n in fits if boards[n].get("gpu") not in (None, "none")]
    fits = with_gpu or fits  # a profile with this machine's GPU comes first
    most = max((len(boards[n]["cpu_features"]) for n in fits), default=-1)
    best = sorted(n for n in fits if len(boards[n]["cpu_features"]) == most)
    if best and (with_gpu or set(boards[best[0]]["cpu_features"]) == have):
        check(native in best, "native is %s, the most specific profile this machine satisfies (%s)" % (native, ", ".join(best)))
    else:
        check(native.startswith("native-" + str(arch)), "no shipped profile describes this machine: native is detected (%s)" % native)

    r = run([edgert, "build", model, "--board", "no-such-board", "-o", os.path.join(work, "x.engine")])
    check(r.returncode != 0 and "available: native" in r.stdout and all(n in r.stdout for n in names),
          "an unknown --board lists the profiles: " + (r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "(none)"))

    # An aarch64 engine on this x86_64 machine: refused, naming both boards; the override runs it.
    arm_engine = os.path.join(work, "qemu-virt-aarch64.engine")
    host_engine = os.path.join(work, "x86_64-generic.engine")
    r = run([edgert, "run", arm_engine, "--board", "x86_64-generic", "--input", "input=" + image, "--output-dir", work + "/refused"])
    check(r.returncode != 0 and "qemu-virt-aarch64" in r.stdout and "x86_64-generic" in r.stdout,
          "aarch64 engine refused with --board x86_64-generic, naming both: " + r.stdout.strip().splitlines()[-1]
          if r.stdout.strip() else "aarch64 engine refused (no message!)")
    r = run([edgert, "run", arm_engine, "--input", "input=" + image, "--output-dir", work + "/refused"])
    check(r.returncode != 0 and "qemu-virt-aarch64" in r.stdout and "aarch64" in r.stdout and "x86_64" in r.stdout,
          "aarch64 engine refused on hardware alone, naming its board and both architectures: " +
          (r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "(no message)"))
    outs = {}
    for tag, engine, extra in [("host", host_engine, []), ("override", arm_engine, ["--allow-board-mismatch"])]:
        out_dir = os.path.join(work, "out-" + tag)
        os.makedirs(out_dir, exist_ok=True)
        r = run([edgert, "run", engine, "--input", "input=" + image, "--output-dir", out_dir, "--npy"] + extra)
        check(r.returncode == 0, "run %s (%s)" % (os.path.basename(engine), tag))
        if r.returncode != 0:
            print(r.stdout)
        outs[tag] = {f: numpy.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)}
    # The two engines may carry different tactics (the aarch64 one only those its board runs),
    # so the same math is summed in another order: equal up to float rounding.
    same = bool(outs.get("host")) and outs["host"].keys() == outs.get("override", {}).keys() and all(
        outs["host"][f].shape == outs["override"][f].shape and
        numpy.allclose(outs["host"][f], outs["override"][f], rtol=1e-5, atol=1e-6) for f in outs["host"])
    check(same, "--allow-board-mismatch runs the aarch64 engine here with outputs equal to the host engine's "
                "(to float rounding)")

    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
