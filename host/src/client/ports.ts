// Port forwarding, held by the client (as `kubectl port-forward` is): a
// loopback listener on this machine per forwarded port, each connection a
// port.connect stream to the box through the daemon, joined with credit as
// the only buffer (like the broker relay). `auto` follows the box's listeners
// as Lima's host agent does: a new listener gets a forward, a listener that
// went away loses its own. Nothing the box says is used but a port number it
// listens on, and the host side binds only 127.0.0.1.
//
// A box chooses which ports it listens on, so auto-forwards never take this
// machine's port numbers by default: each gets a free port the OS picks
// (Docker's `-P`, kubectl's `:REMOTE`), at most `max` of them, and a
// well-known number here (5432, 6379) only when asked, and never while
// something here answers on it. Loopback is shared with every local user; an
// unpredictable high port is what keeps a forward out of their way, as
// VS Code's and ssh's forwards do.
import { connect, createServer, type Server, type Socket } from "node:net";
import { Chan, joinSocket, PortListResult, type ListeningPort } from "@hutch/shared";
import { HutchError } from "@hutch/shared/base";
import type { DaemonClient } from "./daemon.ts";
import { openToolStream } from "./stream.ts";
import { callTool } from "./tool.ts";

/** How many ports `--auto` forwards per box unless told otherwise: a dev stack's handful, far below a box that opens hundreds. */
export const AUTO_FORWARD_MAX = 32;

/** How long a loopback probe waits for an answer: a local listener answers at once. */
const PROBE_MS = 500;

export interface Forward {
  local: number;
  remote: number;
  address: "127.0.0.1" | "::1";
  stop(): Promise<void>;
}

export function listPorts(d: DaemonClient, box: string): Promise<ListeningPort[]> {
  return callTool(d, box, { tool: "port.list" }, PortListResult);
}

/** Where to connect in the box for a listener bound to `address`. */
function dialAddress(address: string): "127.0.0.1" | "::1" {
  return address === "::1" ? "::1" : "127.0.0.1";
}

/** Whether something on this machine accepts a connection on loopback `port` (IPv4 or IPv6). */
function answers(host: "127.0.0.1" | "::1", port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    const done = (v: boolean) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(false), PROBE_MS);
    sock.once("connect", () => done(true));
    sock.once("error", () => done(false));
  });
}

/**
 * Why `port` on this machine is not free for a forward, or undefined when it
 * is. A bind failure alone misses a service on [::1] only, and on BSD-derived
 * systems a bind beside another user's wildcard listener succeeds and shadows
 * it; an answer on either loopback settles both.
 */
export async function heldHere(port: number): Promise<string | undefined> {
  for (const host of ["127.0.0.1", "::1"] as const)
    if (await answers(host, port)) return `something on this machine already listens on ${host === "::1" ? "[::1]" : host}:${port}`;
  return undefined;
}

/**
 * Listens on 127.0.0.1:local (0: a free port the OS picks) and carries each
 * connection to remote in the box. A named local port that something here
 * already holds, or that cannot be bound, is refused (HutchError "conflict",
 * which the Ports view takes as "use a free port"), never shared.
 */
export async function forward(
  d: DaemonClient,
  box: string,
  remote: number,
  local: number,
  address: "127.0.0.1" | "::1" = "127.0.0.1",
): Promise<Forward> {
  const held = local === 0 ? undefined : await heldHere(local);
  if (held) throw new HutchError("conflict", `127.0.0.1:${local} is taken: ${held}`, undefined, { local, remote });
  const sockets = new Set<Socket>();
  const server: Server = createServer({ pauseOnConnect: true }, (sock) => {
    sockets.add(sock);
    sock.once("close", () => sockets.delete(sock));
    openToolStream(d, box, { tool: "port.connect", port: remote, address }).then(
      ({ stream, close }) => {
        sock.once("close", close);
        joinSocket(stream, sock, Chan.stdout, Chan.stdin, (h) => {
          stream.autoCredit = false;
          stream.handlers = h;
        });
      },
      () => sock.destroy(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) => {
      const why =
        err.code === "EADDRINUSE"
          ? `127.0.0.1:${local} is taken: something on this machine already holds it`
          : `cannot listen on 127.0.0.1:${local}: ${err.message}`;
      reject(new HutchError("conflict", why, undefined, { local, remote }));
    });
    server.listen(local, "127.0.0.1", () => resolve());
  });
  const bound = server.address();
  return {
    local: typeof bound === "object" && bound ? bound.port : local,
    remote,
    address,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface AutoOptions {
  /** Listen on the box's own port number here too, when nothing here holds it (else a free port, and `samePortRefused` says why). */
  samePort?: boolean;
  /** The most forwards at once (default AUTO_FORWARD_MAX); listeners past it wait for a slot. */
  max?: number;
  everyMs?: number;
}

export interface AutoEvents {
  added(f: Forward): void;
  removed(f: Forward): void;
  /** `samePort` was asked but port could not be bound here; the forward that follows uses a free port instead. */
  samePortRefused(port: number, why: string): void;
  failed(port: number, err: Error): void;
  /** The cap was reached with these listeners left unforwarded; told once per run. */
  capped(max: number, waiting: number[]): void;
}

/**
 * Forwards the ports the box listens on, lowest first, polling its list
 * every `everyMs`: each from a free port the OS picks, or with `samePort`
 * from the same number when nothing here holds it. At most `max` at once; a
 * listener past the cap gets a forward when one ends. Returns the stop function.
 */
export function autoForward(d: DaemonClient, box: string, events: AutoEvents, opts: AutoOptions = {}): () => Promise<void> {
  const max = opts.max ?? AUTO_FORWARD_MAX;
  const active = new Map<number, Forward>();
  /** Ports that could not be forwarded: reported once, tried again only after they go away. */
  const failed = new Set<number>();
  let toldCap = false;
  let stopped = false;
  let timer: Timer | undefined;
  const open = async (port: number, address: "127.0.0.1" | "::1"): Promise<Forward> => {
    if (!opts.samePort) return forward(d, box, port, 0, address);
    return forward(d, box, port, port, address).catch((err: Error) => {
      events.samePortRefused(port, err.message);
      return forward(d, box, port, 0, address);
    });
  };
  const tick = async () => {
    const ports = await listPorts(d, box).catch(() => undefined);
    if (stopped) return;
    if (ports) {
      const wanted = new Map(ports.map((p) => [p.port, p]));
      for (const port of failed) if (!wanted.has(port)) failed.delete(port);
      for (const [port, f] of active) {
        if (wanted.has(port)) continue;
        active.delete(port);
        await f.stop();
        events.removed(f);
      }
      const waiting: number[] = [];
      for (const [port, p] of [...wanted].sort(([a], [b]) => a - b)) {
        if (active.has(port) || failed.has(port)) continue;
        if (active.size >= max) {
          waiting.push(port);
          continue;
        }
        const f = await open(port, dialAddress(p.address)).catch((err: Error) => err);
        if (f instanceof Error) {
          failed.add(port);
          events.failed(port, f);
          continue;
        }
        if (stopped) {
          await f.stop();
          return;
        }
        active.set(port, f);
        events.added(f);
      }
      if (waiting.length > 0 && !toldCap) {
        toldCap = true;
        events.capped(max, waiting);
      }
    }
    timer = setTimeout(tick, opts.everyMs ?? 1000);
  };
  void tick();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    for (const f of active.values()) await f.stop();
    active.clear();
  };
}
