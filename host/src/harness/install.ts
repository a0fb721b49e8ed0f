// Agent CLIs are installed on the host, once per pinned version, with npm
// into a cache directory ($HUTCH_AGENTS_DIR, default $HUTCH_HOME/agents) that
// process boxes see read-only at /.hutch/agents. A box never runs npm and
// never needs the registry; an install is atomic (a temp dir renamed into
// place), so a half-finished one is never used.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { HutchError, type AgentInfo, type AgentInstalled, type OpReport } from "@hutch/shared";
import type { Harness, NpmPackage } from "./types.ts";
import { HARNESSES, harness } from "./index.ts";
import { log } from "../log.ts";
import { agentsForBoxes, agentsShared, buildAgentDisk, dropAgentDisk } from "../engine/agent-disks.ts";

const logger = log.create({ service: "harness.install" });

export { GUEST_AGENTS as GUEST_AGENTS_DIR } from "../engine/process/bwrap-args.ts";

/** One directory per pinned version (and pinned runtime): its content never changes once installed. */
export const installDirName = (h: Harness) =>
  h.npm ? `${h.name}-${h.npm.version}${h.npm.runtime ? `+node-${h.npm.runtime.version}` : ""}` : h.name;

/** The executable inside the cache (host side) or the box (guest side); `bash` for the shell. */
export function agentCommand(h: Harness, root: string): string {
  return h.npm ? join(root, installDirName(h), "node_modules", ".bin", h.npm.bin) : "bash";
}

/** How the CLI is started: its executable, behind its pinned runtime when it has one. */
export function agentArgv(h: Harness, root: string): string[] {
  const rt = h.npm?.runtime;
  return rt ? [join(root, installDirName(h), "node_modules", rt.name, rt.bin), agentCommand(h, root)] : [agentCommand(h, root)];
}

/** Both the CLI and its runtime are installed at their pinned versions. */
function complete(dir: string, pkg: NpmPackage): boolean {
  return installedVersion(dir, pkg) === pkg.version && (!pkg.runtime || installedVersion(dir, pkg.runtime) === pkg.runtime.version);
}

/** The version of a package installed under dir, or null. */
export function installedVersion(dir: string, pkg: NpmPackage): string | null {
  try {
    return (JSON.parse(readFileSync(join(dir, "node_modules", pkg.name, "package.json"), "utf8")) as { version?: string }).version ?? null;
  } catch {
    return null;
  }
}

/**
 * The CLI's read-only disk (what VMs attach, and what a root daemon's process
 * boxes read: host/src/engine/agent-disks.ts), made once; and, when boxes are
 * already reading the shared directory, mounted there so running boxes see it.
 */
async function publish(cacheDir: string, name: string): Promise<void> {
  await buildAgentDisk(cacheDir, name);
  if (process.getuid?.() === 0 && agentsShared(cacheDir)) await agentsForBoxes(cacheDir);
}

/** What an install did (the operation's result, shared/src/ops.ts). */
export type Installed = AgentInstalled;

/** Every agent: its pinned version, and what of it the cache holds. */
export function listAgents(cacheDir: string): AgentInfo[] {
  return Object.values(HARNESSES).map((h) => ({
    agent: h.name,
    package: h.npm?.name ?? null,
    pinned: h.npm?.version ?? null,
    installed: h.npm ? installedVersion(join(cacheDir, installDirName(h)), h.npm) : "built in",
    path: agentCommand(h, cacheDir),
    bindings: h.bindings,
  }));
}

/** The agents to install for these names (every one with a package when none is named); an unknown name throws. */
export function installList(names: string[]): Harness[] {
  return (names.length ? names.map(harness) : Object.values(HARNESSES)).filter((h) => h.npm);
}

/** `hutch agent install`: one after another, each a step of the operation. */
export async function installAgents(list: Harness[], cacheDir: string, report: OpReport, signal: AbortSignal): Promise<Installed[]> {
  const done: Installed[] = [];
  for (const [i, h] of list.entries()) {
    signal.throwIfAborted();
    report({ type: "step", n: i + 1, total: list.length, title: `${h.name}: ${h.npm!.name}@${h.npm!.version}` });
    done.push(await installAgent(h, cacheDir));
  }
  return done;
}

/**
 * Installs run in the daemon (for `hutch agent install` and for a session
 * that needs a missing CLI), so two can ask for the same one at once: they
 * share one install, whose temporary directory is then its alone.
 */
const installing = new Map<string, Promise<Installed>>();

/** Installs the pinned CLI into the cache unless it is there already. */
export function installAgent(h: Harness, cacheDir: string): Promise<Installed> {
  const key = join(cacheDir, installDirName(h));
  let p = installing.get(key);
  if (!p) {
    p = install(h, cacheDir).finally(() => installing.delete(key));
    installing.set(key, p);
  }
  return p;
}

async function install(h: Harness, cacheDir: string): Promise<Installed> {
  if (!h.npm) return { agent: h.name, package: null, version: null, path: "bash", fresh: false };
  const dir = join(cacheDir, installDirName(h));
  const bin = agentCommand(h, cacheDir);
  if (complete(dir, h.npm) && existsSync(bin)) {
    await publish(cacheDir, installDirName(h));
    return { agent: h.name, package: h.npm.name, version: h.npm.version, path: bin, fresh: false };
  }
  mkdirSync(cacheDir, { recursive: true });
  const tmp = join(cacheDir, `.tmp-${installDirName(h)}-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  const spec = `${h.npm.name}@${h.npm.version}`;
  const specs = [spec, ...(h.npm.runtime ? [`${h.npm.runtime.name}@${h.npm.runtime.version}`] : [])];
  logger.info("installing agent CLI", { agent: h.name, spec, dir });
  let proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  try {
    // umask 022: every box's own host uid must read the CLI, whatever umask the daemon runs with.
    proc = Bun.spawn(
      [
        "sh",
        "-c",
        'umask 022 && exec "$@"',
        "sh",
        "npm",
        "install",
        "--prefix",
        tmp,
        "--no-audit",
        "--no-fund",
        "--omit=dev",
        "--loglevel=error",
        ...specs,
      ],
      { stdout: "pipe", stderr: "pipe" },
    );
  } catch {
    rmSync(tmp, { recursive: true, force: true });
    throw new HutchError(
      "unavailable",
      `npm is not installed, so ${spec} cannot be installed`,
      "install Node.js and npm (apt-get install -y npm), then retry",
    );
  }
  const [err, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0 || !complete(tmp, h.npm)) {
    rmSync(tmp, { recursive: true, force: true });
    const tail = err.trim().split("\n").slice(-5).join("\n");
    throw new HutchError(
      "failed",
      `npm install ${spec} failed (exit ${code}):\n${tail}`,
      `check the registry is reachable (npm view ${h.npm.name} version), then: hutch agent install ${h.name}`,
    );
  }
  await dropAgentDisk(cacheDir, installDirName(h));
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  await publish(cacheDir, installDirName(h));
  return { agent: h.name, package: h.npm.name, version: h.npm.version, path: bin, fresh: true };
}
