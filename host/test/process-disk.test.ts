// A process box's disk (engine/process/disk.ts): read-only mounts a killed
// daemon left (a snapshot's read of the stopped disk) never stand in for the
// writable one a start needs, nor does a read-only loop device the kernel
// has not detached yet.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DISK_FILES, ensureDisk, isMountPoint, mountReadOnly, unmountDisk } from "../src/engine/process/disk.ts";

const root = process.getuid?.() === 0;
const dir = mkdtempSync(join(tmpdir(), "hutch-disk-"));
const owner = { uid: 1000, gid: 1000 };
const MiB = 1024 * 1024;

afterAll(async () => {
  for (let i = 0; i < 8 && isMountPoint(join(dir, DISK_FILES.mount)); i++) await unmountDisk(dir);
  rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!root)("a process box's disk", () => {
  test("a start after a left read-only mount gets a writable one", async () => {
    const roots = await ensureDisk(dir, 64 * MiB, owner);
    writeFileSync(join(roots.run, "agent.sock"), "");
    await unmountDisk(dir);
    expect(await mountReadOnly(dir)).toBe(true);
    // What a daemon killed mid-snapshot leaves, and what the next start finds.
    const again = await ensureDisk(dir, 64 * MiB, owner);
    rmSync(join(again.run, "agent.sock"), { force: true });
    writeFileSync(join(again.workspace, "w"), "x");
  });

  test("a read-only loop device still attached to the image does not make the start's mount read-only", async () => {
    // The kernel detaches the loop device of an unmounted disk after umount returns (asynchronously, and late
    // under load); mount(8) reuses one still attached, and a read-only one gives a read-only mount.
    await unmountDisk(dir);
    const lo = Bun.spawn(["losetup", "-r", "--find", "--show", join(dir, DISK_FILES.image)], { stdout: "pipe" });
    expect(await lo.exited).toBe(0);
    const roots = await ensureDisk(dir, 64 * MiB, owner);
    rmSync(join(roots.run, "agent.sock"), { force: true });
    writeFileSync(join(roots.workspace, "w"), "y");
    await unmountDisk(dir);
    expect(isMountPoint(join(dir, DISK_FILES.mount))).toBe(false);
  });
});
