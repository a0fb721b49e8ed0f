#!/bin/sh
# The hutch pod's first process: readies what a pod spec cannot say, then
# runs hutch with the container's arguments (daemonset.yaml: serve ...).
set -eu

# $HUTCH_HOME is a hostPath the kubelet made 0755; hutch refuses a home that
# group or others can enter (host/src/home.ts).
mkdir -p "$HUTCH_HOME"
chmod 700 "$HUTCH_HOME"

# cgroup v2 in a private cgroup namespace: the container's group reads as
# "/" (/proc/self/cgroup is "0::/"), which hutch takes for the root group and
# makes box groups under. It is not the root, though: a group that holds a
# process cannot hand controllers to child groups (cgroup v2's "no internal
# processes" rule), so a box would fail to start where hutch turns the
# controllers on. So this process moves into a child group, "serve", first
# and the controllers are handed down to it, as docker-in-docker's
# entrypoint does; hutch then finds itself in a group of its own and makes
# its "daemon" and "boxes" groups under it (host/src/engine/cgroup.ts).
if [ "$(cat /proc/self/cgroup)" = "0::/" ] && [ -w /sys/fs/cgroup/cgroup.subtree_control ]; then
  mkdir -p /sys/fs/cgroup/serve
  echo $$ > /sys/fs/cgroup/serve/cgroup.procs
  for c in pids memory cpu; do
    if grep -qw "$c" /sys/fs/cgroup/cgroup.controllers; then
      echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control
    fi
  done
fi

exec hutch "$@"
