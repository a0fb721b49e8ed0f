// `hutch doctor`, in the daemon, so it tries the machine that runs the boxes:
// each engine is probed (cheap checks), then proven by starting a throwaway
// box and running `true` in it, the only proof that counts (a VM box may start
// from the booted state of its shape or a warm pool's box: it is a box that
// runs a command either way). QEMU's accelerators are proven by booting a
// guest with each, and the choice is recorded for boxes to use.
// Every check is reported as soon as it is known; the report ends with which
// limits each engine enforces on this host.
import { HutchError, type DoctorCheck, type DoctorReport, type EngineName, type OpReport } from "@hutch/shared";
import type { BoxService } from "../box/service.ts";
import { execCollect } from "../box/exec.ts";
import type { Engine } from "../engine/types.ts";

export interface DoctorDeps {
  boxes: BoxService;
  /** By name, in the order they are checked (process, then qemu). */
  engines: Record<string, Engine>;
  /** Where clients reach this daemon, for the first check; null for a remote caller, who is told nothing of the server's paths or pid. */
  where: string | null;
}

const ACCEL_FIX = {
  kvm: "enable KVM for this host (nested virtualization on a VM host); until then boxes use tcg",
  other: "check the QEMU install: apt-get install -y qemu-system-x86",
};

/** Starts a throwaway box on the engine and runs `true` in it; deletes it whatever happened. */
async function bootCheck(boxes: BoxService, engine: string): Promise<DoctorCheck> {
  const name = `doctor-${crypto.randomUUID().slice(0, 8)}`;
  const t0 = performance.now();
  try {
    await boxes.create({ name, engine: engine as EngineName, start: true }, null);
    const r = await execCollect(boxes.channel(name).channel, ["true"]);
    if (r.error) throw new HutchError("failed", `\`true\` did not run in the box: ${r.error}`);
    if (r.code !== 0) throw new HutchError("failed", `\`true\` exited ${r.code} in the box`);
    return { name: `${engine} engine`, ok: true, detail: `started a box and ran a command in ${Math.round(performance.now() - t0)} ms` };
  } catch (err) {
    return {
      name: `${engine} engine`,
      ok: false,
      detail: `could not start a box: ${(err as Error).message}`,
      fix: (err as HutchError).hint ?? "see the daemon log",
    };
  } finally {
    await boxes.delete(name, null).catch(() => undefined);
  }
}

export async function runDoctor(deps: DoctorDeps, report: OpReport, signal: AbortSignal): Promise<DoctorReport> {
  const checks: DoctorCheck[] = [];
  let n = 0;
  const step = (title: string) => {
    signal.throwIfAborted();
    report({ type: "step", n: ++n, title });
  };
  const add = (c: DoctorCheck) => {
    checks.push(c);
    report({ type: "check", check: c });
  };
  add({ name: "daemon", ok: true, detail: deps.where ? `answers at ${deps.where} (pid ${process.pid})` : "answers" });
  for (const [name, engine] of Object.entries(deps.engines)) {
    step(`probing the ${name} engine`);
    const probe = await engine.probe();
    if (!probe.ok) {
      add({ name: `${name} engine`, ok: false, detail: probe.detail, ...(probe.fix ? { fix: probe.fix } : {}) });
      continue;
    }
    if (engine.proveAccelerators) {
      step("proving each accelerator by booting a guest with it");
      const { choice, probes } = await engine.proveAccelerators();
      for (const p of probes)
        add({
          name: `accelerator ${p.accel}`,
          ok: p.ok,
          detail: p.detail,
          ...(p.ok ? {} : { fix: p.accel === "kvm" ? ACCEL_FIX.kvm : ACCEL_FIX.other }),
        });
      if (choice.accel === "tcg") report({ type: "note", text: `VM boxes will use tcg (software emulation, slow): ${choice.reason}` });
    }
    step(`starting a throwaway ${name} box`);
    add(await bootCheck(deps.boxes, name));
  }
  for (const [name, engine] of Object.entries(deps.engines)) {
    if (engine.capabilities.sleep && engine.sleepDetail)
      add({ name: `sleep: ${name} boxes`, ok: true, detail: await engine.sleepDetail() });
  }
  step("reading which limits this host enforces");
  for (const [name, engine] of Object.entries(deps.engines)) {
    for (const l of engine.limits?.() ?? [])
      add({
        name: `limit: ${name} ${l.name}`,
        ok: l.enforced,
        detail: `${l.enforced ? "enforced" : "not enforced"}: ${l.detail}`,
        ...(l.fix ? { fix: l.fix } : {}),
      });
  }
  return { ok: checks.some((c) => c.name.endsWith("engine") && c.ok), checks };
}
