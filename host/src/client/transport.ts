// How a client reaches a daemon: the one place that turns a daemon target
// into HTTP requests and WebSockets. Everything else (requests, tool streams,
// subscriptions, the IDE bridge's change feed, operations) asks this module,
// so a new kind of target changes this file and nothing else.
//
// Today the only target is the home's unix socket (0600: the kernel says who
// connected). Server mode adds `{ kind: "remote", url, token, pin }`: the same
// paths over HTTPS and WSS, an `Authorization: Bearer` header, and a
// certificate checked against the pinned sha256 instead of the system roots.
import { join } from "node:path";
import { HOME_FILES } from "../paths.ts";

export type DaemonTarget = { kind: "local"; socket: string };

export interface Transport {
  readonly target: DaemonTarget;
  /** The daemon's address for people and logs: the socket path (a URL with server mode). */
  readonly where: string;
  /** An HTTP request to a daemon path (`/v1/...`); throws when the daemon cannot be reached. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** A WebSocket to a daemon path, naming the client with `headers`. */
  websocket(path: string, headers: Record<string, string>): WebSocket;
}

/** The daemon that serves this home on this machine. */
export function localTarget(home: string): DaemonTarget {
  return { kind: "local", socket: join(home, HOME_FILES.socket) };
}

export function transport(target: DaemonTarget): Transport {
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
