// A root daemon mounts each agent cache's disks in a shared directory under
// /run/hutch/agents (engine/agent-disks.ts). A cache removed while its mounts
// stayed (a SIGKILLed daemon, a deleted home) is unmounted, its disks with
// it, the next time another cache is first mounted; a cache that still
// exists keeps its mounts. Real mounts: root only.
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { agentsForBoxes } from "../src/engine/agent-disks.ts";

const root = mkdtempSync(join(tmpdir(), "hutch-agent-sweep-"));
const made: string[] = [];
const mounted = (point: string) =>
  readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .some((l) => l.split(" ")[4] === point);

afterAll(() => {
  for (const dir of made) {
    if (mounted(dir)) Bun.spawnSync(["umount", "-R", "-l", dir]);
    rmSync(dir, { recursive: true, force: true });
    rmSync(`${dir}.path`, { force: true });
  }
  rmSync(root, { recursive: true, force: true });
});

/** A cache with one installed CLI (a directory of the name install.ts gives). */
function cache(name: string): string {
  const dir = join(root, name);
  mkdirSync(join(dir, "fake-1.0.0", "bin"), { recursive: true });
  writeFileSync(join(dir, "fake-1.0.0", "bin", "fake"), "#!/bin/sh\n");
  return dir;
}

test.skipIf(process.getuid?.() !== 0)(
  "a cache that is gone loses its mounts when another is first mounted; one that exists keeps them",
  async () => {
    const gone = cache("gone");
    const a = await agentsForBoxes(gone);
    made.push(a);
    expect(mounted(a)).toBe(true);
    expect(mounted(join(a, "fake-1.0.0"))).toBe(true);
    expect(readFileSync(`${a}.path`, "utf8")).toBe(realpathSync(gone));
    // The home goes, its disk image with it, while the disk is still mounted.
    rmSync(gone, { recursive: true, force: true });

    const b = await agentsForBoxes(cache("kept"));
    made.push(b);
    expect(mounted(b)).toBe(true);
    expect(mounted(join(a, "fake-1.0.0"))).toBe(false);
    expect(mounted(a)).toBe(false);
    expect(existsSync(a)).toBe(false);
    expect(existsSync(`${a}.path`)).toBe(false);

    // A third cache's first mount sweeps again: b's cache exists, so its mounts stay.
    const c = await agentsForBoxes(cache("third"));
    made.push(c);
    expect(mounted(b)).toBe(true);
    expect(mounted(join(b, "fake-1.0.0"))).toBe(true);
    expect(mounted(c)).toBe(true);
  },
  60_000,
);
