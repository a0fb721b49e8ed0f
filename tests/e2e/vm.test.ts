// Real VMs: QEMU under tcg here (nested KVM hangs on these machines, and
// doctor proves it by booting). The image is built once per machine into a
// shared cache and reused by every run.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
  closeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { boxPids, installTestImage, qemuFor, makeHome, onTerminal, opOutput, pidAlive, testImage, waitFor, type Home } from "../helpers.ts";

let h: Home;
let kernelRelease: string;

async function info(name: string) {
  const r = await h.run(["box", "info", name, "--json"]);
  return JSON.parse(r.stdout) as { id: string; state: string; reason?: string; engineInfo?: Record<string, string> };
}

const CONSOLE_BUDGET = 256 * 1024;

beforeAll(async () => {
  h = makeHome("hutch-vm-");
  // A small console budget, so a flood outgrows it within seconds under tcg.
  Object.assign(h.env, { HUTCH_QEMU_ACCEL: "tcg", HUTCH_CONSOLE_MAX_BYTES: String(CONSOLE_BUDGET) });
  // One image per machine, built (or found up to date) once and copied in.
  const { kernel } = await installTestImage(h);
  kernelRelease = typeof kernel === "string" ? kernel : (kernel.release ?? kernel.version ?? "");
}, 900_000);
afterAll(() => h.cleanup(), 120_000);

describe("a VM box", () => {
  test("boots the Debian guest kernel and runs a command", async () => {
    const c = await h.run(["box", "create", "v", "--engine", "qemu", "--memory", "768M"]);
    expect(c.code).toBe(0);
    const r = await h.run(["exec", "v", "--", "uname", "-r"]);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain("hutch box start v");
    expect((await h.run(["box", "start", "v"])).code).toBe(0);
    const u = await h.run(["exec", "v", "--", "uname", "-r"]);
    expect(u.code).toBe(0);
    expect(u.stdout.trim()).toBe(String(kernelRelease));
    const b = await info("v");
    expect(b.engineInfo?.accel).toBe("tcg");
    // PID 1 is hutch-guest, on the real root disk.
    const p1 = await h.run(["exec", "v", "--", "sh", "-c", "cat /proc/1/comm; cat /etc/debian_version; id -un"]);
    expect(p1.stdout.split("\n")[0]).toMatch(/hutch-guest/);
  }, 180_000);

  test("exit codes pass through; a double fork leaves no zombie; kill -9 of a tool process spares PID 1", async () => {
    expect((await h.run(["exec", "v", "--", "sh", "-c", "exit 3"])).code).toBe(3);
    expect((await h.run(["exec", "v", "--", "sh", "-c", "sleep 1 & exit 0"])).code).toBe(0);
    await Bun.sleep(2500);
    const ps = await h.run(["exec", "v", "--", "ps", "-eo", "stat=,pid=,comm="]);
    expect(ps.stdout.split("\n").filter((l) => l.trim().startsWith("Z"))).toEqual([]);
    const killed = await h.run(["exec", "v", "--", "sh", "-c", "kill -9 $$"]);
    expect(killed.code).toBe(137);
    expect((await h.run(["exec", "v", "--", "true"])).code).toBe(0);
  }, 120_000);

  test("a session works in the VM: run, send, log, attach, detach", async () => {
    const r = await h.run(["run", "v", "--detach"]);
    expect(r.code).toBe(0);
    const sid = r.stdout.trim();
    expect((await h.run(["session", "driver", "acquire", sid])).code).toBe(0);
    expect((await h.run(["session", "send", sid, "echo vm-says-$((20+22))"])).code).toBe(0);
    await waitFor("the output in the log", async () => (await h.run(["session", "log", sid])).stdout.includes("vm-says-42"), 60_000);
    expect((await h.run(["session", "driver", "release", sid])).code).toBe(0);
    const w = h.spawn(["session", "watch", sid]);
    let watched = "";
    const reading = (async () => {
      for await (const c of w.stdout as ReadableStream<Uint8Array>) watched += new TextDecoder().decode(c);
    })();
    await waitFor("watch to show the output", () => watched.includes("vm-says-42"), 30_000);
    w.kill();
    await reading.catch(() => undefined);
    const a = onTerminal(h, ["session", "attach", sid]);
    await a.until("vm-says-42", 60_000);
    a.type("echo again-$((1+1))\n");
    await a.until("again-2", 60_000);
    a.type("\x01d");
    expect(await a.proc.exited).toBe(0);
  }, 180_000);

  test("a guest flooding its output does not grow host memory without bound", async () => {
    const rss = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
    const daemon = h.daemonPid()!;
    // Nobody reads this exec's stdout: the guest must stop at its credit, not buffer in the daemon.
    const flood = Bun.spawn([join(import.meta.dir, "../../dist/hutch"), "exec", "v", "--", "cat", "/dev/zero"], {
      env: h.env,
      stdout: "pipe",
      stderr: "ignore",
    });
    await Bun.sleep(1500);
    const first = rss(daemon);
    await Bun.sleep(4000);
    const later = rss(daemon);
    expect(later - first).toBeLessThan(32);
    flood.kill("SIGKILL");
    await flood.exited;
    await waitFor(
      "the box's cat to be gone",
      async () => (await h.run(["exec", "v", "--", "sh", "-c", "ps -eo comm | grep -c '^cat$' || true"])).stdout.trim() === "0",
      30_000,
    );
  }, 120_000);

  test("the VM's root writing its serial console without end: the host keeps the log within its budget, and its tail", async () => {
    const info = JSON.parse((await h.run(["box", "info", "v", "--json"])).stdout) as { id: string };
    const log = join(h.home, "boxes", info.id, "console.log");
    const flood = h.spawn(["exec", "--user", "root", "v", "--", "sh", "-c", "yes flood-from-the-vm-root > /dev/console"]);
    await waitFor("the log to outgrow its budget and be trimmed", () => existsSync(`${log}.1`), 120_000);
    flood.kill("SIGKILL");
    await flood.exited;
    await h.run(["exec", "--user", "root", "v", "--", "sh", "-c", "pkill -x yes || true; echo the-flood-is-over > /dev/console"]);
    // The trimmer looks every second; once the flood stopped, what is left is within the budget.
    await waitFor("the log to be back within its budget", () => statSync(log).size <= CONSOLE_BUDGET, 10_000);
    const kept = readFileSync(`${log}.1`, "utf8");
    expect(kept).toStartWith("[hutch: ");
    expect(kept.length).toBeLessThan(64 * 1024 + 200);
    // What the host shows of the console (the kept tail, then the log) ends with what the VM wrote last.
    await waitFor(
      "the last line to reach the console",
      () => `${readFileSync(`${log}.1`, "utf8")}${readFileSync(log, "utf8")}`.includes("the-flood-is-over"),
      30_000,
    );
  }, 240_000);

  test("files in /workspace survive stop and start", async () => {
    expect((await h.run(["exec", "v", "--", "sh", "-c", "echo durable > /workspace/keep && sync"])).code).toBe(0);
    expect((await h.run(["box", "stop", "v"])).code).toBe(0);
    const id = (await info("v")).id;
    expect(qemuFor(id)).toEqual([]);
    expect((await h.run(["box", "start", "v"])).code).toBe(0);
    expect((await h.run(["exec", "v", "--", "cat", "/workspace/keep"])).stdout).toBe("durable\n");
  }, 240_000);

  test("pause freezes the guest, resume continues it", async () => {
    const loop = "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.2; done' >/dev/null 2>&1 &";
    expect((await h.run(["exec", "v", "--", "sh", "-c", loop])).code).toBe(0);
    await Bun.sleep(1500);
    const read = async () => Number((await h.run(["exec", "v", "--", "cat", "/tmp/count"])).stdout.trim());
    const before = await read();
    const readAt = performance.now();
    expect((await h.run(["box", "pause", "v"])).code).toBe(0);
    const pausedAt = performance.now();
    expect((await info("v")).state).toBe("paused");
    const during = await h.run(["exec", "v", "--", "true"]);
    expect(during.code).toBe(4);
    expect(during.stderr).toContain("hutch box resume v");
    await Bun.sleep(3000);
    const resumeAt = performance.now();
    expect((await h.run(["box", "resume", "v"])).code).toBe(0);
    const after = await read();
    // Frozen, the guest ticks (5 a second) only while it ran: from the first read until the pause answered, and from
    // the resume until the second read answered, however long a loaded host took over those calls. The 3 s and more
    // it was paused would be 15 ticks and more.
    const ran = (pausedAt - readAt + (performance.now() - resumeAt)) / 1000;
    expect(after - before).toBeLessThanOrEqual(Math.ceil(ran * 5) + 2);
    await Bun.sleep(1500);
    expect((await read()) - after).toBeGreaterThan(2);
  }, 180_000);

  test("QEMU runs as the box's own unprivileged host uid, in the box's own cgroups", async () => {
    const v = await info("v");
    const [pid] = qemuFor(v.id);
    const uid = Number(
      Bun.spawnSync(["ps", "-o", "uid=", "-p", String(pid)])
        .stdout.toString()
        .trim(),
    );
    expect(uid).toBe(Number((v as unknown as { engineInfo: Record<string, string> }).engineInfo["host uid"]));
    expect(uid).not.toBe(0);
    const groups = readFileSync(`/proc/${pid}/cgroup`, "utf8");
    expect(groups).toContain(`/hutch/${v.id}`);
  });

  test("SIGKILL of the daemon: the VM is found again, exec works, one QEMU", async () => {
    const id = (await info("v")).id;
    const before = qemuFor(id);
    expect(before.length).toBe(1);
    const d = h.daemonPid()!;
    process.kill(d, "SIGKILL");
    await waitFor("the daemon to die", () => !pidAlive(d));
    const r = await h.run(["exec", "v", "--", "cat", "/workspace/keep"]);
    expect(r.stdout).toBe("durable\n");
    expect(qemuFor(id)).toEqual(before);
  }, 180_000);

  test("the VM's only way out is its broker, over the channel (also after the daemon restarted): denied, then allowed by policy", async () => {
    const connect = 'curl -s -o /dev/null -w "%{http_connect}" --max-time 20 https://registry.npmjs.org/; true';
    const denied = await h.run(["exec", "v", "--", "sh", "-c", connect]);
    expect(denied.stdout).toBe("403");
    const egress = await h.run(["box", "egress", "v", "--json"]);
    expect(JSON.parse(egress.stdout)).toContainEqual(
      expect.objectContaining({ decision: "denied", host: "registry.npmjs.org", port: 443 }),
    );
    expect((await h.run(["box", "policy", "v", "--allow", "registry.npmjs.org"])).code).toBe(0);
    const allowed = await h.run(["exec", "v", "--", "sh", "-c", connect]);
    expect(allowed.stdout).toBe("200");
    // No NIC: nothing else leaves the VM.
    const links = await h.run(["exec", "v", "--", "sh", "-c", "ls /sys/class/net"]);
    expect(links.stdout.trim()).toBe("lo");
  }, 120_000);

  test("delete removes the overlay, sockets, logs and the QEMU process", async () => {
    const id = (await info("v")).id;
    const dir = join(h.home, "boxes", id);
    expect(existsSync(join(dir, "disk.qcow2"))).toBe(true);
    expect((await h.run(["box", "delete", "v"])).code).toBe(0);
    expect(existsSync(dir)).toBe(false);
    expect(qemuFor(id)).toEqual([]);
    expect(boxPids(id)).toEqual([]);
  }, 120_000);
});

describe("doctor with VMs", () => {
  test("proves accelerators by booting, boots a throwaway VM, and says loudly when it falls back to tcg", async () => {
    const r = await h.run(["doctor", "--json"]);
    expect(r.code).toBe(0);
    const doc = opOutput<{ checks: { name: string; ok: boolean; detail: string; fix?: string }[] }>(r.stdout).result;
    const kvm = doc.checks.find((c) => c.name === "accelerator kvm")!;
    expect(kvm).toBeDefined();
    if (!kvm.ok) {
      // Here /dev/kvm exists but guests hang: the probe must have booted to find out, then proven tcg.
      expect(kvm.detail).toMatch(/no guest output within|does not exist|QEMU refused/);
      expect(kvm.fix).toBeTruthy();
      expect(doc.checks.find((c) => c.name === "accelerator tcg")).toMatchObject({ ok: true });
      expect(r.stderr).toContain("VM boxes will use tcg");
    }
    expect(doc.checks.find((c) => c.name === "qemu engine")).toMatchObject({ ok: true });
    const choice = JSON.parse(readFileSync(join(h.home, "accel.json"), "utf8"));
    expect(choice.reason).toBeTruthy();
  }, 180_000);
});

describe("image build through the daemon", () => {
  let dir: string;
  let b: Home;
  beforeAll(async () => {
    // apt-cache is the first tool a build runs: a shim that records its chain of parents, holds it a moment, and runs the real one.
    dir = mkdtempSync(join(tmpdir(), "hutch-apt-shim-"));
    const real = Bun.which("apt-cache")!;
    writeFileSync(
      join(dir, "apt-cache"),
      `#!/bin/sh\np=$$; chain=""\nwhile [ "$p" -gt 1 ]; do p=$(cut -d' ' -f4 /proc/$p/stat); chain="$chain $p"; done\necho "$chain" >> ${dir}/chains\nsleep 1\nexec ${real} "$@"\n`,
    );
    chmodSync(join(dir, "apt-cache"), 0o755);
    b = makeHome("hutch-imgb-");
    b.env.PATH = `${dir}:${process.env.PATH}`;
    // The cached image, up to date with this build's recipe, so the build finds it and stops.
    mkdirSync(join(b.home, "images"));
    symlinkSync(await testImage(), join(b.home, "images", "default"));
  });
  afterAll(async () => {
    await b.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  test("runs in the daemon's worker, streams its progress as NDJSON, and ends with the manifest", async () => {
    // Start the daemon first, so it is not a child of the CLI below.
    expect((await b.run(["box", "list"])).code).toBe(0);
    const daemon = b.daemonPid()!;
    const cli = b.spawn(["image", "build", "--json"]);
    const [out, code] = await Promise.all([new Response(cli.stdout as ReadableStream).text(), cli.exited]);
    expect(code).toBe(0);
    const { lines, result } = opOutput<{ manifest: { name: string; recipeHash: string }; cached: boolean }>(out);
    expect(result.cached).toBe(true);
    expect(result.manifest.name).toBe("default");
    expect(lines.filter((l) => l.type === "step").map((l) => [l.n, l.total, l.title])).toEqual([
      [1, 7, "checking the build tools"],
      [2, 7, "resolving the recipe"],
    ]);
    expect(lines.find((l) => l.type === "done")?.summary).toContain("is up to date");
    // Every apt-cache the build ran descends from the daemon (through its worker), none from the CLI.
    const chains = readFileSync(join(dir, "chains"), "utf8")
      .trim()
      .split("\n")
      .map((l) => l.trim().split(" ").map(Number));
    expect(chains.length).toBeGreaterThanOrEqual(1);
    for (const chain of chains) {
      expect(chain).toContain(daemon);
      expect(chain).not.toContain(cli.pid);
      // apt-cache's parent is the worker, whose parent is the daemon.
      expect(chain[1]).toBe(daemon);
    }
  }, 120_000);

  test("on a terminal-less stderr each step is a line; a second build of the same image is refused while one runs", async () => {
    const runs = () => (existsSync(join(dir, "chains")) ? readFileSync(join(dir, "chains"), "utf8").trim().split("\n").length : 0);
    const before = runs();
    const first = b.spawn(["image", "build"]);
    await waitFor("the first build to reach apt-cache", () => runs() > before, 30_000);
    const second = await b.run(["image", "build"]);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain('image "default" is being built already');
    const [err, code] = await Promise.all([new Response(first.stderr as ReadableStream).text(), first.exited]);
    expect(code).toBe(0);
    expect(err).toContain("[1/7] checking the build tools\n");
    expect(err).toContain("[2/7] resolving the recipe\n");
    expect(err).toMatch(/image "default" is up to date \(recipe [0-9a-f]{12}\); nothing to do in \d/);
  }, 120_000);
});

describe("VM boxes that cannot boot", () => {
  test("an image that does not exist: a clear error and a failed box", async () => {
    const r = await h.run(["box", "create", "noimg", "--engine", "qemu", "--image", "nope", "--start"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no image "nope"');
    expect(r.stderr).toContain("hutch image build");
    expect((await info("noimg")).state).toBe("failed");
  });

  test("a corrupt qcow2 base: a clear error naming it", async () => {
    const src = join(h.home, "images", "default");
    const bad = join(h.home, "images", "broken");
    cpSync(src, bad, { recursive: true });
    const fd = openSync(join(bad, "root.qcow2"), "r+");
    writeSync(fd, Buffer.from("this is not a qcow2 header at all"), 0, 33, 0);
    closeSync(fd);
    const r = await h.run(["box", "create", "corrupt", "--engine", "qemu", "--image", "broken", "--start"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/qcow2|image|corrupt|format/i);
    expect((await info("corrupt")).state).toBe("failed");
    rmSync(bad, { recursive: true, force: true });
  });

  test("a kernel that panics at boot: failed quickly, with the console's tail, and the daemon still serves", async () => {
    const t0 = Date.now();
    const r = await h.run(["box", "create", "panic", "--engine", "qemu", "--kernel-args", "rdinit=/no/such/init", "--start"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("stopped before its guest answered");
    expect(r.stderr).toContain("Kernel panic");
    const b = await info("panic");
    expect(b.state).toBe("failed");
    expect(Date.now() - t0).toBeLessThan(90_000);
    expect(qemuFor(b.id)).toEqual([]);
    expect((await h.run(["box", "list"])).code).toBe(0);
  }, 120_000);
});
