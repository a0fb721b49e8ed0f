// port.list and port.connect: what listens in the box, and a way in to it.
// The list comes from /proc/net/tcp{,6} (the box's own network namespace, or
// the VM's kernel), so it sees every process's listeners, not only the
// guest's children. The guest's own listeners (the broker relay, the
// browser's DevTools port) are left out: they are not the user's to forward,
// and forwarding DevTools would hand the box's browser to any host process.
import { readFile } from "node:fs/promises";
import type { Socket } from "bun";
import { Chan, type ListeningPort, type MuxStream } from "@hutch/shared/wire";
import type { Req } from "./base.ts";
import { takeFrames } from "./inbox.ts";
import { NativeSocket } from "./native-socket.ts";
import { joinSocket } from "@hutch/shared/wire";

const LISTEN = "0A";

/** The listening sockets in one /proc/net/tcp or tcp6 table, deduplicated by address and port. */
export function parseProcNetTcp(text: string, family: "ipv4" | "ipv6"): ListeningPort[] {
  const out: ListeningPort[] = [];
  for (const line of text.split("\n").slice(1)) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 4 || cols[3] !== LISTEN) continue;
    const [hexAddr, hexPort] = (cols[1] ?? "").split(":");
    const port = Number.parseInt(hexPort ?? "", 16);
    if (!hexAddr || !(port > 0 && port < 65536)) continue;
    const address = family === "ipv4" ? ipv4(hexAddr) : ipv6(hexAddr);
    if (!out.some((p) => p.port === port && p.address === address)) out.push({ port, address, family });
  }
  return out;
}

function ipv4(hex: string): string {
  // Little-endian on every architecture Linux runs the guest on.
  const n = Number.parseInt(hex, 16);
  return [n & 255, (n >>> 8) & 255, (n >>> 16) & 255, (n >>> 24) & 255].join(".");
}

function ipv6(hex: string): string {
  if (hex.length !== 32) return hex.slice(0, 64);
  const groups: string[] = [];
  // Four little-endian 32-bit words.
  for (let w = 0; w < 4; w++) {
    const word = hex.slice(w * 8, w * 8 + 8);
    const bytes = [word.slice(6, 8), word.slice(4, 6), word.slice(2, 4), word.slice(0, 2)].join("");
    groups.push(bytes.slice(0, 4), bytes.slice(4, 8));
  }
  const full = groups.map((g) => Number.parseInt(g, 16).toString(16)).join(":");
  if (full === "0:0:0:0:0:0:0:0") return "::";
  if (full === "0:0:0:0:0:0:0:1") return "::1";
  return full;
}

export async function listPorts(exclude: Set<number>): Promise<ListeningPort[]> {
  const tables = await Promise.all([
    readFile("/proc/net/tcp", "utf8")
      .then((t) => parseProcNetTcp(t, "ipv4"))
      .catch(() => []),
    readFile("/proc/net/tcp6", "utf8")
      .then((t) => parseProcNetTcp(t, "ipv6"))
      .catch(() => []),
  ]);
  return tables
    .flat()
    .filter((p) => !exclude.has(p.port))
    .sort((a, b) => a.port - b.port || a.address.localeCompare(b.address));
}

export async function portList(stream: MuxStream, exclude: Set<number>): Promise<void> {
  stream.msg({ type: "result", value: await listPorts(exclude) });
  stream.close();
}

/** Dials the box's loopback and joins the connection to the stream; a refused dial closes it with the reason. */
export function portConnect(stream: MuxStream, req: Req<"port.connect">, exclude: Set<number>): void {
  const address = req.address ?? "127.0.0.1";
  if (exclude.has(req.port)) return stream.close({ code: "denied", message: `port ${req.port} is the guest's own; it is not forwarded` });
  Bun.connect<NativeSocket>({
    hostname: address,
    port: req.port,
    socket: {
      open(sock: Socket<NativeSocket>) {
        sock.data = new NativeSocket(sock);
        sock.pause();
        joinSocket(stream, sock.data, Chan.stdin, Chan.stdout, (h) => takeFrames(stream, h, false));
      },
      data: (sock, bytes) => sock.data.emit("data", bytes.slice()),
      drain: (sock) => sock.data.flush(),
      end: (sock) => sock.data.emit("end"),
      close: (sock) => {
        if (!sock.data) return;
        sock.data.closed = true;
        sock.data.emit("close");
      },
      error: (sock) => sock.data?.emit("error"),
    },
  }).catch((err: unknown) => {
    stream.close({ code: "failed", message: `${address}:${req.port} in the box: ${(err as Error).message || "connection refused"}` });
  });
}
