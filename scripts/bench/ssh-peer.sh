#!/usr/bin/env bash
# The peer the benches measure hutch against: a private sshd on loopback.
#
#   scripts/bench/ssh-peer.sh [start]   ensure it runs; print the ssh argv on stdout
#   scripts/bench/ssh-peer.sh stop      stop the sshd this script started
#
# Everything lives in $BENCH_DIR/ssh (default /tmp/hutch-bench/ssh): host key,
# client key, authorized_keys, sshd_config, pid file, log. The user's ~/.ssh and
# /etc/ssh are never read or written (ssh runs with -F /dev/null; sshd with -f).
# The port is $BENCH_SSH_PORT (default 2222), or the next free one above it.
set -euo pipefail

BENCH_DIR=${BENCH_DIR:-/tmp/hutch-bench}
DIR="$BENCH_DIR/ssh"
CONFIG="$DIR/sshd_config"
PIDFILE="$DIR/sshd.pid"
PORTFILE="$DIR/port"

log() { printf 'ssh-peer: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

case "$DIR" in *[[:space:]]*) die "BENCH_DIR must not contain whitespace (the printed argv is split on it): $BENCH_DIR" ;; esac

# Prints the pid of our sshd if it is running, else nothing.
running_pid() {
  [[ -f "$PIDFILE" ]] || return 0
  local pid
  pid=$(cat "$PIDFILE")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  # A stale pid file could name an unrelated process: check it is ours.
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-f $CONFIG" && echo "$pid"
  return 0
}

ssh_argv() {
  echo "ssh -F /dev/null -i $DIR/client_ed25519 -p $(cat "$PORTFILE") -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR root@127.0.0.1"
}

port_in_use() {
  ss -Hltn "sport = :$1" | grep -q .
}

stop() {
  local pid
  pid=$(running_pid)
  if [[ -z "$pid" ]]; then
    log "not running"
    return 0
  fi
  kill "$pid"
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || { log "stopped sshd $pid"; rm -f "$PIDFILE"; return 0; }
    sleep 0.1
  done
  log "sshd $pid ignored SIGTERM for 5 s; sending SIGKILL"
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$PIDFILE"
}

start() {
  if [[ ! -x /usr/sbin/sshd ]]; then
    log "installing openssh-server"
    apt-get install -y openssh-server >&2 || die "apt-get install openssh-server failed; try: apt-get update first"
  fi
  command -v ssh >/dev/null || die "no ssh client; install it: apt-get install -y openssh-client"

  mkdir -p "$DIR"
  chmod 700 "$DIR"
  [[ -f "$DIR/host_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -C hutch-bench-host -f "$DIR/host_ed25519"
  [[ -f "$DIR/client_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -C hutch-bench-client -f "$DIR/client_ed25519"
  cp "$DIR/client_ed25519.pub" "$DIR/authorized_keys"

  if [[ -n "$(running_pid)" ]]; then
    log "already running (pid $(running_pid), port $(cat "$PORTFILE"))"
  else
    local port=${BENCH_SSH_PORT:-2222}
    while port_in_use "$port"; do port=$((port + 1)); done
    echo "$port" >"$PORTFILE"
    cat >"$CONFIG" <<EOF
# Written by scripts/bench/ssh-peer.sh; private to the hutch benches.
ListenAddress 127.0.0.1
Port $port
HostKey $DIR/host_ed25519
AuthorizedKeysFile $DIR/authorized_keys
PidFile $PIDFILE
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
LogLevel ERROR
EOF
    # sshd refuses to start without its privilege separation directory.
    mkdir -p /run/sshd
    /usr/sbin/sshd -t -f "$CONFIG" || die "sshd rejected $CONFIG"
    /usr/sbin/sshd -f "$CONFIG" -E "$DIR/sshd.log"
    log "started sshd on 127.0.0.1:$port (config $CONFIG)"
  fi

  # Wait until a login works, so callers can measure right away.
  local argv
  argv=$(ssh_argv)
  for _ in $(seq 50); do
    # shellcheck disable=SC2086 # the argv is whitespace-split on purpose
    if $argv true </dev/null 2>/dev/null; then
      echo "$argv"
      return 0
    fi
    sleep 0.1
  done
  die "sshd is up but a login fails; see $DIR/sshd.log"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 [start|stop]" >&2; exit 2 ;;
esac
