// The process engine: hutch-guest on the host inside a bubblewrap sandbox
// (own user, pid, mount, net, ipc and uts namespaces; no network). For hosts
// without virtualization and for fast tests. Reports isolation: namespace.
import { existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, rmSync, writeFileSync, openSync, closeSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import type { BoxHandle, ChannelEndpoint, Engine, Observed, ProbeResult } from "../types.ts";
import { bwrapArgs, groupFile, hostsFile, passwdFile, SHARED_ETC, type HostEntry } from "./bwrap-args.ts";
import { boxLeftovers, childrenOf, isAlive, killBox, procStartTime, readIdentity, waitGone } from "../pidfile.ts";
import { guestBinaryPath } from "../guest-binary.ts";
import { env } from "../../env.ts";
import { log } from "../../log.ts";

const logger = log.create({ service: "engine.process" });

/** File names inside $HUTCH_HOME/boxes/<id>/ (listed in host/README.md). */
export const BOX_FILES = {
  pid: "box.pid",
  console: "console.log",
  socket: "run/agent.sock",
} as const;

const SYSTEM_DIRS = ["/usr", "/bin", "/lib", "/lib64", "/sbin", "/lib32", "/libx32", "/opt"];

function hostLayout(): HostEntry[] {
  const out: HostEntry[] = [];
  for (const path of SYSTEM_DIRS) {
    try {
      const st = lstatSync(path);
      if (st.isSymbolicLink()) out.push({ path, symlink: readlinkSync(path) });
      else if (st.isDirectory()) out.push({ path });
    } catch {
      // absent on this host
    }
  }
  return out;
}

const readPid = (box: BoxHandle) => readIdentity(join(box.dir, BOX_FILES.pid));

export class ProcessEngine implements Engine {
  readonly name = "process" as const;
  readonly capabilities = { isolation: "namespace" as const, pause: false, memorySnapshot: false, screenshot: false };

  constructor(private readonly home: string) {}

  async probe(): Promise<ProbeResult> {
    let proc: { exitCode: number | null; stderr?: Buffer };
    try {
      proc = Bun.spawnSync([env.bwrap(), "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"], { stderr: "pipe" });
    } catch (err) {
      proc = { exitCode: null, stderr: Buffer.from((err as Error).message) };
    }
    if (proc.exitCode === 0) return { ok: true, engine: "process", detail: "bubblewrap can create user, pid and network namespaces" };
    const err = proc.stderr?.toString().trim() || `exit ${proc.exitCode}`;
    const missing = proc.exitCode === null || /ENOENT|not found|No such file/i.test(err);
    return {
      ok: false,
      engine: "process",
      detail: missing ? "bubblewrap (bwrap) is not installed" : `bubblewrap cannot create namespaces: ${err}`,
      fix: missing ? "apt-get install -y bubblewrap" : "enable unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1",
    };
  }

  async create(box: BoxHandle): Promise<void> {
    for (const d of ["workspace", "home", "run", "etc"]) mkdirSync(join(box.dir, d), { recursive: true });
    writeFileSync(join(box.dir, "etc/passwd"), passwdFile());
    writeFileSync(join(box.dir, "etc/group"), groupFile());
    writeFileSync(join(box.dir, "etc/hosts"), hostsFile(box.name));
  }

  async start(box: BoxHandle): Promise<void> {
    await this.create(box);
    rmSync(join(box.dir, BOX_FILES.socket), { force: true });
    const guest = await guestBinaryPath(this.home);
    const agents = env.agentsDir(this.home);
    mkdirSync(agents, { recursive: true });
    const argv = bwrapArgs({
      bwrap: env.bwrap(),
      boxId: box.id,
      hostname: box.name,
      boxDir: box.dir,
      guestBinary: guest,
      system: hostLayout(),
      etc: SHARED_ETC.filter((e) => existsSync(`/etc/${e}`)),
      agents,
    });
    const consoleFd = openSync(join(box.dir, BOX_FILES.console), "a");
    let proc: ReturnType<typeof Bun.spawn>;
    try {
      // Detached: the box outlives the daemon; a restarted daemon finds it by its pidfile.
      proc = Bun.spawn(argv, {
        stdin: "ignore",
        stdout: consoleFd,
        stderr: consoleFd,
        detached: true,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HUTCH_BOX_ID: box.id },
      });
    } catch (err) {
      throw new HutchError("failed", `could not run bubblewrap: ${(err as Error).message}`, "check the host: hutch doctor");
    } finally {
      closeSync(consoleFd);
    }
    proc.unref();
    const startTime = procStartTime(proc.pid);
    if (!startTime) {
      throw new HutchError("failed", `box process exited at once: ${await this.consoleTail(box)}`, "check the host: hutch doctor");
    }
    writeFileSync(join(box.dir, BOX_FILES.pid), JSON.stringify({ pid: proc.pid, startTime }));
    logger.info("box process started", { box: box.name, pid: proc.pid });
  }

  async stop(box: BoxHandle, timeoutMs: number, requestShutdown: () => void): Promise<{ forced: boolean }> {
    const id = readPid(box);
    if (!id || !isAlive(id)) return { forced: false };
    requestShutdown();
    if (await waitGone(id, timeoutMs)) {
      rmSync(join(box.dir, BOX_FILES.pid), { force: true });
      return { forced: false };
    }
    logger.warn("graceful stop timed out; killing", { box: box.name, timeoutMs });
    await this.kill(box);
    return { forced: true };
  }

  async kill(box: BoxHandle): Promise<void> {
    const id = readPid(box);
    // Killing the sandbox's pid-namespace init takes every process in the box with it.
    await killBox(box.id, id, join(box.dir, BOX_FILES.pid), id ? childrenOf(id.pid) : []);
  }

  async inspect(box: BoxHandle): Promise<Observed> {
    const id = readPid(box);
    if (id && isAlive(id)) return { running: true, pid: id.pid };
    return { running: false };
  }

  channel(box: BoxHandle): ChannelEndpoint {
    return { kind: "unix", path: join(box.dir, BOX_FILES.socket) };
  }

  async destroy(box: BoxHandle): Promise<void> {
    rmSync(box.dir, { recursive: true, force: true });
  }

  async leftovers(box: BoxHandle): Promise<string[]> {
    return boxLeftovers(box.id, box.dir);
  }

  async helloTimeoutMs(): Promise<number> {
    return env.helloTimeoutMs() ?? 10_000;
  }

  async consoleTail(box: BoxHandle, lines = 20): Promise<string> {
    try {
      const text = readFileSync(join(box.dir, BOX_FILES.console), "utf8");
      return text.trimEnd().split("\n").slice(-lines).join("\n") || "(console log is empty)";
    } catch {
      return "(no console log)";
    }
  }
}
