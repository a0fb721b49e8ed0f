// The home's own daemon as a transport: its unix socket (0600: the kernel says
// who connected). Apart from ./transport.ts so a verb on this machine's
// daemon (every `hutch exec`) loads no remote's code: the TLS pins, the
// failover between a fleet's servers (scripts/bench/README.md, cli.ts).
import { join } from "node:path";
import { HOME_FILES } from "../paths.ts";
import type { DaemonTarget, Transport } from "./transport-types.ts";

export type LocalTarget = Extract<DaemonTarget, { kind: "local" }>;

/** The daemon that serves this home on this machine. */
export function localTarget(home: string): LocalTarget {
  return { kind: "local", socket: join(home, HOME_FILES.socket) };
}

export function localTransport(target: LocalTarget): Transport {
  const { socket } = target;
  return {
    target,
    where: socket,
    // The host must be at least 4 characters: Elysia finds the path by offset.
    fetch: (path, init = {}) => fetch(`http://localhost${path}`, { ...init, unix: socket }),
    // Bun's WebSocket takes headers as a second-argument option.
    websocket: (path, headers) => new WebSocket(`ws+unix://${socket}:${path}`, { headers } as unknown as string[]),
  };
}
