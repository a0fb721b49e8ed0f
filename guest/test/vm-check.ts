// Boots hutch-guest as PID 1 in a throwaway QEMU VM (tcg) and drives it over
// the virtio-serial port as the host would. Not part of `bun test`: it needs
// qemu-system-x86, busybox-static, cpio, e2fsprogs and a Debian kernel package
// from apt, and takes ~1 min. Run: bun guest/test/vm-check.ts [workdir]
//
// The VM follows image/BOOT.md: a busybox /init in the initramfs loads the
// virtio and ext4 modules, mounts vda (root: busybox and glibc) and vdb (the
// guest binary), and switch_roots into /.hutch/hutch-guest.
import { $ } from "bun";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { collect, connect, type Collected, type Host } from "./harness.ts";

const WORK = process.argv[2] ?? "/tmp/hutch-vm-check";
const MAIN = join(import.meta.dir, "../src/main.ts");
const BOX_ID = "box_0000000000aaaaaaaaaa";

const checks: Array<{ name: string; ok: boolean; detail: string }> = [];
function check(name: string, ok: boolean, detail = ""): void {
  checks.push({ name, ok, detail });
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? `: ${detail}` : ""}`);
}

async function buildVm(): Promise<{ kernel: string }> {
  mkdirSync(WORK, { recursive: true });
  const t0 = performance.now();
  const kdir = join(WORK, "kern");
  if (!existsSync(kdir)) {
    const dep = (await $`apt-cache depends linux-image-amd64`.text()).match(/Depends: (linux-image-\S+)/)?.[1];
    if (!dep) throw new Error("apt-cache knows no linux-image-amd64");
    await $`cd ${WORK} && apt-get download ${dep} && dpkg-deb -x ${dep}_*.deb kern && rm ${dep}_*.deb`.quiet();
  }
  const kver = readdirSync(join(kdir, "lib/modules"))[0]!;
  const mods = join(kdir, "lib/modules", kver, "kernel");
  const ird = join(WORK, "ird");
  const root = join(WORK, "root");
  const gd = join(WORK, "gd");
  for (const d of [ird, root, gd]) rmSync(d, { recursive: true, force: true });
  for (const d of ["bin", "lib/modules", "proc", "sys", "dev", "newroot"]) mkdirSync(join(ird, d), { recursive: true });
  await $`cp /bin/busybox ${ird}/bin/busybox`;
  // Dependencies first (modules.dep); crc32c_generic is ext4's soft dependency.
  const order = [
    "drivers/virtio/virtio_ring",
    "drivers/virtio/virtio",
    "drivers/virtio/virtio_pci_legacy_dev",
    "drivers/virtio/virtio_pci_modern_dev",
    "drivers/virtio/virtio_pci",
    "drivers/char/virtio_console",
    "drivers/block/virtio_blk",
    "crypto/crc32c_generic",
    "lib/crc16",
    "fs/mbcache",
    "fs/jbd2/jbd2",
    "fs/ext4/ext4",
  ];
  for (const m of order) await $`cp ${join(mods, m)}.ko ${ird}/lib/modules/`;
  writeFileSync(join(ird, "modules.order"), `${order.map((m) => `${m.split("/").pop()}.ko`).join("\n")}\n`);
  writeFileSync(
    join(ird, "init"),
    `#!/bin/busybox sh
B=/bin/busybox
fail() { echo "hutch-init: $1"; $B poweroff -f; }
$B mount -t proc proc /proc && $B mount -t sysfs sysfs /sys && $B mount -t devtmpfs devtmpfs /dev || fail "mount proc/sys/dev"
for m in $($B cat /modules.order); do $B insmod /lib/modules/$m || fail "insmod $m"; done
i=0; while [ ! -b /dev/vda ] || [ ! -b /dev/vdb ]; do i=$((i+1)); [ $i -gt 50 ] && fail "no /dev/vda or /dev/vdb"; $B sleep 0.1; done
$B mount -t ext4 /dev/vda /newroot || fail "mount /dev/vda"
$B mount -t ext4 -o ro /dev/vdb /newroot/.hutch || fail "mount /dev/vdb"
for d in proc sys dev; do $B mount --move /$d /newroot/$d; done
exec $B switch_root /newroot /.hutch/hutch-guest
`,
    { mode: 0o755 },
  );
  await $`cd ${ird} && find . | cpio -o -H newc --quiet | gzip -1 > ${WORK}/initramfs.img`;
  for (const d of [
    "bin",
    "lib64",
    "lib/x86_64-linux-gnu",
    "proc",
    "sys",
    "dev",
    ".hutch",
    "workspace",
    "home/hutch",
    "root",
    "etc",
    "tmp",
    "run",
  ]) {
    mkdirSync(join(root, d), { recursive: true });
  }
  await $`cp /bin/busybox ${root}/bin/busybox`;
  for (const a of (await $`/bin/busybox --list`.text()).split("\n").filter(Boolean)) {
    if (a !== "busybox") await $`ln -sf busybox ${root}/bin/${a}`;
  }
  await $`cp -L /lib64/ld-linux-x86-64.so.2 ${root}/lib64/`;
  for (const l of ["libc.so.6", "libpthread.so.0", "libdl.so.2", "libm.so.6"])
    await $`cp -L /lib/x86_64-linux-gnu/${l} ${root}/lib/x86_64-linux-gnu/`;
  writeFileSync(join(root, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
  writeFileSync(join(root, "etc/group"), "root:x:0:\ntty:x:5:\n");
  mkdirSync(gd);
  await $`bun build --compile --minify ${MAIN} --outfile ${gd}/hutch-guest`.quiet();
  await $`rm -f ${WORK}/root.img ${WORK}/guest.img && mke2fs -q -t ext4 -d ${root} ${WORK}/root.img 64M && mke2fs -q -t ext4 -d ${gd} ${WORK}/guest.img 160M`;
  console.log(`built the VM in ${Math.round(performance.now() - t0)} ms (kernel ${kver})`);
  return { kernel: join(kdir, "boot", `vmlinuz-${kver}`) };
}

/** A host connection to the VM's agent socket (the harness's, naming this check in its hello). */
const connectHost = (path: string) => connect(path, { protocol: 1, client: "vm-check", version: "0.1.0" });

async function exec(h: Host, argv: string[], user?: "root", timeoutMs = 30_000): Promise<{ c: Collected; exit: Record<string, unknown> }> {
  const c = collect(h.mux.open({ tool: "exec", argv, ...(user ? { user } : {}) }));
  const exit = await c.waitMsg("exit", timeoutMs);
  await c.closed;
  return { c, exit };
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([p, Bun.sleep(ms).then(() => Promise.reject(new Error(`${what}: no answer within ${ms} ms`)))]);
}

/** Processes in state Z, from /proc/<pid>/stat inside the VM. */
async function zombies(h: Host): Promise<string[]> {
  const { c } = await exec(h, ["sh", "-c", "cat /proc/[0-9]*/stat 2>/dev/null"]);
  return c
    .text()
    .split("\n")
    .filter((l) => /^\d+ \(.*\) Z /.test(l))
    .map((l) => l.split(" ").slice(0, 4).join(" "));
}

const { kernel } = await buildVm();
const sock = join(WORK, "agent.sock");
const consoleLog = join(WORK, "console.log");
rmSync(sock, { force: true });
const t0 = performance.now();
const qemu = Bun.spawn(
  [
    "qemu-system-x86_64",
    "-accel",
    "tcg",
    "-cpu",
    "max",
    "-m",
    "512",
    "-nodefaults",
    "-no-user-config",
    "-nographic",
    "-serial",
    `file:${consoleLog}`,
    "-kernel",
    kernel,
    "-initrd",
    join(WORK, "initramfs.img"),
    "-append",
    `console=ttyS0 panic=-1 quiet rdinit=/init hutch.box=t1 hutch.id=${BOX_ID}`,
    "-drive",
    `file=${join(WORK, "root.img")},if=virtio,format=raw,snapshot=on`,
    "-drive",
    `file=${join(WORK, "guest.img")},if=virtio,format=raw,readonly=on`,
    "-device",
    "virtio-serial-pci",
    "-chardev",
    `socket,id=agent,path=${sock},server=on,wait=off`,
    "-device",
    "virtserialport,chardev=agent,name=hutch.agent",
    "-no-reboot",
  ],
  { stdout: "inherit", stderr: "inherit" },
);
let qemuExitedAt = 0;
void qemu.exited.then(() => (qemuExitedAt = performance.now()));
const ms = (from: number) => `${Math.round(performance.now() - from)} ms`;

try {
  while (!existsSync(sock)) await Bun.sleep(10);
  // The host may connect long before the guest opens the port: QEMU keeps the hello.
  let h = await connectHost(sock);
  const hello = (await withTimeout(h.hello, 60_000, "hello")) as Record<string, unknown>;
  check("hello from PID 1", hello.agent === "hutch-guest", `QEMU start → guest hello ${ms(t0)}`);

  let t = performance.now();
  const uname = await exec(h, ["uname", "-r"]);
  check("exec uname -r", uname.exit.code === 0 && /\d+\.\d+/.test(uname.c.text()), `${uname.c.text().trim()} (${ms(t)})`);
  t = performance.now();
  const echo = await exec(h, ["echo", "hi"]);
  check("exec round trip", echo.c.text() === "hi\n", ms(t));

  const three = await exec(h, ["sh", "-c", "exit 3"]);
  check("exit code 3", three.exit.code === 3, JSON.stringify(three.exit));

  const env = await exec(h, ["sh", "-c", 'echo "$HUTCH_BOX_ID $(hostname) $HOME $USER"; id -u']);
  check(
    "box env and hostname; processes run as the box's user",
    env.c.text() === `${BOX_ID} t1 /home/hutch hutch\n1000\n`,
    JSON.stringify(env.c.text()),
  );
  const root = await exec(h, ["sh", "-c", 'echo "$HOME $USER"; id -u'], "root");
  check("root where asked", root.c.text() === "/root root\n0\n", JSON.stringify(root.c.text()));

  const mounts = await exec(h, ["cat", "/proc/self/mounts"]);
  const points = mounts.c
    .text()
    .split("\n")
    .map((l) => l.split(" ")[1]);
  check(
    "mounts",
    ["/dev/pts", "/dev/shm", "/run", "/tmp"].every((p) => points.includes(p)),
    points.join(" "),
  );
  const lo = await exec(h, ["cat", "/sys/class/net/lo/operstate", "/sys/class/net/lo/flags"]);
  check("lo up", /0x\d*9\n/.test(lo.c.text()), JSON.stringify(lo.c.text()));

  await exec(h, ["sh", "-c", "sleep 1 & exit 0"]);
  const during = await zombies(h);
  await Bun.sleep(1800);
  const after = await zombies(h);
  const ps = await exec(h, ["ps", "-o", "stat,pid,comm"]);
  check(
    "orphan reaped (no zombie after the sleep)",
    after.length === 0,
    `zombies during: ${during.length}, after: ${JSON.stringify(after)}\n${ps.c.text()}`,
  );

  const victim = collect(h.mux.open({ tool: "exec", argv: ["sh", "-c", "echo $$; exec sleep 30"] }));
  const pid = (await victim.waitFor(/\d+\n/)).trim();
  await exec(h, ["kill", "-9", pid]);
  const killed = await victim.waitMsg("exit");
  const still = await exec(h, ["echo", "alive"]);
  check("kill -9 of an exec'd process", killed.signal === "KILL" && still.c.text() === "alive\n", JSON.stringify(killed));

  const ptyStream = h.mux.open({ tool: "pty.open", argv: ["sh"], cols: 80, rows: 24 });
  const pty = collect(ptyStream);
  await pty.waitMsg("started");
  await ptyStream.write(0, new TextEncoder().encode("echo pty-$((6*7))\n"));
  await pty.waitFor(/pty-42/);
  check("pty (devpts mounted)", true, JSON.stringify(pty.text().slice(-40)));

  const status = await exec(h, ["cat", "/proc/1/status"]);
  const rss = status.c.text().match(/VmRSS:\s+(\d+) kB/)?.[1];
  const stat1 = async () => {
    const f = (await exec(h, ["cat", "/proc/1/stat"])).c.text().split(") ")[1]!.split(" ");
    return Number(f[11]) + Number(f[12]);
  };
  const ticks0 = await stat1();
  await Bun.sleep(5000);
  const ticks1 = await stat1();
  check("PID 1 idle", true, `VmRSS ${rss} kB; CPU while idle: ${ticks1 - ticks0} ticks in 5 s (includes two execs)`);

  t = performance.now();
  const big = await exec(h, ["head", "-c", "50000000", "/dev/zero"], undefined, 120_000);
  const bytes = big.c.out.reduce((n, b) => n + b.length, 0);
  const secs = (performance.now() - t) / 1000;
  check("50 MB of output", bytes === 50_000_000, `${(bytes / 1e6 / secs).toFixed(1)} MB/s`);

  h.close();
  await h.closed;
  await Bun.sleep(300);
  t = performance.now();
  h = await connectHost(sock);
  await withTimeout(h.hello, 10_000, "hello after reconnect");
  const again = await exec(h, ["echo", "again"]);
  check("reconnect: new hello and exec", again.c.text() === "again\n", `hello ${ms(t)} after reconnecting`);

  // A second reconnect straight away (no pause between close and connect).
  h.close();
  await h.closed;
  h = await connectHost(sock);
  await withTimeout(h.hello, 10_000, "hello after quick reconnect");
  check("quick reconnect", (await exec(h, ["true"])).exit.code === 0);

  collect(h.mux.open({ tool: "exec", argv: ["sleep", "100"] }));
  await Bun.sleep(200);
  t = performance.now();
  h.mux.control({ type: "shutdown", graceMs: 1000 });
  await withTimeout(qemu.exited, 15_000, "QEMU exit after shutdown");
  check("shutdown powers off", qemu.exitCode === 0, `QEMU exited ${Math.round(qemuExitedAt - t)} ms after the shutdown message`);
} catch (err) {
  check("vm check", false, (err as Error).message);
} finally {
  if (qemu.exitCode === null) qemu.kill("SIGKILL");
  await qemu.exited;
  const tail = readFileSync(consoleLog, "utf8").split("\n").slice(-40).join("\n");
  console.log(`--- console.log (tail) ---\n${tail}`);
}
const failed = checks.filter((c) => !c.ok).length;
console.log(failed ? `${failed} of ${checks.length} checks failed` : `all ${checks.length} checks passed`);
process.exit(failed ? 1 : 0);
