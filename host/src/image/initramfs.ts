// The initramfs: busybox-static, the modules in load order and /init
// (image/initramfs/init), as a zstd-compressed newc cpio.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import initScript from "../../../image/initramfs/init" with { type: "text" };
import { download } from "./apt.ts";
import { writeCpio, type CpioEntry } from "./cpio.ts";
import type { KernelModule } from "./kernel.ts";
import { TOOLS, run } from "./tools.ts";

export { initScript };

/** The busybox applets /init calls; anything else is one `busybox <applet>` away when debugging. */
export const APPLETS = ["sh", "mount", "insmod", "sleep", "poweroff", "switch_root"] as const;

/** Takes /bin/busybox out of Debian's busybox-static package. */
export async function fetchBusybox(work: string, version: string): Promise<Uint8Array> {
  const tree = join(work, "busybox");
  const deb = await download("busybox-static", version, join(work, "debs"));
  await run([TOOLS.dpkgDeb.bin, "-x", deb, tree]);
  const bin = [join(tree, "bin/busybox"), join(tree, "usr/bin/busybox")].find(existsSync);
  if (!bin) throw new HutchError("failed", "busybox-static has no bin/busybox");
  return new Uint8Array(await Bun.file(bin).arrayBuffer());
}

/** The cpio entries, in creation order. /dev/console must exist before devtmpfs is mounted: the kernel opens it for /init's stdio. */
export function initramfsEntries(busybox: Uint8Array, modules: readonly KernelModule[], init: string): CpioEntry[] {
  const enc = new TextEncoder();
  return [
    ...["bin", "dev", "proc", "sys", "newroot", "lib", "lib/modules"].map((name): CpioEntry => ({ type: "dir", name, mode: 0o755 })),
    { type: "char", name: "dev/console", mode: 0o600, major: 5, minor: 1 },
    { type: "file", name: "bin/busybox", mode: 0o755, data: busybox },
    ...APPLETS.map((a): CpioEntry => ({ type: "symlink", name: `bin/${a}`, target: "busybox" })),
    ...modules.map((m): CpioEntry => ({ type: "file", name: `lib/modules/${m.file}`, mode: 0o644, data: m.data })),
    ...(["modules.order", "modules.fs"] as const).map(
      (name, lane): CpioEntry => ({
        type: "file",
        name,
        mode: 0o644,
        data: enc.encode(
          modules
            .filter((m) => m.lane === lane)
            .map((m) => `${m.file}\n`)
            .join(""),
        ),
      }),
    ),
    { type: "file", name: "init", mode: 0o755, data: enc.encode(init) },
  ];
}

/** Debian's kernel unpacks zstd (CONFIG_RD_ZSTD) and it decompresses fastest under tcg. */
export function buildInitramfs(busybox: Uint8Array, modules: readonly KernelModule[]): Uint8Array {
  return Bun.zstdCompressSync(writeCpio(initramfsEntries(busybox, modules, initScript)), { level: 19 });
}
