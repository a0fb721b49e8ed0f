// Which accelerator QEMU boxes use. Proven by booting, never by checking that
// /dev/kvm exists: on this project's development machines it exists, opens,
// and guests hang right after the kernel decompresses. tcg is the last resort,
// and saying so is part of the answer.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { preferredAccel, type Accel, type Platform } from "./args.ts";
import { imagePaths } from "../../image/index.ts";
import { env } from "../../env.ts";
import { log } from "../../log.ts";

const logger = log.create({ service: "accel" });

export interface AccelChoice {
  accel: Accel;
  /** Why this one: the proof, or why the better ones were not used. */
  reason: string;
  probedAt?: string;
}

export interface AccelProbe {
  accel: Accel;
  ok: boolean;
  detail: string;
  ms: number;
}

const CACHE = "accel.json";

/**
 * Boots the image's kernel with the accelerator, init being busybox itself
 * (it prints its banner and exits, the kernel panics, -no-reboot ends QEMU):
 * the banner on the console within the timeout proves the guest ran.
 */
export async function probeAccel(
  home: string,
  accel: Accel,
  arch: string,
  timeoutMs: number,
  size: { cpus: number; memoryMiB: number } = { cpus: 1, memoryMiB: 256 },
): Promise<AccelProbe> {
  const img = imagePaths(home, "default");
  const t0 = performance.now();
  if (!existsSync(img.kernel)) return { accel, ok: false, detail: "no image to boot (hutch image build)", ms: 0 };
  if (accel === "kvm" && !existsSync("/dev/kvm")) return { accel, ok: false, detail: "/dev/kvm does not exist", ms: 0 };
  const dir = mkdtempSync(join(tmpdir(), "hutch-accel-"));
  const consoleLog = join(dir, "console.log");
  const proc = Bun.spawn(
    [
      `qemu-system-${arch}`,
      "-nodefaults",
      "-no-user-config",
      "-display",
      "none",
      "-machine",
      "q35",
      "-accel",
      accel,
      "-cpu",
      accel === "tcg" ? "max" : "host",
      "-smp",
      String(size.cpus),
      "-m",
      `${size.memoryMiB}M`,
      "-kernel",
      img.kernel,
      "-initrd",
      img.initramfs,
      "-append",
      "console=ttyS0 panic=-1 rdinit=/bin/busybox",
      "-serial",
      `file:${consoleLog}`,
      "-no-reboot",
    ],
    { stdout: "ignore", stderr: "pipe" },
  );
  const deadline = Date.now() + timeoutMs;
  let ok = false;
  while (Date.now() < deadline) {
    if (existsSync(consoleLog) && readFileSync(consoleLog, "utf8").includes("BusyBox")) {
      ok = true;
      break;
    }
    if (proc.exitCode !== null) break;
    await Bun.sleep(5);
  }
  const ms = Math.round(performance.now() - t0);
  proc.kill("SIGKILL");
  await proc.exited;
  const stderr = (await new Response(proc.stderr).text()).trim().split("\n").slice(-1)[0] ?? "";
  rmSync(dir, { recursive: true, force: true });
  if (ok) return { accel, ok, detail: `booted a guest to init in ${ms} ms`, ms };
  const detail =
    proc.exitCode !== null && proc.exitCode !== 0 && stderr
      ? `QEMU refused: ${stderr}`
      : `no guest output within ${timeoutMs} ms (the guest hangs: nested virtualization?)`;
  return { accel, ok, detail, ms };
}

/** Probes the platform's accelerator, then tcg; writes the choice for boxes to use (the daemon's alone: it runs the boxes). */
export async function chooseAccel(
  home: string,
  platform: Platform,
  arch = "x86_64",
  timeoutMs = 20_000,
): Promise<{ choice: AccelChoice; probes: AccelProbe[] }> {
  const probes: AccelProbe[] = [];
  const first = preferredAccel(platform);
  const p1 = await probeAccel(home, first, arch, timeoutMs);
  probes.push(p1);
  let choice: AccelChoice;
  if (p1.ok) choice = { accel: first, reason: p1.detail };
  else {
    const p2 = await probeAccel(home, "tcg", arch, Math.max(timeoutMs, 30_000));
    probes.push(p2);
    choice = p2.ok
      ? { accel: "tcg", reason: `${first} did not work (${p1.detail}); using tcg, software emulation: every box is much slower` }
      : { accel: "tcg", reason: `nothing booted: ${first}: ${p1.detail}; tcg: ${p2.detail}` };
  }
  choice.probedAt = new Date().toISOString();
  writeFileSync(join(home, CACHE), JSON.stringify(choice));
  return { choice, probes };
}

/** The accelerator for a box: forced by HUTCH_QEMU_ACCEL, else the last proven choice, else probe now. */
export async function resolveAccel(home: string, platform: Platform, arch: string): Promise<AccelChoice> {
  const known = currentAccel(home);
  if (known) return known;
  const { choice } = await chooseAccel(home, platform, arch);
  logger.warn("accelerator chosen by booting", { accel: choice.accel, reason: choice.reason });
  return choice;
}

/** What resolveAccel would answer without probing: forced, or the last proven choice; null if neither. */
export function currentAccel(home: string): AccelChoice | null {
  const forced = env.qemuAccel();
  if (forced) return { accel: forced as Accel, reason: "set by HUTCH_QEMU_ACCEL" };
  try {
    return JSON.parse(readFileSync(join(home, CACHE), "utf8")) as AccelChoice;
  } catch {
    return null;
  }
}
