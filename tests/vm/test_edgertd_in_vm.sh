#!/bin/bash
# edgertd end to end on real kernel devices, in the qemu VM: frames from the vivid camera at
# 640x480 in YUYV and NV12 flow through an engine and out of the results socket (read with
# edgertctl results); with gpio-sim, a configured class drives an output line high and a rising
# edge on a trigger line makes a triggered pipeline capture a frame.
# Usage: test_edgertd_in_vm.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 "$source_dir/tests/models/make_demo_model.py" --output "$work/demo.onnx" --input "$work/in.npy" >/dev/null || exit 1
"$build/bin/edgert" build "$work/demo.onnx" --board qemu-virt-x86_64 -o "$work/demo.engine" >/dev/null || exit 1

pipeline() {  # NAME FORMAT EXTRA_SOURCE EXTRA_SINKS
  cat <<YAML
  - name: $1
    source: {type: v4l2, device: /dev/video0, width: 640, height: 480, fps: 25, format: $2$3}
    preprocess: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
    engine: /work/demo.engine
    postprocess: {type: classification, top_k: 1}
    sinks:
      socket: {path: /run/edgert/$1.sock}
$4
YAML
}
for fmt in yuyv nv12; do
  { printf 'board: qemu-virt-x86_64\nmemory_budget_mb: 256\nplugin_path: /work\ncontrol_socket: /run/edgert/control.sock\nstate_dir: /tmp/state\npipelines:\n'
    pipeline "cam_$fmt" "$fmt" "" ""; } > "$work/$fmt.yaml"
done
# The demo model calls nearly every test-pattern frame class 2: that class drives line 1.
{ printf 'board: qemu-virt-x86_64\nmemory_budget_mb: 256\nplugin_path: /work\ncontrol_socket: /run/edgert/control.sock\nstate_dir: /tmp/state\npipelines:\n'
  pipeline gpio yuyv ", trigger: gpio" "      gpio: {chip: /dev/gpiochip0, detect_line: 1, classes: [\"2\"], min_score: 0.1, trigger_line: 2}"; } > "$work/gpio.yaml"

cat > "$work/guest.sh" <<'GUEST'
sim=/sys/devices/platform/gpio-sim.0/gpiochip0
export EDGERT_PLUGIN_PATH=/work
# The guest has the binaries, not the package: the board profile comes in beside them.
export EDGERT_BOARD_PROFILES=/work
mkdir -p /run/edgert /tmp/state
await_socket() {  # PATH: until edgertd listens there (20 s at most)
  for i in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.2; done
  return 1
}
for fmt in yuyv nv12; do
  ./edgertd --config $fmt.yaml 2> edgertd-$fmt.log &
  pid=$!
  await_socket /run/edgert/cam_$fmt.sock
  timeout 3 ./edgertctl results /run/edgert/cam_$fmt.sock > watch-$fmt.txt
  echo "RESULT $fmt lines=$(grep -c '"sequence"' watch-$fmt.txt) copies0=$(grep -c '"frame_copies":0' watch-$fmt.txt) huge_latency=$(grep -c '"latency_us":{[^}]*[0-9]e+' watch-$fmt.txt)"
  ./edgertctl stats cam_$fmt | head -1
  kill $pid; wait $pid
  echo "EXIT $fmt $?"
  cat edgertd-$fmt.log | head -5
done
echo pull-down > $sim/sim_gpio2/pull
./edgertd --config gpio.yaml 2> edgertd-gpio.log &
pid=$!
await_socket /run/edgert/control.sock
sleep 2  # streaming, but no trigger yet: nothing may be processed
echo "RESULT gpio before_trigger=$(./edgertctl --json stats gpio | grep -o '"processed": [0-9]*')"
echo "RESULT gpio detect_before=$(cat $sim/sim_gpio1/value)"
echo pull-up > $sim/sim_gpio2/pull
# Until the triggered frame is processed (10 s at most), then 1 s more: no second frame may follow.
for i in $(seq 50); do
  ./edgertctl --json stats gpio | grep -q '"processed": [1-9]' && break
  sleep 0.2
done
sleep 1
echo "RESULT gpio after_trigger=$(./edgertctl --json stats gpio | grep -o '"processed": [0-9]*')"
echo "RESULT gpio detect_after=$(cat $sim/sim_gpio1/value)"
kill $pid; wait $pid
cat edgertd-gpio.log | head -5
GUEST

files=("$build/bin/edgertd" "$build/bin/edgertctl" "$build/lib/edgert/plugins/libedgert_plugin_cpu.so"
       "$source_dir/board_profiles/qemu-virt-x86_64.yaml" "$work/demo.engine" "$work/yuyv.yaml" "$work/nv12.yaml" "$work/gpio.yaml" "$work/guest.sh")
output=$("$here/run-in-vm" --with-gpio-sim --timeout 400 "${files[@]}" -- sh guest.sh 2>&1)
status=$?
echo "$output" | grep -vE '^\s*$' | tail -40
((status == 0)) || { echo "test_edgertd_in_vm: FAIL (VM status $status)"; exit 1; }
fail=0
for fmt in yuyv nv12; do
  lines=$(sed -n "s/^RESULT $fmt lines=\([0-9]*\).*/\1/p" <<<"$output")
  copies=$(sed -n "s/^RESULT $fmt .*copies0=\([0-9]*\).*/\1/p" <<<"$output")
  if [[ -n "$lines" && "$lines" -ge 20 && "$copies" == "$lines" ]]; then echo "ok   vivid $fmt: $lines results in 3 s, none with an extra frame copy"
  else echo "FAIL vivid $fmt: ${lines:-no} results"; fail=1; fi
  # Latencies count from the driver's timestamp, which vivid sets ahead of the clock: none may
  # come out negative (a wrapped unsigned difference prints as ~1.8e+16 us).
  huge=$(sed -n "s/^RESULT $fmt .*huge_latency=\([0-9]*\).*/\1/p" <<<"$output")
  [[ $huge == 0 ]] || { echo "FAIL vivid $fmt: ${huge:-?} results with a latency of 1e15 us or more"; fail=1; }
  grep -q "^EXIT $fmt 0" <<<"$output" || { echo "FAIL edgertd ($fmt) did not stop cleanly"; fail=1; }
done
before=$(sed -n 's/^RESULT gpio before_trigger="processed": \([0-9]*\)/\1/p' <<<"$output")
after=$(sed -n 's/^RESULT gpio after_trigger="processed": \([0-9]*\)/\1/p' <<<"$output")
if [[ "$before" == 0 && "$after" == 1 ]]; then echo "ok   a rising edge on the trigger line captured exactly one frame"
else echo "FAIL trigger: processed before=$before after=$after (want 0 then 1)"; fail=1; fi
if grep -q '^RESULT gpio detect_before=0' <<<"$output" && grep -q '^RESULT gpio detect_after=1' <<<"$output"; then
  echo "ok   the detect line went high with the detected class"
else echo "FAIL detect line did not follow the detection"; fail=1; fi
((fail == 0)) && echo "test_edgertd_in_vm: PASS" || echo "test_edgertd_in_vm: FAIL"
exit $fail
