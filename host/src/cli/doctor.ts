import type { CommandModule } from "yargs";
import { HutchError, type Box } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { execInBox } from "../client/exec.ts";
import { printJson } from "./output.ts";
import { setExitCode, type GlobalArgs } from "./main.ts";

interface Check {
  name: string;
  ok: boolean;
  detail: string;
  fix?: string;
}

/** Boots a throwaway box on the engine and runs `true` in it: the only proof that counts. */
async function bootCheck(home: string, engine: string): Promise<Check> {
  const d = await connectDaemon(home);
  const name = `doctor-${crypto.randomUUID().slice(0, 8)}`;
  const t0 = performance.now();
  try {
    await d.request<Box>("POST", "/v1/boxes", { name, engine, start: true });
    const code = await execInBox(d, name, { argv: ["true"] }, {});
    if (code !== 0) throw new HutchError("failed", `\`true\` exited ${code} in the box`);
    return { name: `${engine} engine`, ok: true, detail: `booted a box and ran a command in ${Math.round(performance.now() - t0)} ms` };
  } catch (err) {
    return { name: `${engine} engine`, ok: false, detail: `could not boot a box: ${(err as Error).message}`, fix: (err as HutchError).hint ?? "see the daemon log" };
  } finally {
    await d.request("DELETE", `/v1/boxes/${name}`).catch(() => undefined);
  }
}

export const doctorCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: "doctor",
  describe: "find out what this host can run, by trying it, and how to fix each gap",
  handler: async (a) => {
    // Engines and images are loaded here, not at CLI start-up: every other verb would pay for them.
    const { ProcessEngine } = await import("../engine/process/index.ts");
    const { QemuEngine } = await import("../engine/qemu/index.ts");
    const { chooseAccel } = await import("../engine/qemu/accel.ts");
    const checks: Check[] = [];
    try {
      const d = await connectDaemon(a.home);
      checks.push({ name: "daemon", ok: true, detail: `answers at ${d.transport.where}` });
    } catch (err) {
      checks.push({ name: "daemon", ok: false, detail: (err as Error).message, fix: (err as HutchError).hint });
    }
    const probe = await new ProcessEngine(a.home).probe();
    if (!probe.ok) checks.push({ name: "process engine", ok: false, detail: probe.detail, fix: probe.fix });
    else if (checks[0]!.ok) checks.push(await bootCheck(a.home, "process"));
    const qemu = await new QemuEngine(a.home).probe();
    if (!qemu.ok) checks.push({ name: "qemu engine", ok: false, detail: qemu.detail, fix: qemu.fix });
    else {
      // Prove each accelerator by booting, then boot a real box on the one chosen.
      const { choice, probes } = await chooseAccel(a.home, "linux");
      for (const p of probes) {
        checks.push({ name: `accelerator ${p.accel}`, ok: p.ok, detail: p.detail, ...(p.ok ? {} : { fix: p.accel === "kvm" ? "enable KVM for this host (nested virtualization on a VM host); until then boxes use tcg" : "check the QEMU install: apt-get install -y qemu-system-x86" }) });
      }
      if (choice.accel === "tcg") process.stderr.write(`hutch: VM boxes will use tcg (software emulation, slow): ${choice.reason}\n`);
      if (checks[0]!.ok) checks.push(await bootCheck(a.home, "qemu"));
    }
    for (const [engine, e] of [["process", new ProcessEngine(a.home)], ["qemu", new QemuEngine(a.home)]] as const) {
      for (const l of e.limits()) checks.push({ name: `limit: ${engine} ${l.name}`, ok: l.enforced, detail: `${l.enforced ? "enforced" : "not enforced"}: ${l.detail}`, ...(l.fix ? { fix: l.fix } : {}) });
    }
    const usable = checks.some((c) => c.name.endsWith("engine") && c.ok);
    if (a.json) printJson({ ok: usable, checks });
    else {
      for (const c of checks) process.stdout.write(`${c.ok ? "ok  " : "GAP "} ${c.name}: ${c.detail}${c.fix && !c.ok ? `\n     fix: ${c.fix}` : ""}\n`);
      process.stdout.write(usable ? "this host can run boxes\n" : "this host cannot run boxes yet; fix the gaps above\n");
    }
    setExitCode(usable ? 0 : 1);
  },
};
