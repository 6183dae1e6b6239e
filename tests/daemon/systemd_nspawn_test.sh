#!/usr/bin/env bash
# Rates the shipped unit with systemd-analyze security, then boots real systemd (systemd-nspawn, this machine's own /usr, a throwaway /etc) with the
# shipped edgertd.service (paths pointed at the build tree) and checks, inside it:
# READY=1 -> active, STATUS=, SIGHUP reload applying a config change, a clean stop, the
# watchdog killing and systemd restarting a hung loop, and a broken config refused with
# file:line:column and no restart loop.
# Usage: systemd_nspawn_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
# The unit runs with PrivateTmp=yes, which hides /tmp and /var/tmp from it, and the build tree
# may live there (CI's clone might): stage what the service runs under /var/lib instead.
work="$(mktemp -d -p /var/lib edgert-nspawn-XXXXXX)"
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
# The service runs as user edgert: it must be able to read what is staged here.
chmod 0755 "$work"
mkdir -p "$work/etc" "$work/results" "$work/units" "$work/bin" "$work/lib/edgert/plugins"
cp "$build/bin/edgertd" "$build/bin/edgertctl" "$work/bin/"
cp -P "$build"/lib/libedgert.so* "$work/lib/"
cp "$build"/lib/edgert/plugins/*.so "$work/lib/edgert/plugins/"
cp -r "$source_dir/board_profiles" "$work/board_profiles"
edgert_cli="$build/bin/edgert"
build="$work"  # from here on the service and the checks use the staged copy

# An engine from the demo model, built like a user would.
/usr/bin/python3 "$source_dir/tests/models/make_demo_model.py" --output "$work/demo.onnx" --input "$work/demo.npy" >/dev/null
"$edgert_cli" build "$work/demo.onnx" --board x86_64-generic -o "$work/demo.engine" >/dev/null

config() {  # NAME EXTRA_PIPELINE
  cat <<YAML
board: x86_64-generic
control_socket: /run/edgert/control.sock
state_dir: /var/lib/edgert
pipelines:
  - name: main
    source: {type: test-pattern, width: 640, height: 480, fps: 30, format: yuyv}
    preprocess: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
    engine: $work/demo.engine
    postprocess: {type: classification, top_k: 3}
$1
YAML
}
config "" > "$work/etc/edgertd.yaml"
config "  - name: second
    source: {type: test-pattern, width: 320, height: 240, fps: 15, format: nv12}
    engine: $work/demo.engine
    postprocess: {type: classification}" > "$work/etc/edgertd.reloaded.yaml"
printf 'board: x86_64-generic\npipelines:\n  - name: main\n    source: {type: test-pattern}\n    engine: %s\n    postprocess: {type: classification}\n    frobnicate: 3\n' \
  "$work/demo.engine" > "$work/etc/broken.yaml"

# The shipped unit's sandbox, as systemd rates it: at most 2.0 ("OK"; lower is safer).
exposure=$(systemd-analyze security --offline=true --no-pager "$source_dir/services/edgertd.service" |
  awk '/Overall exposure level/ {print $(NF-2)}')
echo "systemd-analyze security --offline=true services/edgertd.service: exposure ${exposure:-?}"
awk -v e="$exposure" 'BEGIN {exit !(e != "" && e + 0 <= 2.0)}' || { echo "FAIL: exposure ${exposure:-?} is above 2.0"; exit 1; }

# The shipped unit, pointed at the build tree; hardening and watchdog kept as shipped.
sed -e "s|/usr/bin/edgertd|$build/bin/edgertd|g" -e "s|/etc/edgert/edgertd.yaml|/etc/edgert-test/edgertd.yaml|g" \
  "$source_dir/services/edgertd.service" > "$work/units/edgertd.service"
# A copy whose main loop hangs after 3 s (debug-only switch), with a short watchdog.
sed -e "s|^WatchdogSec=.*|WatchdogSec=2|" -e "s|^\[Service\]|[Service]\nEnvironment=EDGERTD_DEBUG_HANG_AFTER_SEC=3|" \
  "$work/units/edgertd.service" > "$work/units/edgertd-hang.service"
sed -e "s|/etc/edgert-test/edgertd.yaml|/etc/edgert-test/broken.yaml|g" "$work/units/edgertd.service" > "$work/units/edgertd-broken.service"
sed -i "s|^\[Service\]|[Service]\nEnvironment=PATH=$build/bin:/usr/bin:/bin|" "$work/units/edgertd.service"
# The staged binaries' RPATH still names the build tree; point the loader at the staged libedgert.
for unit in "$work"/units/edgertd*.service; do
  sed -i "s|^\[Service\]|[Service]\nEnvironment=LD_LIBRARY_PATH=$work/lib EDGERT_BOARD_PROFILES=$work/board_profiles|" "$unit"
done
cat > "$work/units/edgert-checks.service" <<UNIT
[Unit]
Description=edgertd checks
After=basic.target
[Service]
Type=oneshot
ExecStart=/bin/bash -c 'exec /bin/bash $source_dir/tests/daemon/nspawn_checks.sh $build $work > /results/checks.log 2>&1'
ExecStartPost=/bin/systemctl --no-block poweroff
UNIT
cat > "$work/units/edgert-test.target" <<UNIT
[Unit]
Description=edgertd system test
Wants=edgert-checks.service
UNIT
cp "$source_dir/rootfs_overlay/usr/lib/sysusers.d/edgert.conf" "$work/edgert.sysusers.conf"

binds=(--bind-ro="$source_dir" --bind-ro="$work" --bind="$work/results:/results"
       --bind-ro="$work/etc:/etc/edgert-test" --bind-ro="$work/edgert.sysusers.conf:/etc/sysusers.d/edgert.conf")
for unit in "$work"/units/*; do binds+=(--bind-ro="$unit:/etc/systemd/system/$(basename "$unit")"); done
start=$(date +%s)
timeout 240 systemd-nspawn -D / --volatile=yes --register=no --keep-unit --quiet "${binds[@]}" \
  -b systemd.unit=edgert-test.target systemd.firstboot=off > "$work/nspawn.log" 2>&1 || true
echo "systemd-nspawn ran $(( $(date +%s) - start )) s"
cat "$work/results/checks.log" 2>/dev/null || { echo "no checks log"; tail -30 "$work/nspawn.log"; exit 1; }
grep -q "^ALL CHECKS PASSED" "$work/results/checks.log"
