#!/usr/bin/env bash
# Runs inside the systemd-nspawn container started by systemd_nspawn_test.sh, as a oneshot
# unit; prints one line per check and "ALL CHECKS PASSED" at the end when every check held.
# Usage: nspawn_checks.sh BUILD_DIR WORK_DIR
build="$1"
work="$2"
failures=0
check() {  # DESCRIPTION COMMAND...
  local what="$1"
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}
wait_for() {  # SECONDS COMMAND... : polls until the command succeeds
  local deadline=$(( $(date +%s) + $1 ))
  shift
  until "$@"; do
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}
ctl() { LD_LIBRARY_PATH="$build/lib" "$build/bin/edgertctl" "$@"; }
# PID 1 may still be settling when this unit starts; wait until it answers.
wait_for 30 systemctl list-units --quiet >/dev/null 2>&1

check "user and group edgert exist (sysusers)" bash -c "getent passwd edgert && getent group edgert"
systemctl start edgertd.service
check "edgertd reaches active through READY=1" wait_for 20 systemctl is-active --quiet edgertd.service
check "STATUS= reports fps" wait_for 10 bash -c "systemctl show -p StatusText --value edgertd.service | grep -q 'main [0-9.]* fps'"
echo "     status: $(systemctl show -p StatusText --value edgertd.service)"
check "edgertctl status answers over the control socket" bash -c "ctl() { $build/bin/edgertctl \"\$@\"; }; ctl status | grep -q 'main'"
check "results are flowing" wait_for 10 bash -c "$build/bin/edgertctl --json stats main | grep -q '\"processed\": [1-9]'"
check "hardening is in force (ProtectSystem=strict)" bash -c "systemctl show -p ProtectSystem --value edgertd.service | grep -qx strict"
main_pid=$(systemctl show -p MainPID --value edgertd.service)
# No awk here: the container's /etc (volatile) lacks the alternatives link to it.
status_field() {  # FIELD: the first value of a /proc/PID/status line
  local key value rest
  while read -r key value rest; do [ "$key" = "$1:" ] && { echo "$value"; return; }; done < "/proc/$main_pid/status"
}
runs_as_edgert() { [ "$(status_field Uid)" = "$(id -u edgert)" ] && [ "$(status_field Gid)" = "$(getent group edgert | cut -d: -f3)" ]; }
holds_no_capabilities() { [ "$(status_field CapEff)" = 0000000000000000 ] && [ "$(status_field CapBnd)" = 0000000000000000 ]; }
check "edgertd runs as user and group edgert" runs_as_edgert
check "edgertd holds no capabilities (effective and bounding sets empty)" holds_no_capabilities
check "its database is its own and private (UMask=0077)" wait_for 10 bash -c "[ \"\$(stat -c '%U %a' /var/lib/edgert/edgertd.db)\" = 'edgert 600' ]"
check "memory limit is set on the unit (MemoryMax)" bash -c "[ \"\$(systemctl show -p MemoryMax --value edgertd.service)\" = 1073741824 ]"

cp "$work/etc/edgertd.reloaded.yaml" /tmp/reloaded.yaml 2>/dev/null
mount --bind "$work/etc/edgertd.reloaded.yaml" /etc/edgert-test/edgertd.yaml
systemctl reload edgertd.service
check "SIGHUP reload applies a new pipeline" wait_for 10 bash -c "$build/bin/edgertctl pipelines | grep -q '^second'"
check "the service stays active across the reload" systemctl is-active --quiet edgertd.service
check "the journal records RELOADING and the reload" bash -c "journalctl -u edgertd.service --no-pager | grep -q 'reload: 2 pipelines running'"

systemctl stop edgertd.service
check "SIGTERM stops it cleanly (inactive, not failed)" bash -c "[ \"\$(systemctl is-active edgertd.service)\" = inactive ]"

systemctl start edgertd-hang.service
check "a hung main loop is killed by the watchdog and restarted" wait_for 30 bash -c "[ \"\$(systemctl show -p NRestarts --value edgertd-hang.service)\" -ge 1 ]"
check "the journal names the watchdog" bash -c "journalctl -u edgertd-hang.service --no-pager | grep -qi 'watchdog timeout'"
systemctl stop edgertd-hang.service

systemctl start edgertd-broken.service
check "a broken config fails the unit" wait_for 10 bash -c "systemctl is-failed --quiet edgertd-broken.service"
check "the error names file:line:column and the key" bash -c "journalctl -u edgertd-broken.service --no-pager | grep -q \"broken.yaml:7:5: unknown key 'frobnicate'\""
sleep 3
check "no restart loop on a config error (exit 78)" bash -c "[ \"\$(systemctl show -p NRestarts --value edgertd-broken.service)\" = 0 ]"

if [ "$failures" -eq 0 ]; then echo "ALL CHECKS PASSED"; else echo "$failures CHECKS FAILED"; fi
echo "--- journal (edgertd) ---"
journalctl -u edgertd.service -u edgertd-hang.service -u edgertd-broken.service --no-pager | tail -40
