#!/usr/bin/env bash
# Runs every bench in this folder (scripts/bench/*.ts), in name order, passing
# the arguments through (e.g. --json: one JSON document per bench on stdout).
# Keeps going after a broken bench; exits 1 if any broke.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

if [[ ! -x "$root/dist/hutch" ]]; then
  echo "bench: $root/dist/hutch is missing; build it first: cd $root && bun run build" >&2
  exit 1
fi

shopt -s nullglob
benches=("$here"/*.ts)
if [[ ${#benches[@]} -eq 0 ]]; then
  echo "bench: no benches in $here" >&2
  exit 1
fi

failed=()
for bench in "${benches[@]}"; do
  name=$(basename "$bench")
  echo "bench: == $name ==" >&2
  if ! (cd "$root" && bun "$bench" "$@"); then
    failed+=("$name")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "bench: broken: ${failed[*]}" >&2
  exit 1
fi
