#!/usr/bin/python3
"""toolchain/board-overlay for every shipped profile: the zram and sysctl files follow the
profile's swap policy, edgertd.yaml names the board, the unit's MemoryMax is the profile's budget, the static overlay files are all there; a
profile with a bad swap value is refused naming the file and the field.

usage: test_board_overlay.py SOURCE_DIR WORK_DIR
"""
import glob
import os
import subprocess
import sys

import yaml


def main():
    source, work = sys.argv[1:3]
    tool = os.path.join(source, "toolchain", "board-overlay")
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    static = ["etc/edgert/edgertd.yaml", "etc/udev/rules.d/60-edgert.rules", "etc/ssh/sshd_config.d/50-edgert.conf",
              "usr/lib/tmpfiles.d/edgert.conf", "usr/lib/sysusers.d/edgert.conf"]
    for path in sorted(glob.glob(os.path.join(source, "board_profiles", "*.yaml"))):
        profile = yaml.safe_load(open(path))
        name, swap = profile["name"], profile.get("swap", {})
        out = os.path.join(work, name)
        r = subprocess.run([tool, "--board", name, "--out", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check(r.returncode == 0, "board-overlay --board %s" % name)
        if r.returncode:
            print(r.stdout)
            continue
        for f in static:
            check(os.path.isfile(os.path.join(out, f)), "%s: %s present" % (name, f))
        zram = open(os.path.join(out, "etc/systemd/zram-generator.conf")).read()
        sysctl = open(os.path.join(out, "etc/sysctl.d/90-edgert-swap.conf")).read()
        zram_mb = swap.get("zram_mb", 0)
        if zram_mb:
            check("[zram0]" in zram and "zram-size = %d\n" % zram_mb in zram, "%s: zram0 of %d MiB" % (name, zram_mb))
            check("vm.page-cluster = 0" in sysctl, "%s: page-cluster 0 with zram" % name)
        else:
            check("[zram0]" not in zram, "%s: no zram device" % name)
        check("vm.swappiness = %d\n" % swap.get("swappiness", 60) in sysctl, "%s: swappiness %d" % (name, swap.get("swappiness", 60)))
        budget = profile["memory"]["edgertd_budget_mb"]
        dropin = open(os.path.join(out, "etc/systemd/system/edgertd.service.d/50-board-memory.conf")).read()
        check("[Service]\n" in dropin and "MemoryMax=%dM\n" % budget in dropin and "MemoryHigh=%dM\n" % (budget * 7 // 8) in dropin,
              "%s: edgertd MemoryMax %d MiB (the profile's budget)" % (name, budget))
        cfg = yaml.safe_load(open(os.path.join(out, "etc/edgert/edgertd.yaml")))
        check(cfg.get("board") == name, "%s: edgertd.yaml board %s" % (name, cfg.get("board")))

    bad = os.path.join(work, "bad.yaml")
    with open(bad, "w") as f:
        f.write("name: bad\narchitecture: x86_64\ncpu: {cores: 1}\nmemory: {ram_mb: 512, edgertd_budget_mb: 64}\n"
                "swap: {zram_mb: 4096}\n")
    r = subprocess.run([tool, "--board", bad, "--out", os.path.join(work, "bad")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    check(r.returncode != 0 and "bad.yaml" in r.stdout and "zram_mb" in r.stdout,
          "zram larger than twice the RAM refused: " + r.stdout.strip())
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
