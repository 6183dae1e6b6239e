#!/bin/bash
# gpio-sim in the VM: builds the module (build-gpio-sim, cached), boots with --with-gpio-sim and
# reads line 3 of /dev/gpiochip0 through the GPIO character device while the simulator pulls it
# up, then down. Exit 0 on success, 1 on failure, 77 when qemu, busybox or a C compiler is
# missing.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "test_gpio_sim: no C compiler" >&2; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cc" -O2 -Wall -o "$work/gpio_sim_check" "$here/gpio_sim_check.c" || exit 1
cat >"$work/gpio-cases.sh" <<'GUEST'
sim=/sys/devices/platform/gpio-sim.0/gpiochip0/sim_gpio3
ls -l /dev/gpiochip0 || exit 1
echo pull-up >$sim/pull && gpio_sim_check /dev/gpiochip0 3 || exit 1
echo pull-down >$sim/pull && gpio_sim_check /dev/gpiochip0 3 || exit 1
GUEST
output=$("$here/run-in-vm" --with-gpio-sim --timeout 300 "$work/gpio_sim_check" "$work/gpio-cases.sh" -- sh gpio-cases.sh)
status=$?
echo "$output"
((status == 77)) && exit 77
((status == 0)) || { echo "test_gpio_sim: FAIL (VM status $status)"; exit 1; }
if [[ $(grep -c '^label=edgert-sim lines=8 value=' <<<"$output") == 2 ]] &&
   grep -q 'value=1' <<<"$(grep -m1 '^label=' <<<"$output")" &&
   grep -q 'value=0' <<<"$(grep '^label=' <<<"$output" | tail -n 1)"; then
  echo "test_gpio_sim: PASS"
  exit 0
fi
echo "test_gpio_sim: FAIL (expected value=1 after pull-up, value=0 after pull-down)"
exit 1
