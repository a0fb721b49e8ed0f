// Scratch directories beside their target: whatever happens (failure, Ctrl-C)
// they are removed, and only a finished directory is ever renamed into place.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { HutchError } from "@hutch/shared";
import { processAlive } from "../procs.ts";
import { abortRunning } from "./tools.ts";

/** Mount points at or below dir, deepest first (/proc/self/mountinfo field 5, octal escapes undone). */
export function mountsUnder(mountinfo: string, dir: string): string[] {
  const prefix = dir.replace(/\/+$/, "");
  return mountinfo
    .split("\n")
    .map((l) => l.split(" ")[4])
    .filter((m): m is string => m !== undefined)
    .map((m) => m.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((m) => m === prefix || m.startsWith(`${prefix}/`))
    .sort((a, b) => b.length - a.length);
}

/**
 * Removes a scratch tree. debootstrap mounts /proc and /sys inside its target
 * and a killed one leaves them mounted: unmount first, or rm would walk into them.
 */
export function removeTree(dir: string): void {
  let info = "";
  try {
    info = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    // No /proc: nothing can be mounted that we could see anyway.
  }
  for (const m of mountsUnder(info, dir)) spawnSync("umount", ["-l", m], { stdio: "ignore" });
  rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}

export const STAGING_PREFIX = ".tmp-";

/** A fresh directory in parent, named so listings skip it, and with the pid that owns it (sweepStale). */
export function makeStaging(parent: string, purpose: string): string {
  mkdirSync(parent, { recursive: true });
  return mkdtempSync(join(parent, `${STAGING_PREFIX}${purpose}-${process.pid}-`));
}

/**
 * Removes what an interrupted run left in parent (a SIGKILLed build cannot
 * clean up after itself): every staging entry whose owner is gone, with
 * whatever is still mounted under it. One whose owner runs is kept.
 */
export function sweepStale(parent: string): string[] {
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return removed;
  }
  for (const name of names) {
    if (!name.startsWith(STAGING_PREFIX)) continue;
    const pid = Number(/-(\d+)-[^-]*$/.exec(name)?.[1] ?? /-(\d+)$/.exec(name)?.[1] ?? NaN);
    if (Number.isInteger(pid) && pid !== process.pid && processAlive(pid)) continue;
    if (pid === process.pid) continue;
    removeTree(join(parent, name));
    removed.push(name);
  }
  return removed;
}

/**
 * Runs work with its staging directory removed afterwards, also on SIGINT and
 * SIGTERM: the first signal stops the running commands and lets the failure
 * unwind through this cleanup; a second one removes the directory and exits.
 */
export async function withStaging<T>(parent: string, purpose: string, again: string, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = makeStaging(parent, purpose);
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals += 1;
    abortRunning();
    process.stderr.write(`\nhutch: ${sig}: stopping and removing ${dir}\n`);
    if (signals > 1) {
      removeTree(dir);
      process.exit(130);
    }
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    return await work(dir);
  } catch (err) {
    if (signals > 0) throw new HutchError("failed", `interrupted; removed the unfinished ${purpose}`, `start it again: ${again}`);
    throw err;
  } finally {
    removeTree(dir);
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
