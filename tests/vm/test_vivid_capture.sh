#!/bin/bash
# V4L2 capture end to end: boots the VM (run-in-vm) with two vivid instances, the first
# single-planar and the second multi-planar, and runs v4l2_capture_probe through every path of
# make_v4l2_source(): YUYV, NV12 and RGB24 at 640x480 over mmap, DMABUF export, capture into
# the daemon's own memory (USERPTR) on both queue types, triggered
# delivery, all buffers held by a slow consumer, the multi-planar queue, and the two refusals
# (a format vivid does not offer, MJPEG; a size it does not offer). Exit 0 when every case
# passed, 1 otherwise, 77 when qemu or busybox is missing.
#
#   tests/vm/test_vivid_capture.sh build-v4l2/v4l2_capture_probe
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
probe=${1:?usage: test_vivid_capture.sh PATH/TO/v4l2_capture_probe}
[[ -x $probe ]] || { echo "test_vivid_capture: $probe is not executable" >&2; exit 1; }

guest=$(mktemp -d)
trap 'rm -rf "$guest"' EXIT
cat >"$guest/vivid-cases.sh" <<'GUEST'
# Runs inside the VM. One line per case: CASE <name> <probe exit status> <probe JSON>.
node() {  # the capture node of vivid instance $1
  for d in /sys/class/video4linux/video*; do
    [ "$(cat "$d/name")" = "vivid-00$1-vid-cap" ] && { echo "/dev/${d##*/}"; return; }
  done
}
sp=$(node 0) mp=$(node 1)
run() {
  name=$1; shift
  out=$(v4l2_capture_probe "$@" 2>&1); rc=$?
  echo "CASE $name $rc $out"
}
run yuyv         --device "$sp" --format yuyv  --frames 30
run nv12         --device "$sp" --format nv12  --frames 30
run rgb24        --device "$sp" --format rgb24 --frames 30
run yuyv-dmabuf  --device "$sp" --format yuyv  --frames 30 --io dmabuf
run yuyv-userptr --device "$sp" --format yuyv  --frames 30 --io userptr
run nv12-mplane-userptr --device "$mp" --format nv12 --frames 30 --io userptr
run nv12-trigger --device "$sp" --format nv12  --frames 5 --triggered
run yuyv-starved --device "$sp" --format yuyv  --frames 12 --buffers 3 --hold-ms 400 --max-cpu-share 0.5
run nv12-mplane  --device "$mp" --format nv12  --frames 30 --io dmabuf
run mjpeg        --device "$sp" --format mjpeg --frames 30
run bad-size     --device "$sp" --format yuyv  --width 800 --height 600 --frames 1
GUEST

start=$(date +%s)
output=$("$here/run-in-vm" --vivid-params "n_devs=2 multiplanar=1,2" --timeout 300 \
         "$probe" "$guest/vivid-cases.sh" -- sh vivid-cases.sh)
vm_status=$?
echo "$output"
((vm_status == 77)) && exit 77
((vm_status == 0)) || { echo "test_vivid_capture: the VM run failed (status $vm_status)"; exit 1; }

failed=0
field() {  # field NAME LINE: a number from the probe's JSON
  grep -o "\"$1\":[0-9]*" <<<"$2" | head -n 1 | cut -d: -f2
}
# check NAME EXPECTED_STATUS [--frames N | --some-frames N] PATTERN...: the case's JSON must match
# every pattern. --frames N asserts what the driver promises, not an exact count: at least N
# frames (the probe stops at its Nth, but the source may hand over a frame or two it had already
# dequeued before the loop exits), and no frame missing from the sequence numbers that the source
# did not report as a driver gap (last - first + 1 - frames <= driver_gaps). --some-frames N: at
# least N frames only (triggered delivery skips the frames between triggers on purpose).
check() {
  local name=$1 want=$2 line rc frames=0 contiguous=1; shift 2
  if [[ ${1-} == --frames ]]; then frames=$2; shift 2; fi
  if [[ ${1-} == --some-frames ]]; then frames=$2 contiguous=0; shift 2; fi
  line=$(grep -m1 "^CASE $name " <<<"$output") || { echo "FAIL $name: did not run"; failed=1; return; }
  rc=$(cut -d' ' -f3 <<<"$line")
  if [[ $rc != "$want" ]]; then echo "FAIL $name: probe exit $rc, want $want"; failed=1; return; fi
  for pattern; do
    grep -q -- "$pattern" <<<"$line" || { echo "FAIL $name: no match for $pattern"; failed=1; return; }
  done
  if ((frames > 0)); then
    local got first last gaps
    got=$(field frames "$line") first=$(field first_sequence "$line") last=$(field last_sequence "$line")
    gaps=$(field driver_gaps "$line")
    if [[ -z $got || -z $first || -z $last || -z $gaps ]]; then
      echo "FAIL $name: frames, first_sequence, last_sequence or driver_gaps missing"; failed=1; return
    fi
    if ((got < frames)); then echo "FAIL $name: $got frames, want at least $frames"; failed=1; return; fi
    if ((contiguous && last - first + 1 - got > gaps)); then
      echo "FAIL $name: sequences $first..$last hold $((last - first + 1 - got)) missing frame(s), the source reported $gaps"
      failed=1; return
    fi
  fi
  echo "PASS $name"
}
check yuyv         0 --frames 30 '"ok":true' '"strides":\[1280,0\]' '"bytes_used":614400'
check nv12         0 --frames 30 '"ok":true' '"strides":\[640,640\]' '"bytes_used":460800'
check rgb24        0 --frames 30 '"ok":true' '"strides":\[1920,0\]' '"bytes_used":921600'
check yuyv-dmabuf  0 --frames 30 '"ok":true' '"io":"dmabuf"'
# The probe reads every frame's first row (vivid's colour bars, never all zero) and its size:
# the driver wrote into the source's own buffers.
check yuyv-userptr 0 --frames 30 '"ok":true' '"io":"userptr"' '"strides":\[1280,0\]' '"bytes_used":614400'
check nv12-mplane-userptr 0 --frames 30 '"ok":true' '"io":"userptr"' '"strides":\[640,640\]'
check nv12-trigger 0 --some-frames 5 '"ok":true'
# Three buffers held 400 ms each at 25 fps: capture stalls, the driver drops, and the source
# must resume after each release (the starvation wake-up path).
check yuyv-starved 0 --frames 12 '"ok":true' '"driver_gaps":[1-9]'
check nv12-mplane  0 --frames 30 '"ok":true' '"strides":\[640,640\]'
check mjpeg        1 '"ok":false' 'is not offered; the device offers: YUYV, UYVY, .*NV12, .*Y16-BE' 'v4l2 /dev/video'
check bad-size     1 '"ok":false' 'not available (the driver chose' 'sizes offered'
echo "test_vivid_capture: $((failed ? 1 : 0)) ($(( $(date +%s) - start )) s)"
exit "$failed"
