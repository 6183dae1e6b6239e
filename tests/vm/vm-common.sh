# Sourced by run-in-vm and build-gpio-sim: where the cache lives and which Debian kernel to use.
# Everything comes from Debian's apt archive with `apt-get download` (no root, nothing
# installed on the host); packages are extracted with dpkg-deb -x under the cache.
#
# EDGERT_VM_CACHE       cache root (default: <repo>/build/vm-cache)
# EDGERT_VM_KERNEL_PKG  pin the kernel package, e.g. linux-image-6.1.0-56-amd64 (default: what
#                       linux-image-amd64 depends on in the local apt lists, or, offline, the
#                       newest kernel already in the cache)

VM_REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VM_CACHE=${EDGERT_VM_CACHE:-$VM_REPO_ROOT/build/vm-cache}
mkdir -p "$VM_CACHE" && VM_CACHE=$(cd "$VM_CACHE" && pwd)  # kbuild and qemu need absolute paths

vm_log() { echo "${0##*/}: $*" >&2; }
vm_die() { vm_log "$*"; exit "${VM_DIE_STATUS:-125}"; }

# Serialises cache updates between concurrent runs (ctest -j).
vm_lock() {
  mkdir -p "$VM_CACHE"
  exec 9>"$VM_CACHE/.lock"
  flock 9
}
vm_unlock() { flock -u 9; }

# Sets VM_KPKG (linux-image-6.1.0-56-amd64), VM_KREL (6.1.0-56-amd64) and VM_KVER (6.1.192-2).
vm_resolve_kernel() {
  local arch=$1 flavour
  case $arch in
    x86_64) flavour=amd64 ;;
    *) vm_die "unsupported arch '$arch' (x86_64 only for now)" ;;
  esac
  VM_KPKG=${EDGERT_VM_KERNEL_PKG:-}
  if [[ -z $VM_KPKG ]]; then
    VM_KPKG=$(apt-cache depends "linux-image-$flavour" 2>/dev/null |
              awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
  fi
  if [[ -n $VM_KPKG ]]; then
    VM_KVER=$(apt-cache show --no-all-versions "$VM_KPKG" 2>/dev/null | awk '/^Version:/ { print $2; exit }')
  fi
  if [[ -z $VM_KPKG || -z $VM_KVER ]]; then
    # No apt lists (offline rerun): use what the cache already holds.
    local done_file
    done_file=$(ls -1d "$VM_CACHE"/kernel/*-"$flavour"/.done 2>/dev/null | sort -V | tail -n 1)
    [[ -n $done_file ]] || vm_die "cannot resolve linux-image-$flavour: run 'apt-get update' (Debian bookworm sources)"
    VM_KREL=$(basename "$(dirname "$done_file")")
    VM_KPKG=linux-image-$VM_KREL
    VM_KVER=$(cat "$VM_CACHE/kernel/$VM_KREL/.version")
    return
  fi
  VM_KREL=${VM_KPKG#linux-image-}
}

# vm_fetch_deb PACKAGE VERSION -> prints the .deb path (downloads once into $VM_CACHE/debs).
vm_fetch_deb() {
  local pkg=$1 ver=$2 dir=$VM_CACHE/debs deb
  mkdir -p "$dir"
  deb=$(ls -1 "$dir/${pkg}_${ver//:/%3a}_"*.deb 2>/dev/null | head -n 1)
  if [[ -z $deb ]]; then
    vm_log "downloading $pkg=$ver"
    (cd "$dir" && apt-get download -qq "$pkg=$ver" >&2) || vm_die "apt-get download $pkg=$ver failed"
    deb=$(ls -1 "$dir/${pkg}_${ver//:/%3a}_"*.deb | head -n 1)
  fi
  echo "$deb"
}

# Modules a guest may load; the cache keeps only these and their dependencies (the full tree is
# 400 MB). Adding one here needs a cache wipe (rm -rf $VM_CACHE/kernel).
VM_CACHED_MODULES="vivid vgem configfs"

# vm_module_closure MODULE... -> the module paths (relative to lib/modules/$VM_KREL) of the
# modules and everything they depend on, from $VM_KDIR's modules.dep.
vm_module_closure() {
  awk -v want="$*" '
    BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) need[w[i]] = 1 }
    { sub(":", "", $1); name = $1; sub(".*/", "", name); sub("\\.ko$", "", name); gsub("-", "_", name)
      path[name] = $1; deps[name] = ""; for (i = 2; i <= NF; i++) deps[name] = deps[name] " " $i }
    END {
      for (m in need) stack[++sp] = m
      while (sp > 0) {
        m = stack[sp--]; gsub("-", "_", m); if (m in seen) continue; seen[m] = 1
        if (!(m in path)) { print "no module " m > "/dev/stderr"; exit 1 }
        print path[m]
        k = split(deps[m], d, " ")
        for (i = 1; i <= k; i++) { x = d[i]; sub(".*/", "", x); sub("\\.ko$", "", x); stack[++sp] = x }
      }
    }' "${VM_KDIR:-${1:?}}/lib/modules/$VM_KREL/modules.dep"
}

# Extracts vmlinuz and the full module tree of $VM_KPKG into $VM_CACHE/kernel/$VM_KREL (once)
# and runs depmod there: Debian's package ships no modules.dep.
vm_kernel_tree() {
  VM_KDIR=$VM_CACHE/kernel/$VM_KREL
  [[ -f $VM_KDIR/.done ]] && return
  local deb tmp
  deb=$(vm_fetch_deb "$VM_KPKG" "$VM_KVER")
  tmp=$VM_KDIR.tmp
  rm -rf "$tmp" && mkdir -p "$tmp"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" "./boot/vmlinuz-$VM_KREL" "./lib/modules/$VM_KREL" ||
    vm_die "extracting $deb failed"
  busybox depmod -b "$tmp" "$VM_KREL" || vm_die "depmod failed"
  local keep
  keep=$(VM_KDIR=$tmp vm_module_closure $VM_CACHED_MODULES) || vm_die "module closure failed"
  (cd "$tmp/lib/modules/$VM_KREL" && find kernel -name '*.ko' | grep -vxF "$keep" | xargs rm -f)
  echo "$VM_KVER" >"$tmp/.version"
  touch "$tmp/.done"
  rm -rf "$VM_KDIR" && mv "$tmp" "$VM_KDIR"
  rm -f "$deb"  # extracted for good; a cache wipe downloads it again
}
