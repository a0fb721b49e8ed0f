// hutch-guest: serves the tools in guest/PROTOCOL.md to the host, on a unix
// socket (process engine) or a virtio-serial port (QEMU engine, where it is
// also PID 1: see src/init/ and image/BOOT.md). In a process box it is PID 1
// of the sandbox's pid namespace: it reaps orphans there, and its exit ends
// the box, but there is no machine to set up or power off.
import { loadConfig } from "./config.ts";
import { guardPid1, initRole, powerOff, prepareBox } from "./init/index.ts";
import { setCloseOnExec, setNonDumpable } from "./init/ffi.ts";
import { libcWait, Reaper } from "./init/reaper.ts";
import { ProcessTable } from "./procs.ts";
import { createLogger } from "./log.ts";
import { PathPolicy } from "./paths.ts";
import type { ToolContext } from "./tools/context.ts";
import { PtyTable } from "./tools/pty.ts";
import { NetTable } from "./tools/net.ts";
import { BrowserTable } from "./tools/browser/index.ts";
import { DesktopTable } from "./tools/desktop/index.ts";
import { McpTable } from "./mcp/index.ts";
import type { Channel } from "./transport/channel.ts";
import { listenUnix } from "./transport/unix.ts";
import { openVport } from "./transport/vport.ts";

// Descriptors a process box's sandbox handed over on the way in (the guest's
// own binary among them) are marked close-on-exec, so no process the guest
// starts inherits them. Not closed: bwrap closed some already, and the runtime
// may have reused those numbers for its own.
for (const fd of (process.env.HUTCH_GUEST_INHERITED_FDS ?? "").split(",")) {
  if (/^\d+$/.test(fd) && Number(fd) > 2) setCloseOnExec(Number(fd));
}

// The box's own processes get the umask of any machine, whatever the host's
// daemon runs with (077, for its own files).
process.umask(0o022);

// The engine options a process box's sandbox sets for the guest alone (it makes no threads after it starts, so
// a box at its pid limit cannot take it down: host/src/engine/process/bwrap-args.ts). Read at start; its
// programs do not get them.
for (const k of Object.keys(process.env)) if (k.startsWith("BUN_JSC_")) delete process.env[k];

const role = initRole(process.pid, process.env);
const pid1 = role === "vm";
const initLog = createLogger("init");
if (pid1) guardPid1(initLog);
try {
  setNonDumpable();
} catch (err) {
  initLog.warn("could not make the guest non-dumpable", { error: (err as Error).message });
}

let stopping = false;
let channel: Channel | undefined;

try {
  const config = loadConfig(pid1 ? prepareBox(initLog, process.env) : process.env, { vm: pid1 });
  const log = createLogger("guest", config.debug);
  const procs = new ProcessTable();
  const paths = await PathPolicy.create(config.roots, config.cwd);
  const browser = new BrowserTable(config, paths, log, procs);
  const desktop = new DesktopTable(config, log, procs);
  const ctx: ToolContext = {
    config,
    paths,
    procs,
    ptys: new PtyTable(config, procs, log),
    net: new NetTable(config, log),
    browser,
    desktop,
    mcp: new McpTable(browser, desktop, log),
    log,
  };

  function shutdown(graceMs: number, why: string): void {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { why, graceMs, processes: procs.size });
    // Take no new connections, but keep the open ones: closing them would
    // SIGKILL every exec at once, and the host should see its processes exit.
    channel?.stop();
    ctx.mcp.stopAll();
    void (async () => {
      const [{ terminated, killed }] = await Promise.all([procs.stopAll(graceMs), ctx.browser.stop(), ctx.desktop.stop()]);
      await channel?.close();
      log.info("stopped", { terminated, killed });
      if (pid1) await powerOff(log);
      process.exit(0);
    })();
  }

  const deps = { ctx, shutdown };
  channel = config.channel.kind === "unix" ? await listenUnix(config.channel.path, deps) : await openVport(config.channel.name, deps);
  if (role !== "none") new Reaper(libcWait, (pid) => procs.has(pid), log).start();
  process.on("SIGTERM", () => shutdown(config.graceMs, "SIGTERM"));
  process.on("SIGINT", () => shutdown(config.graceMs, "SIGINT"));
  log.info("listening", { channel: channel.where, roots: config.roots.join(":"), pid: process.pid });
} catch (err) {
  // Nothing to serve with: as PID 1 the host sees QEMU exit and the console's tail.
  initLog.error("guest failed to start", { error: (err as Error).message });
  if (pid1) await powerOff(initLog);
  process.exit(1);
}
