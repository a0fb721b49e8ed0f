// hutch-guest: serves the tools in guest/PROTOCOL.md on a unix socket, to
// any number of host connections at once.
import { mkdir, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import { loadConfig } from "./config.ts";
import { Connection } from "./connection.ts";
import { createLogger } from "./log.ts";
import { PathPolicy } from "./paths.ts";
import { ProcessTable } from "./procs.ts";
import type { ToolContext } from "./tools/context.ts";
import { PtyTable } from "./tools/pty.ts";

const config = loadConfig();
const log = createLogger("guest", config.debug);
const procs = new ProcessTable();
const ctx: ToolContext = {
  config,
  paths: await PathPolicy.create(config.roots, config.cwd),
  procs,
  ptys: new PtyTable(config, procs, log),
  log,
};

await mkdir(dirname(config.socket), { recursive: true });
// A socket file left by an earlier run would make listen fail with EADDRINUSE.
await unlink(config.socket).catch(() => {});

const server = Bun.listen<Connection>({
  unix: config.socket,
  socket: {
    open: (socket) => {
      socket.data = new Connection(socket, ctx, shutdown);
    },
    data: (socket, chunk) => socket.data.feed(chunk),
    drain: (socket) => socket.data.drain(),
    close: (socket, err) => socket.data.lost(err ? err.message : "closed by the host"),
    error: (socket, err) => socket.data.lost(err.message),
  },
});
log.info("listening", { socket: config.socket, roots: config.roots.join(":"), pid: process.pid });

let stopping = false;
function shutdown(graceMs: number, why: string): void {
  if (stopping) return;
  stopping = true;
  log.info("shutting down", { why, graceMs, processes: procs.size });
  // Stop accepting, but keep the open connections: closing them would SIGKILL
  // every exec at once, and the host should see its processes exit.
  server.stop(false);
  void (async () => {
    const { terminated, killed } = await procs.stopAll(graceMs);
    await unlink(config.socket).catch(() => {});
    log.info("stopped", { terminated, killed });
    process.exit(0);
  })();
}

process.on("SIGTERM", () => shutdown(config.graceMs, "SIGTERM"));
process.on("SIGINT", () => shutdown(config.graceMs, "SIGINT"));
