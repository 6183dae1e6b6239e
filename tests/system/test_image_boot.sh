#!/usr/bin/env bash
# System test: the qemu-virt-x86_64 board image (toolchain/mkimage with this build's .deb
# packages and a demo engine) boots under qemu-system-x86_64 (TCG); root logs in with ssh on a
# forwarded port; edgertd is active and answers edgertctl; the profile's zram swap and sysctl are
# in effect; the overlay's group, directories and sshd drop-in are in place.
#
# usage: test_image_boot.sh BUILD_DIR SOURCE_DIR
# Exit 77 (skipped): not root, mmdebstrap/qemu missing, or the build's prefix is not /usr.
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
work=$build/system-image
board=qemu-virt-x86_64
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || skip "mkimage needs root"
for tool in mmdebstrap qemu-system-x86_64 ssh ssh-keygen mke2fs; do command -v $tool >/dev/null || skip "$tool missing"; done
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
[[ $prefix == /usr ]] || skip "$build has CMAKE_INSTALL_PREFIX=$prefix; the image's packages need /usr"

rm -rf "$work" && mkdir -p "$work/debs"
t0=$SECONDS
(cd "$work/debs" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/debs" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack"; }
/usr/bin/python3 "$source/tests/models/make_demo_model.py" --output "$work/demo.onnx" --input "$work/in.npy" >/dev/null
"$build/bin/edgert" build "$work/demo.onnx" --board $board -o "$work/demo.engine" >/dev/null
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
for _ in $(seq 1 ${EDGERT_IMAGE_BOOT_TIMEOUT:-300}); do
  kill -0 "$qemu_pid" 2>/dev/null || { tail -n 40 "$work/console.log"; fail "qemu exited"; }
  if guest true 2>/dev/null; then up=1; break; fi
  sleep 1
done
[[ $up -eq 1 ]] || { tail -n 40 "$work/console.log"; fail "no ssh login within the timeout"; }
echo "ssh login after $((SECONDS - t1)) s"

state=""
for _ in $(seq 1 120); do
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
guest edgertctl status | head -n 5 || fail "edgertctl status"
swaps=$(guest cat /proc/swaps)
echo "$swaps"
[[ $swaps == *zram0* ]] || fail "no zram swap (profile: 256 MiB)"
[[ $(guest sysctl -n vm.swappiness) == 100 ]] || fail "vm.swappiness is not the profile's 100"
run_dir=$(guest "stat -c '%G %a' /run/edgert")
[[ $run_dir == "edgert 750" ]] || fail "/run/edgert: group and mode are '$run_dir', want 'edgert 750'"
[[ $(guest "sshd -T" | awk '$1 == "passwordauthentication" {print $2}') == no ]] || fail "sshd drop-in not in effect"
guest dpkg-query -W edgert edgertd edgert-plugin-cpu
# The overlay's udev rules: a camera (vivid, in the image's kernel) belongs to group edgert.
video=$(guest "modprobe vivid n_devs=1 && udevadm settle && stat -c '%G %a' /dev/video0") || fail "vivid did not load"
[[ $video == "edgert 660" ]] || fail "/dev/video0: group and mode are '$video', want 'edgert 660'"
echo "/dev/video0: $video"
guest systemctl poweroff || true
for _ in $(seq 1 60); do kill -0 "$qemu_pid" 2>/dev/null || break; sleep 1; done
echo "system test passed in $((SECONDS - t0)) s"
