#!/usr/bin/env bash
# Runs a command on this working tree inside a Debian root of another release, as root:
#   bash scripts/in-debian.sh trixie bash scripts/test.sh
# The root is made once from Debian's own packages (mmdebstrap --variant=minbase, about a
# minute) under $ATTRCHECK_ROOTS (default /var/tmp/attrcheck-roots), then reused: what the command
# installs stays there. The working tree (tracked and untracked files, not the ignored ones) is
# copied to /src in the root on every run; its build directories there are kept, so builds are
# incremental. The command runs in a private mount namespace with /proc, /sys, /dev, /dev/pts
# and /dev/shm bound in, so nothing stays mounted when it ends, however it ends. Its environment
# is clean but for CI and the ATTRCHECK_* variables (ATTRCHECK_DEBIAN excepted).
# SUITE is any suite the archive serves (bookworm, trixie, sid, forky ...).
# ATTRCHECK_IGNORE_VALID_UNTIL=1: apt in the root does not check the Release file's Valid-Until
# date, for an archive that serves a frozen snapshot (a mirror of sid taken some time ago); it is
# never skipped otherwise, and the root made with it says so on every run.
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:?usage: in-debian.sh SUITE COMMAND...}
shift
[ $# -gt 0 ] || { echo "in-debian: no command" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "in-debian: must run as root (chroot, mounts)" >&2; exit 1; }

roots=${ATTRCHECK_ROOTS:-/var/tmp/attrcheck-roots}
root=$roots/$suite
if [ ! -e "$root/.attrcheck-root" ]; then
  if ! command -v mmdebstrap >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap
  fi
  echo "in-debian: making a Debian $suite root in $root" >&2
  rm -rf "$root"
  mkdir -p "$roots"
  aptopts=()
  if [ "${ATTRCHECK_IGNORE_VALID_UNTIL:-0}" = 1 ]; then
    aptopts=(--aptopt='Acquire::Check-Valid-Until "false"')
  fi
  rc=0
  mmdebstrap --variant=minbase --include=ca-certificates "${aptopts[@]}" "$suite" "$root" || rc=$?
  if [ $rc -ne 0 ]; then
    echo "in-debian: mmdebstrap failed (exit $rc)" >&2
    # 25: apt could not read the archive's lists, e.g. a Release file past its Valid-Until date.
    [ $rc -eq 25 ] && [ ${#aptopts[@]} -eq 0 ] &&
      echo "in-debian: if the archive serves a frozen snapshot, ATTRCHECK_IGNORE_VALID_UNTIL=1 skips apt's Valid-Until check" >&2
    rm -rf "$root"
    exit $rc
  fi
  touch "$root/.attrcheck-root"
fi
if grep -qs 'Check-Valid-Until "false"' "$root"/etc/apt/apt.conf.d/*; then
  echo "in-debian: the $suite root's apt does not check the archive's Valid-Until date (made with ATTRCHECK_IGNORE_VALID_UNTIL=1)" >&2
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# The working tree, as git sees it; the root's build directories stay.
mkdir -p "$root/src"
find "$root/src" -mindepth 1 -maxdepth 1 ! -name 'build*' -exec rm -rf {} +
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$root/src"

env_args=(HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
          TERM="${TERM:-dumb}")
while IFS='=' read -r name _; do
  case $name in
    CI | ATTRCHECK_*) [ "$name" = ATTRCHECK_DEBIAN ] || env_args+=("$name=${!name}") ;;
  esac
done < <(env)

command=$(printf '%q ' "$@")
exec unshare --mount --propagation private bash -c '
  set -e
  root=$1; shift
  for d in proc sys dev; do mount --rbind "/$d" "$root/$d"; done
  mount --bind /dev/shm "$root/dev/shm"
  exec chroot "$root" env -i "$@"
' in-debian "$root" "${env_args[@]}" bash -c "cd /src && $command"
