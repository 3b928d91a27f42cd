# The sandbox's inside: run by `sh` as the mapped root of a new user namespace, in new mount,
# network and PID namespaces (sage-sandbox, src/sandbox.rs). Builds a root that holds only
# the system's programs (read-only) and the scratch copy of the workspace (the one writable
# place besides a small /tmp), then runs the command there with an empty environment.
#   $1 the empty folder to build the root in   $2 the scratch copy of the workspace
#   $3 where the workspace is mounted (the trace's own path, e.g. /testbed)
#   $4 the working directory   $5 the shell   $6 the command
R=$1 WS=$2 TARGET=$3 WD=$4 SH=$5 CMD=$6
fail() { echo "sage-sandbox: setup failed: $1" >&2; exit 125; }
mount --make-rprivate / 2>/dev/null
mount -t tmpfs -o size=16m,mode=755 sage-root "$R" || fail "tmpfs root"
for d in usr bin sbin lib lib32 lib64 libx32 etc; do
  [ -e "/$d" ] || continue
  if [ -L "/$d" ]; then
    ln -s "$(readlink "/$d")" "$R/$d" || fail "link /$d"
  else
    mkdir -p "$R/$d" && mount --rbind "/$d" "$R/$d" || fail "bind /$d"
    mount -o remount,bind,ro "$R/$d" || fail "read-only /$d"
  fi
done
mkdir -p "$R/dev" "$R/proc" "$R/tmp" "$R$TARGET" || fail "mount points"
for n in null zero full random urandom tty; do
  [ -e "/dev/$n" ] || continue
  touch "$R/dev/$n" && mount --bind "/dev/$n" "$R/dev/$n" || fail "/dev/$n"
done
ln -s /proc/self/fd "$R/dev/fd"
# `python` is Python 3 where the system has no `python` (the agents' images do)
mkdir -p "$R/.sage-bin"
if [ ! -e /usr/bin/python ] && [ -e /usr/bin/python3 ]; then ln -s /usr/bin/python3 "$R/.sage-bin/python"; fi
mount -t tmpfs -o size=64m sage-tmp "$R/tmp" || fail "tmpfs /tmp"
mount --bind "$WS" "$R$TARGET" || fail "bind the workspace at $TARGET"
mount -t proc proc "$R/proc" || fail "proc"
mount -o remount,bind,ro "$R" || fail "read-only root"
cd / || fail "cd /"
exec chroot "$R" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/.sage-bin \
  /bin/sh -c 'cd "$1" 2>/dev/null || cd "$2" || exit 125; exec "$3" -c "$4"' sh "$WD" "$TARGET" "$SH" "$CMD"
