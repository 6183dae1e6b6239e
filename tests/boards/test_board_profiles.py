#!/usr/bin/python3
"""Every shipped board profile validates and builds the same model; fingerprints are equal exactly
where the hardware facts they cover (architecture, CPU features, GPU) are equal; an engine built
for an aarch64 board is refused on this x86_64 machine with a message naming both boards, and
the expert override loads and runs it.

usage: test_board_profiles.py EDGERT SOURCE_DIR WORK_DIR
"""
import glob
import json
import os
import subprocess
import sys

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

    # The GPU is not in inspect's JSON: read it from the profile text, as the fingerprint does.
    def gpu_of(name):
        text = open(os.path.join(source, "board_profiles", name + ".yaml")).read()
        if "type: cuda" not in text:
            return "none"
        cc = text.split("compute_capability:")[1].split("\n")[0].strip().strip('"')
        unified = "unified_memory: true" in text
        return "cuda-sm%s%s" % (cc, "-unified" if unified else "")

    facts = {n: (b["architecture"], tuple(sorted(set(b["cpu_features"]))), gpu_of(n)) for n, b in boards.items()}
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
