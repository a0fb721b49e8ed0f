// The guest disk: a small read-only ext4 image holding /hutch-guest, one per
// guest build, so the guest binary is mapped from disk instead of being
// unpacked into RAM with the initramfs (image/BOOT.md). It is attached as a
// virtio-pmem device and mounted with DAX where the machine allows, else as
// the read-only disk vdb; the same image serves both.
import { chmodSync, copyFileSync, existsSync, mkdirSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import { MiB, makeExt4, roundUp } from "./disk.ts";
import { withStaging } from "./staging.ts";
import { TOOLS, ensureTools } from "./tools.ts";

/** Room for ext4's own metadata around the binary. */
const SLACK = 16 * MiB;
/** A pmem device's size is a whole number of 2 MiB pages. */
const ALIGN = 2 * MiB;
/** Bumped when the disk's layout changes for the same guest binary (2: 4 KiB blocks, which DAX needs; 3: an agents/ mount point). */
const LAYOUT = 3;

/** $HUTCH_HOME/guest/<sha>/guest.v<LAYOUT>.img, written once (temp + rename); returns its path. */
export async function ensureGuestDisk(home: string, guestBinary: string, sha: string): Promise<string> {
  if (!/^[0-9a-zA-Z._-]+$/.test(sha)) throw new HutchError("invalid", `bad guest build id ${JSON.stringify(sha)}`);
  const dir = join(home, "guest", sha);
  const target = join(dir, `guest.v${LAYOUT}.img`);
  if (existsSync(target)) return target;
  if (!existsSync(guestBinary)) throw new HutchError("config", `no guest binary at ${guestBinary}`, "build it: bun run build");
  await ensureTools([TOOLS.mke2fs], "making the guest disk");
  mkdirSync(dir, { recursive: true });
  return withStaging(dir, "guest-disk", "start the box again", async (staging) => {
    const tree = join(staging, "tree");
    mkdirSync(tree);
    copyFileSync(guestBinary, join(tree, "hutch-guest"));
    chmodSync(join(tree, "hutch-guest"), 0o755);
    // Where the guest mounts the agent CLI disks (a tmpfs over it): /.hutch/agents, as in process boxes.
    mkdirSync(join(tree, "agents"), { mode: 0o755 });
    const img = join(staging, "guest.img");
    await makeExt4(tree, img, {
      label: "hutch-guest",
      bytes: roundUp(statSync(guestBinary).size + SLACK, ALIGN),
      journal: false,
      blockSize: 4096,
    });
    // Another process may have won the race; both wrote the same content.
    if (!existsSync(target)) renameSync(img, target);
    return target;
  });
}
