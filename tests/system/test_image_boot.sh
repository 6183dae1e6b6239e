#!/usr/bin/env bash
# System test: a qemu board image (toolchain/mkimage with this build's .deb packages and a demo
# engine) boots under qemu-system-x86_64 or qemu-system-aarch64 -M virt (TCG); root logs in with ssh on a
# forwarded port; edgertd is active and answers edgertctl; the profile's zram swap and sysctl are
# in effect; the overlay's group, directories and sshd drop-in are in place; then, in the VM:
# vivid's /dev/video0 feeds the pipeline and results come out of the engine; `edgert deploy` over
# the forwarded ssh port hot-swaps to a signed engine (an unsigned one is refused); `edgert tune
# --host` times the model's tactics on the board and a build here for the board's profile then
# times none and carries the board's tactic for every node; kill -9 of
# edgertd and systemd restarts it on the deployed engine; the unit's MemoryMax (the profile's
# budget) is the cgroup's memory.max and edgertd's budget.
#
# usage: test_image_boot.sh BUILD_DIR SOURCE_DIR [qemu-virt-x86_64|qemu-virt-aarch64]
# qemu-virt-aarch64 takes its arm64 packages from the aarch64 cross build, BUILD_DIR/cross-aarch64
# ($EDGERT_CROSS_BUILD_DIR, made by boards.cross_aarch64); BUILD_DIR's x86_64 `edgert` builds and
# deploys the engines either way.
# Fails, as any test here does, when a prerequisite is missing (not root, mmdebstrap/qemu missing,
# the build's prefix not /usr): nothing is skipped.
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
board=${3:-qemu-virt-x86_64}
work=$build/system-image-$board
missing() { echo "FAIL: a prerequisite is missing: $*"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }
case $board in
  qemu-virt-x86_64) qemu_system=qemu-system-x86_64 pkg_build=$build slow=1 ;;
  # TCG emulates arm64 several times slower than x86_64 on this x86_64 machine.
  qemu-virt-aarch64) qemu_system=qemu-system-aarch64 pkg_build=${EDGERT_CROSS_BUILD_DIR:-$build/cross-aarch64} slow=3 ;;
  *) fail "no qemu board '$board' (qemu-virt-x86_64 or qemu-virt-aarch64)" ;;
esac
[[ $(id -u) -eq 0 ]] || missing "mkimage needs root"
for tool in mmdebstrap $qemu_system ssh ssh-keygen mke2fs; do command -v $tool >/dev/null || missing "$tool missing"; done
[[ -f $pkg_build/CPackConfig.cmake ]] || fail "$pkg_build is not a build directory (the aarch64 cross build comes from boards.cross_aarch64)"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$pkg_build/CMakeCache.txt")
[[ $prefix == /usr ]] || missing "$pkg_build has CMAKE_INSTALL_PREFIX=$prefix; the image's packages need /usr"

rm -rf "$work" && mkdir -p "$work/debs"
t0=$SECONDS
(cd "$work/debs" && cpack -G DEB --config "$pkg_build/CPackConfig.cmake" -B "$work/debs" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack"; }
/usr/bin/python3 "$source/tests/models/make_demo_model.py" --output "$work/demo.onnx" --input "$work/in.npy" >/dev/null
# The image's engine is signed by the key the board will trust: require_signed (turned on below)
# applies to the engine a pipeline starts on too.
rm -f "$work/system-test.key" "$work/system-test.pub"
"$build/bin/edgert" keygen system-test --dir "$work" >/dev/null
"$build/bin/edgert" build "$work/demo.onnx" --board $board -o "$work/demo.engine" --sign "$work/system-test.key" >/dev/null
ssh-keygen -q -t ed25519 -N '' -f "$work/id" -C edgert-system-test
"$source/toolchain/mkimage" --board $board --debs "$work/debs" --out "$work/image" --engine "$work/demo.engine" \
  --authorized-key "$work/id.pub" --cache "${EDGERT_IMAGE_CACHE:-$build/image-cache}"
echo "image built in $((SECONDS - t0)) s"

port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
t1=$SECONDS
SSH_PORT=$port "$work/image/boot.sh" -snapshot >"$work/console.log" 2>&1 &
qemu_pid=$!
cleanup() { kill "$qemu_pid" 2>/dev/null || true; wait "$qemu_pid" 2>/dev/null || true; }
trap cleanup EXIT
guest() {
  ssh -q -i "$work/id" -p "$port" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5 \
    -o BatchMode=yes root@127.0.0.1 "$@"
}
up=0
for _ in $(seq 1 ${EDGERT_IMAGE_BOOT_TIMEOUT:-$((300 * slow))}); do
  kill -0 "$qemu_pid" 2>/dev/null || { tail -n 40 "$work/console.log"; fail "qemu exited"; }
  if guest true 2>/dev/null; then up=1; break; fi
  sleep 1
done
[[ $up -eq 1 ]] || { tail -n 40 "$work/console.log"; fail "no ssh login within the timeout"; }
echo "ssh login after $((SECONDS - t1)) s"

state=""
for _ in $(seq 1 $((120 * slow))); do
  state=$(guest systemctl is-active edgertd || true)
  [[ $state == active || $state == failed ]] && break
  sleep 1
done
echo "edgertd: $state ($((SECONDS - t1)) s after boot)"
if [[ $state != active ]]; then
  guest systemctl status edgertd --no-pager || true
  guest journalctl -b -u edgertd --no-pager | tail -n 30 || true
  fail "edgertd is $state"
fi
status=$(guest edgertctl status) || fail "edgertctl status"
head -n 5 <<<"$status"
# The zram swap is a boot job of its own (systemd-zram-generator's units), which can finish after
# edgertd is active on a loaded host: the checks below wait for the boot's jobs to be done.
boot_state=$(guest "timeout $((120 * slow)) systemctl is-system-running --wait") || true
echo "boot: ${boot_state:-still starting after $((120 * slow)) s}"
swaps=$(guest cat /proc/swaps)
echo "$swaps"
[[ $swaps == *zram0* ]] || fail "no zram swap (profile: 256 MiB)"
[[ $(guest sysctl -n vm.swappiness) == 100 ]] || fail "vm.swappiness is not the profile's 100"
run_dir=$(guest "stat -c '%G %a' /run/edgert")
[[ $run_dir == "edgert 750" ]] || fail "/run/edgert: group and mode are '$run_dir', want 'edgert 750'"
# The unit's sandbox: its own user, no capabilities.
creds=$(guest "cat /proc/\$(systemctl show -p MainPID --value edgertd)/status" | awk '$1 == "Uid:" || $1 == "CapEff:" {printf "%s ", $2}')
[[ $creds == "$(guest id -u edgert) 0000000000000000 " ]] || fail "edgertd runs with uid and effective capabilities '$creds', want user edgert's and none"
[[ $(guest "sshd -T" | awk '$1 == "passwordauthentication" {print $2}') == no ]] || fail "sshd drop-in not in effect"
guest "dpkg-query -W -f='\${Package} \${Version} \${Architecture}\n' edgert edgertd edgert-plugin-cpu"
# The Python package, installed by apt into this fresh root filesystem with what it depends on,
# loads the engine the image runs.
if ls "$work/debs"/python3-edgert_*.deb >/dev/null 2>&1; then
  inputs=$(guest "python3 -c 'import edgert; print([i[\"name\"] for i in edgert.Engine(\"/var/lib/edgert/engines/default.engine\").inputs])'") ||
    fail "python3 cannot import edgert or load the engine in the image"
  echo "python3-edgert in the image: the engine's inputs $inputs"
fi
[[ $(guest dpkg --print-architecture) == $(guest "dpkg-query -W -f='\${Architecture}' edgertd") ]] || fail "edgertd's architecture is not the image's"
# The overlay's udev rules: a camera (vivid, in the image's kernel) belongs to group edgert.
video=$(guest "modprobe vivid n_devs=1 && udevadm settle && stat -c '%G %a' /dev/video0") || fail "vivid did not load"
[[ $video == "edgert 660" ]] || fail "/dev/video0: group and mode are '$video', want 'edgert 660'"
echo "/dev/video0: $video"

# The camera into the model: the pipeline's source becomes vivid (YUYV 640x480, its default).
# Results must carry the engine's sha256 and the frame counters must grow.
sha_a=$(sha256sum "$work/demo.engine" | cut -d' ' -f1)
guest "sed -i 's|^\( *\)type: test-pattern.*|\1type: v4l2\n\1device: /dev/video0|' /etc/edgert/edgertd.yaml && systemctl restart edgertd" ||
  fail "switching edgertd to /dev/video0"
stats() { guest edgertctl --json stats main | /usr/bin/python3 -c "import json, sys; s = json.load(sys.stdin)[0]; print($1)"; }
await() {  # await SECONDS PYTHON-CONDITION-ON-s: polls edgertctl stats main
  local deadline=$((SECONDS + $1)) r=""
  while [[ $SECONDS -lt $deadline ]]; do
    r=$(stats "$2" 2>/dev/null || true)
    [[ $r == True ]] && return 0
    sleep 1
  done
  return 1
}
await $((60 * slow)) "'v4l2' in json.dumps(s['source']) and s['processed'] >= 5 and s['engine'] == '$sha_a'" || {
  guest edgertctl stats main || true; guest journalctl -b -u edgertd --no-pager | tail -n 20 || true
  fail "no frames from /dev/video0 through engine ${sha_a:0:12} within $((60 * slow)) s"
}
before=$(stats "s['processed']")
sleep 3
after=$(stats "s['processed']")
[[ $after -gt $before ]] || fail "frames stopped: processed $before -> $after in 3 s"
echo "camera -> model: $(stats "'%s, %s frames in, %s processed, %.1f fps' % (s['source'], s['frames_in'], s['processed'], s['fps'])")"
results=$(guest "timeout $((10 * slow)) edgertctl results /run/edgert/results.sock | head -n 3") || true
echo "$results" | head -n 1
[[ $(grep -c "\"engine\":\"$sha_a\"" <<<"$results") -eq 3 ]] || fail "3 results of engine ${sha_a:0:12} on /run/edgert/results.sock, got: $results"

# Hot swap from this machine: edgert deploy over the forwarded ssh port, of an engine signed by
# a key the board trusts (require_signed), while the camera streams.
/usr/bin/python3 "$source/tests/models/make_demo_model.py" --output "$work/b.onnx" --input "$work/b.npy" --seed 7 >/dev/null
"$build/bin/edgert" build "$work/b.onnx" --board $board -o "$work/b.engine" --sign "$work/system-test.key" >/dev/null
"$build/bin/edgert" build "$work/b.onnx" --board $board -o "$work/b-unsigned.engine" >/dev/null
sha_b=$(sha256sum "$work/b.engine" | cut -d' ' -f1)
guest "mkdir -p /etc/edgert/trusted-keys.d && cat > /etc/edgert/trusted-keys.d/system-test.pub" <"$work/system-test.pub"
guest "sed -i 's|^board: .*|&\nrequire_signed: true|' /etc/edgert/edgertd.yaml && systemctl restart edgertd"
await $((60 * slow)) "s['processed'] >= 3" || fail "edgertd did not come back with require_signed: true"
deploy=("$build/bin/edgert" deploy --host root@127.0.0.1 -p "$port" -i "$work/id" -o StrictHostKeyChecking=no
        -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR --pipeline main)
refused=$("${deploy[@]}" "$work/b-unsigned.engine" 2>&1) && fail "an unsigned engine was deployed with require_signed: true: $refused"
[[ $refused == *"not signed and require_signed is true"* ]] || fail "the unsigned engine was refused, but not for its signature: $refused"
echo "unsigned engine refused: $(grep -m1 "not signed" <<<"$refused")"
t2=$SECONDS
out=$("${deploy[@]}" "$work/b.engine" 2>&1) || { echo "$out"; fail "edgert deploy"; }
[[ $out == *"[2/5] copying"*"runs engine $sha_b"* ]] || { echo "$out"; fail "edgert deploy did not report engine $sha_b running"; }
await $((60 * slow)) "s['engine'] == '$sha_b' and s['processed'] > 0" || fail "pipeline main does not run engine ${sha_b:0:12} after the deploy"
results=$(guest "timeout $((10 * slow)) edgertctl results /run/edgert/results.sock | head -n 3") || true
[[ $(grep -c "\"engine\":\"$sha_b\"" <<<"$results") -eq 3 ]] || fail "camera results do not come from engine ${sha_b:0:12}: $results"
echo "edgert deploy over ssh: pipeline main runs ${sha_b:0:12} (signed by system-test) $((SECONDS - t2)) s after the deploy began"
guest edgertctl engines | grep -q "system-test" || fail "edgertctl engines does not show the signer"

# Tactics timed on the board: edgert tune over the forwarded port runs the board's own edgert,
# and a build here for the board's profile takes its records. For qemu-virt-x86_64 this machine
# could time them itself (it runs the board's engines): the records still come first.
tune=("$build/bin/edgert" tune --host root@127.0.0.1 -p "$port" -i "$work/id" -o StrictHostKeyChecking=no
      -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)
t4=$SECONDS
out=$("${tune[@]}" "$work/b.onnx" --board $board --timing-cache "$work/board.timing" --board-engine "$work/b-board.engine" 2>&1) ||
  { echo "$out"; fail "edgert tune --host root@127.0.0.1 -p $port"; }
grep -E '^\[[1-4]/4\]' <<<"$out"
[[ $out == *"[4/4] merged "*" record(s) from root@127.0.0.1"* ]] || { echo "$out"; fail "edgert tune merged no records"; }
built=$("$build/bin/edgert" build "$work/b.onnx" --board $board --timing-cache "$work/board.timing" -o "$work/b-here.engine" 2>&1) ||
  { echo "$built"; fail "the build here with the board's timing cache"; }
summary=$(grep '^tactics:' <<<"$built") || fail "no tactics line in: $built"
echo "build here: $summary"
[[ $summary == *" 0 misses; 0 timed"* ]] || fail "the build here timed tactics or missed records: $summary"
"$build/bin/edgert" inspect --json "$work/b-board.engine" >"$work/b-board.json"
"$build/bin/edgert" inspect --json "$work/b-here.engine" >"$work/b-here.json"
/usr/bin/python3 - "$work/b-board.json" "$work/b-here.json" <<'EOF' || fail "the engine built here does not carry the board's tactics"
import json, sys
board, here = ([(n["name"], n["tactic"], n["tactic_name"]) for g in json.load(open(p))["graphs"] for n in g["nodes"]]
               for p in sys.argv[1:3])
for (name, t, tn), (_, th, thn) in zip(board, here):
    print("  %-32s board %-40s here %s" % (name, "%s (%s)" % (tn, t), "%s (%s)" % (thn, th)))
sys.exit(0 if board == here and board else 1)
EOF
echo "edgert tune: the board's tactics in the engine built here, 0 timed here ($((SECONDS - t4)) s)"

# systemd supervises: kill -9 brings a new main process, active again, on the deployed engine.
pid=$(guest systemctl show -p MainPID --value edgertd)
guest kill -9 "$pid"
t3=$SECONDS new=""
while [[ $((SECONDS - t3)) -lt $((60 * slow)) ]]; do
  new=$(guest "systemctl is-active edgertd >/dev/null && systemctl show -p MainPID --value edgertd" || true)
  [[ -n $new && $new != 0 && $new != "$pid" ]] && break
  sleep 1
done
[[ -n $new && $new != 0 && $new != "$pid" ]] || fail "edgertd was not restarted after kill -9 of $pid within $((60 * slow)) s"
restarts=$(guest systemctl show -p NRestarts --value edgertd)
[[ $restarts -ge 1 ]] || fail "NRestarts is $restarts after kill -9"
await $((60 * slow)) "s['engine'] == '$sha_b' and s['processed'] > 0" || fail "after the restart, pipeline main does not run the deployed engine ${sha_b:0:12}"
echo "kill -9 $pid: systemd restarted edgertd as $new (NRestarts $restarts) in $((SECONDS - t3)) s, on engine ${sha_b:0:12}"

# The unit's memory limit is the profile's budget (board-overlay's drop-in) and the cgroup has it.
budget=$((256 << 20))
max=$(guest systemctl show -p MemoryMax --value edgertd)
cgroup=$(guest systemctl show -p ControlGroup --value edgertd)
cg_max=$(guest cat "/sys/fs/cgroup$cgroup/memory.max")
echo "MemoryMax $max, $cgroup/memory.max $cg_max"
[[ $max == "$budget" && $cg_max == "$budget" ]] || fail "edgertd's memory limit: MemoryMax $max, memory.max $cg_max; want $budget (profile's edgertd_budget_mb 256)"
[[ $(guest edgertctl --json status | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["memory"]["budget_bytes"])') == "$budget" ]] ||
  fail "edgertd does not plan against its 256 MiB budget"
zram_kib=$(guest "awk '\$1 == \"/dev/zram0\" {print \$3}' /proc/swaps")
# /proc/swaps counts the usable pages: the swap header takes one.
[[ $zram_kib -gt $((255 * 1024)) && $zram_kib -le $((256 * 1024)) ]] || fail "zram0 has $zram_kib KiB, not the profile's 256 MiB"

guest systemctl poweroff || true
for _ in $(seq 1 60); do kill -0 "$qemu_pid" 2>/dev/null || break; sleep 1; done
echo "system test passed in $((SECONDS - t0)) s"
