// Port forwarding, held by the client (as `kubectl port-forward` is): a
// loopback listener on this machine per forwarded port, each connection a
// port.connect stream to the box through the daemon, joined with credit as
// the only buffer (like the broker relay). `auto` follows the box's listeners
// as Lima's host agent does: a new listener gets a forward, a listener that
// went away loses its own. Nothing the box says is used but a port number it
// listens on, and the host side binds only 127.0.0.1.
import { createServer, type Server, type Socket } from "node:net";
import { Chan, joinSocket, PortListResult, type ListeningPort } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { openToolStream } from "./stream.ts";
import { callTool } from "./tool.ts";

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

/** Listens on 127.0.0.1:local (0: any free port) and carries each connection to remote in the box. */
export async function forward(
  d: DaemonClient,
  box: string,
  remote: number,
  local: number,
  address: "127.0.0.1" | "::1" = "127.0.0.1",
): Promise<Forward> {
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
    server.once("error", reject);
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

export interface AutoEvents {
  added(f: Forward): void;
  removed(f: Forward): void;
  failed(port: number, err: Error): void;
}

/**
 * Forwards every port the box listens on, polling its list every `everyMs`;
 * the same port number on this machine when it is free, any free port
 * otherwise. Returns the stop function.
 */
export function autoForward(d: DaemonClient, box: string, events: AutoEvents, everyMs = 1000): () => Promise<void> {
  const active = new Map<number, Forward>();
  /** Ports that could not be forwarded: reported once, tried again only after they go away. */
  const failed = new Set<number>();
  let stopped = false;
  let timer: Timer | undefined;
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
      for (const [port, p] of wanted) {
        if (active.has(port) || failed.has(port)) continue;
        const f = await forward(d, box, port, port, dialAddress(p.address)).catch(() =>
          forward(d, box, port, 0, dialAddress(p.address)).catch((err: Error) => err),
        );
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
    }
    timer = setTimeout(tick, everyMs);
  };
  void tick();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    for (const f of active.values()) await f.stop();
    active.clear();
  };
}
