// hutch-guest as PID 1 in a real (tcg) VM, driven over virtio-serial: runs
// test/vm-check.ts, which builds the VM from Debian packages (~2 s with the
// kernel cached, plus one `apt-get download` of it the first time) and boots
// it (~30 s in all). Skipped where the tools are missing.
// test: vm
import { expect, test } from "bun:test";
import { join } from "node:path";

const NEEDED = ["qemu-system-x86_64", "busybox", "cpio", "mke2fs", "apt-get", "dpkg-deb"];
const missing = NEEDED.filter((t) => !Bun.which(t));
const why = missing.length ? `needs ${missing.join(", ")} (apt: qemu-system-x86 busybox-static cpio e2fsprogs)` : "";

test.skipIf(missing.length > 0)(
  `guest as PID 1 in QEMU${why ? ` (skipped: ${why})` : ""}`,
  async () => {
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "vm-check.ts")], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) console.log(out, err);
    expect(out).toContain("checks passed");
    expect(code).toBe(0);
  },
  180_000,
);
