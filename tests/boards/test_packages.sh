#!/usr/bin/env bash
# The Debian packages cpack makes from BUILD_DIR: edgert (runtime + CLI + profiles), edgertd
# (daemon, unit, conffile, sysusers/tmpfiles/udev), one edgert-plugin-<name> per plugin,
# libedgert-builder0 and libedgert-builder-dev, and python3-edgert (not from a cross build). Checks
# names, contents and control fields, then extracts all of them into a scratch root and builds
# and runs an engine with the extracted files only. BUILD_DIR may be the aarch64 cross build
# (tests/boards/test_cross_aarch64.sh): arm64 packages, their programs run under qemu-aarch64-static.
#
# usage: test_packages.sh BUILD_DIR SOURCE_DIR     (exit 77: the build's prefix is not /usr)
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
work=$build/packaging-work
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
[[ $prefix == /usr ]] || { echo "FAIL: $build is configured with CMAKE_INSTALL_PREFIX=$prefix; packages need /usr"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

rm -rf "$work" && mkdir -p "$work/root"
start=$SECONDS
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work" >cpack.log 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
echo "cpack: $((SECONDS - start)) s"
arch=$(sed -n 's/^set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")
arch=${arch:-$(dpkg --print-architecture)}
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
packages=(edgert edgertd edgert-plugin-cpu libedgert-builder0 libedgert-builder-dev)
# The Python package and the GStreamer element: built where the build machine's Python and
# GStreamer are the target's (not a cross build).
[[ $arch == "$(dpkg --print-architecture)" ]] && packages+=(python3-edgert gstreamer1.0-edgert)
for pkg in "${packages[@]}"; do
  deb=$work/${pkg}_${version}_$arch.deb
  [[ -f $deb ]] || fail "$deb missing (made: $(cd "$work" && ls ./*.deb))"
  echo "== $pkg: $(dpkg-deb -f "$deb" Package Version Architecture Depends | tr '\n' ' ')"
  dpkg-deb -c "$deb" | awk '{print $6}' | grep -v '/$' >"$work/$pkg.files"
  dpkg-deb -x "$deb" "$work/root"
done
has() { grep -qx "./$2" "$work/$1.files" || fail "$1 lacks /$2"; }
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
has edgert usr/bin/edgert
has edgert "usr/$libdir/libedgert.so.$version"
has edgert usr/include/edgert/edgert.h
for p in "$source"/board_profiles/*.yaml; do has edgert "usr/share/edgert/board_profiles/${p##*/}"; done
has edgert usr/share/edgert/ort_reference.js
has edgertd usr/bin/edgertd
has edgertd usr/bin/edgertctl
has edgertd usr/lib/systemd/system/edgertd.service
has edgertd etc/edgert/edgertd.yaml
has edgertd usr/lib/sysusers.d/edgert.conf
has edgertd usr/lib/tmpfiles.d/edgert.conf
has edgertd usr/lib/udev/rules.d/60-edgert.rules
has edgert-plugin-cpu "usr/$libdir/edgert/plugins/libedgert_plugin_cpu.so"
has libedgert-builder0 "usr/$libdir/libedgert-builder.so.$version"
has libedgert-builder-dev usr/include/edgert/builder.h
has libedgert-builder-dev usr/include/edgert/builder.hpp
has libedgert-builder-dev "usr/$libdir/libedgert-builder.so"
grep -q "libedgert-builder.so" "$work/edgert.files" && fail "the builder library inside package edgert"
grep -qF "libedgert-builder0 (= $version)" <<<"$(dpkg-deb -f "$work/edgert_${version}_$arch.deb" Depends)" ||
  fail "edgert (its edgert build) does not depend on libedgert-builder0"
if [[ " ${packages[*]} " == *" python3-edgert "* ]]; then
  has python3-edgert usr/lib/python3/dist-packages/edgert/__init__.py
  grep -q "^./usr/lib/python3/dist-packages/edgert/_edgert.cpython-.*\.so$" "$work/python3-edgert.files" ||
    fail "python3-edgert lacks the _edgert module"
fi
grep -q edgert/plugins "$work/edgert.files" "$work/edgertd.files" && fail "a plugin outside its own package"
# Outputs are read whole before grep looks at them: `producer | grep -q` under pipefail fails
# whenever grep's early exit kills the producer with SIGPIPE (it did, for a postinst present).
control=$(dpkg-deb --ctrl-tarfile "$work/edgertd_${version}_$arch.deb" | tar -t)
conffiles=$(dpkg-deb --ctrl-tarfile "$work/edgertd_${version}_$arch.deb" | tar -xO ./conffiles)
edgertd_depends=$(dpkg-deb -f "$work/edgertd_${version}_$arch.deb" Depends)
plugin_depends=$(dpkg-deb -f "$work/edgert-plugin-cpu_${version}_$arch.deb" Depends)
grep -qx /etc/edgert/edgertd.yaml <<<"$conffiles" || fail "edgertd.yaml is not a conffile"
grep -q postinst <<<"$control" || fail "edgertd has no postinst"
grep -qF "edgert (= $version)" <<<"$edgertd_depends" || fail "edgertd does not depend on edgert"
grep -qF "edgert (= $version)" <<<"$plugin_depends" || fail "edgert-plugin-cpu does not depend on edgert"

for pkg in edgert edgertd edgert-plugin-cpu libedgert-builder0; do
  [[ $(dpkg-deb -f "$work/${pkg}_${version}_$arch.deb" Depends) == *libc6* ]] || fail "$pkg: no shared library Depends (dpkg-shlibdeps)"
done
grep -q libsystemd0 <<<"$edgertd_depends" || fail "edgertd does not depend on libsystemd0"

# The extracted files alone build and run an engine.
r=$work/root
/usr/bin/python3 "$source/tests/models/make_demo_model.py" --output "$work/demo.onnx" --input "$work/input.npy" >/dev/null
env=(LD_LIBRARY_PATH="$r/usr/$libdir" EDGERT_BOARD_PROFILES="$r/usr/share/edgert/board_profiles"
     EDGERT_PLUGIN_PATH="$r/usr/$libdir/edgert/plugins")
case $arch in
  amd64) board=x86_64-generic run=(env "${env[@]}") ;;
  arm64) board=qemu-virt-aarch64 run=(qemu-aarch64-static -L /usr/aarch64-linux-gnu) && for e in "${env[@]}"; do run+=(-E "$e"); done ;;
  *) fail "no way to run $arch programs here" ;;
esac
"${run[@]}" "$r/usr/bin/edgert" build "$work/demo.onnx" --board $board -o "$work/demo.engine" >/dev/null
"${run[@]}" "$r/usr/bin/edgert" run "$work/demo.engine" --board $board --plugin-path "$r/usr/$libdir/edgert/plugins" \
  --input "input=$work/input.npy" --output-dir "$work/out" | tail -n 3
# edgert compare finds ONNX Runtime's runner where the package put it (onnxruntime-node from the
# source tree's node_modules, as README's setup installs it).
if [[ $arch == amd64 ]]; then
  compared=$(NODE_PATH="$source/node_modules" "${run[@]}" "$r/usr/bin/edgert" compare "$work/demo.onnx" "$work/demo.engine" \
             --board $board --plugin-path "$r/usr/$libdir/edgert/plugins" 2>&1) || fail "edgert compare from the package: $compared"
  grep -q "^PASS" <<<"$compared" || fail "edgert compare from the package: $compared"
fi
# The Python package from the extracted files: it builds through the packaged libedgert-builder
# the engine the packaged CLI built, and runs it. (The image test installs it with apt into a fresh
# root filesystem: tests/system/test_image_boot.sh.)
if [[ " ${packages[*]} " == *" python3-edgert "* ]]; then
  env "${env[@]}" PYTHONPATH="$r/usr/lib/python3/dist-packages" /usr/bin/python3 - "$work" "$board" <<'PY' || fail "python3-edgert from the package"
import sys, numpy as np, edgert
work, board = sys.argv[1], sys.argv[2]
assert edgert.__file__.startswith(work), edgert.__file__
built = edgert.build(work + "/demo.onnx", board=board)
engine = built.load()
out = engine.context().run({engine.inputs[0]["name"]: np.load(work + "/input.npy")})
print("python3-edgert: built %d bytes for %s, outputs %s" % (len(built.data), board, {k: v.shape for k, v in out.items()}))
PY
fi
# GStreamer finds the packaged element and reads its description.
if [[ " ${packages[*]} " == *" gstreamer1.0-edgert "* ]]; then
  element=$(env "${env[@]}" GST_PLUGIN_PATH="$r/usr/$libdir/gstreamer-1.0" GST_REGISTRY="$work/gst-registry.bin" \
            gst-inspect-1.0 edgertinfer 2>&1) || fail "gst-inspect-1.0 edgertinfer from the package: $element"
  grep -q "engine" <<<"$element" || fail "gst-inspect-1.0 edgertinfer shows no engine property: $element"
  echo "gstreamer1.0-edgert: gst-inspect-1.0 finds edgertinfer"
fi
echo "$arch packages OK"
