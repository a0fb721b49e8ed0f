// Per-box resource limits through cgroups: processes (pids), memory and CPU.
// The one hard part is finding where this daemon may make groups, which
// differs by host: cgroup v1 (a hierarchy per controller, cgroupfs, no
// systemd, as on this project's machines) or v2 (one unified hierarchy, on
// servers often under systemd, with the "no processes in inner groups" rule).
// Both are found by reading /proc/self/mountinfo and /proc/self/cgroup, never
// by the OS name, and box groups are made under the daemon's own group, so a
// box never escapes limits the daemon itself runs under:
//   v1: <mount>/<daemon's group>/hutch/<box>, per controller;
//   v2: <mount>/hutch/<box> when the daemon sits in the root group, else
//       <daemon's group>/boxes/<box> after moving the daemon into a leaf
//       <daemon's group>/daemon (what a delegated systemd service may do).
// Each limit is reported as enforced or not, with why, for `hutch doctor`.
import { accessSync, constants, existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const CONTROLLERS = ["pids", "memory", "cpu"] as const;
export type Controller = (typeof CONTROLLERS)[number];

export interface Limits {
  /** CPUs' worth of time (cfs quota); undefined: no cap. */
  cpus?: number;
  memoryBytes?: number;
  pids?: number;
}

/** Where box groups go for one controller, or why they cannot. */
export type Placement =
  | { ok: true; version: 1 | 2; parent: string /** v2, daemon not in the root group: move it to this leaf first. */; leaf?: string }
  | { ok: false; why: string };

export type CgroupPlan = Record<Controller, Placement>;

interface Mount {
  root: string;
  point: string;
  fstype: string;
  /** The superblock's options. */
  options: string[];
  /** This mount's own options ("ro" or "rw" first). */
  mountOptions: string[];
}

export function parseMountinfo(text: string): Mount[] {
  const out: Mount[] = [];
  for (const line of text.split("\n")) {
    const dash = line.indexOf(" - ");
    if (dash < 0) continue;
    const left = line.slice(0, dash).split(" ");
    const [fstype, , superOpts] = line.slice(dash + 3).split(" ");
    if (!fstype || left.length < 5) continue;
    out.push({
      root: unescapeOctal(left[3]!),
      point: unescapeOctal(left[4]!),
      fstype,
      options: (superOpts ?? "").split(","),
      mountOptions: (left[5] ?? "").split(","),
    });
  }
  return out;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeOctal(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}

/** /proc/self/cgroup: "id:controllers:path" lines; v2's is "0::path". */
export function parseSelfCgroup(text: string): { v1: Map<string, string>; v2?: string } {
  const v1 = new Map<string, string>();
  let v2: string | undefined;
  for (const line of text.split("\n")) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === "0" && m[2] === "") v2 = m[3]!;
    else for (const c of m[2]!.split(",")) v1.set(c, m[3]!);
  }
  return { v1, ...(v2 !== undefined ? { v2 } : {}) };
}

/** The group's directory: the mount point plus the path below the mount's own root. */
function groupDir(mount: Mount, path: string): string {
  const rel = mount.root === "/" ? path : path.startsWith(mount.root) ? path.slice(mount.root.length) : null;
  if (rel === null) return "";
  return join(mount.point, rel).replace(/(.)\/+$/, "$1");
}

export interface HostView {
  mountinfo: string;
  selfCgroup: string;
  pid: number;
  uid: number;
  read(path: string): string | null;
  writable(dir: string): boolean;
}

export function liveView(): HostView {
  return {
    mountinfo: readFileSync("/proc/self/mountinfo", "utf8"),
    selfCgroup: readFileSync("/proc/self/cgroup", "utf8"),
    pid: process.pid,
    uid: process.getuid?.() ?? -1,
    read: (p) => {
      try {
        return readFileSync(p, "utf8");
      } catch {
        return null;
      }
    },
    writable: (dir) => {
      try {
        accessSync(dir, constants.W_OK);
        return true;
      } catch {
        return false;
      }
    },
  };
}

/** Where each controller's box groups go on this host. Reads only; changes nothing. */
export function planCgroups(view: HostView): CgroupPlan {
  const mounts = parseMountinfo(view.mountinfo);
  const self = parseSelfCgroup(view.selfCgroup);
  const plan = {} as CgroupPlan;
  const unified = mounts.find((m) => m.fstype === "cgroup2");
  for (const c of CONTROLLERS) {
    const v1 = mounts.find((m) => m.fstype === "cgroup" && m.options.includes(c));
    if (v1) {
      const own = self.v1.get(c);
      const dir = own === undefined ? "" : groupDir(v1, own);
      if (!dir) plan[c] = { ok: false, why: `cgroup v1 ${c}: the daemon's own group is not under ${v1.point}` };
      else if (!view.writable(dir))
        plan[c] = {
          ok: false,
          why: `cgroup v1 ${c}: ${dir} is not writable by this user (run the daemon as root, or give it a group of its own)`,
        };
      else plan[c] = { ok: true, version: 1, parent: join(dir, "hutch") };
      continue;
    }
    if (!unified || self.v2 === undefined) {
      plan[c] = { ok: false, why: `no ${c} controller is mounted (neither a cgroup v1 hierarchy nor cgroup v2)` };
      continue;
    }
    const available = (view.read(join(unified.point, "cgroup.controllers")) ?? "").trim().split(/\s+/);
    if (!available.includes(c)) {
      plan[c] = {
        ok: false,
        why: `cgroup v2 at ${unified.point} does not offer the ${c} controller (it is bound to no hierarchy, or the kernel lacks it)`,
      };
      continue;
    }
    const own = groupDir(unified, self.v2);
    if (!own) {
      plan[c] = { ok: false, why: `cgroup v2: the daemon's group ${self.v2} is outside ${unified.point}` };
      continue;
    }
    if (self.v2 === "/") {
      plan[c] = view.writable(unified.point)
        ? { ok: true, version: 2, parent: join(unified.point, "hutch") }
        : {
            ok: false,
            why: `cgroup v2: ${unified.point} is not writable by this user (run the daemon as root, or as a service with Delegate=yes)`,
          };
      continue;
    }
    if (!view.writable(own)) {
      plan[c] = {
        ok: false,
        why: `cgroup v2: the daemon's group ${own} is not delegated to it (run it as a systemd service with Delegate=yes)`,
      };
      continue;
    }
    const ownControllers = (view.read(join(own, "cgroup.controllers")) ?? "").trim().split(/\s+/);
    if (!ownControllers.includes(c)) {
      plan[c] = {
        ok: false,
        why: `cgroup v2: the parent of ${own} does not pass the ${c} controller down (add it to the parent's cgroup.subtree_control, or Delegate=${c} in the unit)`,
      };
      continue;
    }
    const procs = (view.read(join(own, "cgroup.procs")) ?? "").trim().split(/\s+/).filter(Boolean);
    const onlyUs = procs.every((p) => Number(p) === view.pid);
    const alreadyLeaf = own.endsWith("/daemon") && existsSync(join(own, "..", "boxes"));
    if (alreadyLeaf) plan[c] = { ok: true, version: 2, parent: join(own, "..", "boxes") };
    else if (onlyUs) plan[c] = { ok: true, version: 2, parent: join(own, "boxes"), leaf: join(own, "daemon") };
    else
      plan[c] = {
        ok: false,
        why: `cgroup v2: the daemon shares its group ${own} with other processes, so it cannot hand controllers to box groups (run it as a service of its own with Delegate=yes)`,
      };
  }
  return plan;
}

/** What `hutch doctor` says about one limit. */
export function describePlan(plan: CgroupPlan): Record<Controller, { enforced: boolean; detail: string }> {
  const out = {} as Record<Controller, { enforced: boolean; detail: string }>;
  for (const c of CONTROLLERS) {
    const p = plan[c];
    out[c] = p.ok ? { enforced: true, detail: `cgroup v${p.version}, groups under ${p.parent}` } : { enforced: false, detail: p.why };
  }
  return out;
}

const write = (dir: string, file: string, value: string) => writeFileSync(join(dir, file), value);

function enableSubtree(dir: string, controllers: Controller[]): void {
  const have = readFileSync(join(dir, "cgroup.subtree_control"), "utf8").trim().split(/\s+/);
  const want = controllers.filter((c) => !have.includes(c));
  if (want.length > 0) write(dir, "cgroup.subtree_control", want.map((c) => `+${c}`).join(" "));
}

/** Makes the parents a plan names for these controllers (v2: moves the daemon into its leaf, turns them on). Idempotent. */
export function preparePlan(plan: CgroupPlan, controllers: readonly Controller[] = CONTROLLERS, pid = process.pid): void {
  const v2 = controllers.filter((c) => plan[c].ok && (plan[c] as { version: number }).version === 2);
  for (const c of controllers) {
    const p = plan[c];
    if (!p.ok) continue;
    if (p.version === 1) {
      mkdirSync(p.parent, { recursive: true });
      continue;
    }
    if (p.leaf && !existsSync(join(p.leaf, "cgroup.procs"))) mkdirSync(p.leaf, { recursive: true });
    if (p.leaf) write(p.leaf, "cgroup.procs", String(pid));
  }
  if (v2.length === 0) return;
  const parent = (plan[v2[0]!] as { parent: string }).parent;
  enableSubtree(join(parent, ".."), v2);
  mkdirSync(parent, { recursive: true });
  enableSubtree(parent, v2);
}

/**
 * One box's groups: made with its limits, joined by its first process,
 * removed when it is gone. The cpu controller is used only for a box with a
 * CPU cap: a group of its own costs the scheduler even uncapped (a pipeline
 * through the box lost about a tenth of its throughput to it, measured in
 * scripts/bench/README.md), and without a cap it buys nothing.
 */
export class BoxCgroup {
  private used: readonly Controller[] = ["pids", "memory"];

  constructor(
    readonly plan: CgroupPlan,
    readonly boxId: string,
  ) {}

  private dirsOf(controllers: readonly Controller[]): string[] {
    const out = new Set<string>();
    for (const c of controllers) {
      const p = this.plan[c];
      if (p.ok) out.add(join(p.parent, this.boxId));
    }
    return [...out];
  }

  /** Every directory this box's groups may live in (one per v1 controller; v2 shares one). */
  dirs(): string[] {
    return this.dirsOf(CONTROLLERS);
  }

  private dir(c: Controller): string | null {
    const p = this.plan[c];
    return p.ok ? join(p.parent, this.boxId) : null;
  }

  private v(c: Controller): 1 | 2 {
    return (this.plan[c] as { version: 1 | 2 }).version;
  }

  /** Creates the groups and writes the limits; a limit left undefined is "max". */
  create(limits: Limits): void {
    this.used = limits.cpus ? CONTROLLERS : ["pids", "memory"];
    preparePlan(this.plan, this.used);
    for (const d of this.dirsOf(this.used)) mkdirSync(d, { recursive: true });
    const pids = this.dir("pids");
    if (pids) write(pids, "pids.max", limits.pids ? String(limits.pids) : "max");
    const mem = this.dir("memory");
    if (mem) {
      if (this.v("memory") === 1) {
        const bytes = limits.memoryBytes ? String(limits.memoryBytes) : "-1";
        // memsw (memory + swap) must stay >= the memory limit: raise it first when growing, lower it last when shrinking.
        const memsw = existsSync(join(mem, "memory.memsw.limit_in_bytes"));
        if (memsw) write(mem, "memory.memsw.limit_in_bytes", "-1");
        write(mem, "memory.limit_in_bytes", bytes);
        if (memsw) write(mem, "memory.memsw.limit_in_bytes", bytes);
      } else {
        write(mem, "memory.max", limits.memoryBytes ? String(limits.memoryBytes) : "max");
        // The limit is the box's whole footprint: it cannot push its pages into the host's swap instead.
        if (existsSync(join(mem, "memory.swap.max"))) write(mem, "memory.swap.max", limits.memoryBytes ? "0" : "max");
      }
    }
    const cpu = this.used.includes("cpu") ? this.dir("cpu") : null;
    if (cpu) {
      const period = 100_000;
      const quota = limits.cpus ? Math.max(1000, Math.round(limits.cpus * period)) : -1;
      if (this.v("cpu") === 1) {
        write(cpu, "cpu.cfs_period_us", String(period));
        write(cpu, "cpu.cfs_quota_us", String(quota));
      } else {
        write(cpu, "cpu.max", `${quota < 0 ? "max" : quota} ${period}`);
      }
    }
  }

  /** Moves a process (all its threads) into every group of the box. */
  attach(pid: number): void {
    for (const d of this.dirsOf(this.used)) write(d, "cgroup.procs", String(pid));
  }

  /** The box's groups that still exist. */
  existing(): string[] {
    return this.dirs().filter((d) => existsSync(d));
  }

  /**
   * Removes the groups once their processes are gone (a group with tasks
   * cannot be removed: EBUSY). Called once the box has ended: members still
   * there half a second on (a fork bomb's children, which die one by one on a
   * loaded host after the box's init is gone) are killed at once through
   * cgroup v2's cgroup.kill, so a stopped box has no process left.
   */
  async remove(timeoutMs = 5000): Promise<string[]> {
    const start = Date.now();
    let killed = false;
    for (;;) {
      const left = this.existing().filter((d) => {
        try {
          rmdirSync(d);
          return false;
        } catch (err) {
          return (err as NodeJS.ErrnoException).code !== "ENOENT";
        }
      });
      if (left.length === 0 || Date.now() > start + timeoutMs) return left;
      if (!killed && Date.now() > start + 500) {
        killed = true;
        for (const d of left) {
          try {
            writeFileSync(join(d, "cgroup.kill"), "1");
          } catch {
            // cgroup v1, or a kernel before 5.14: the wait goes on.
          }
        }
      }
      await Bun.sleep(25);
    }
  }

  /** Current use, for `box info`. */
  usage(): { memoryBytes?: number; pids?: number } {
    const read = (d: string | null, f: string) => {
      if (!d) return undefined;
      try {
        const n = Number(readFileSync(join(d, f), "utf8").trim());
        return Number.isFinite(n) ? n : undefined;
      } catch {
        return undefined;
      }
    };
    const mem = this.dir("memory");
    const memoryBytes = read(mem, mem && this.v("memory") === 1 ? "memory.usage_in_bytes" : "memory.current");
    const pids = read(this.dir("pids"), "pids.current");
    return { ...(memoryBytes !== undefined ? { memoryBytes } : {}), ...(pids !== undefined ? { pids } : {}) };
  }
}

let cached: CgroupPlan | undefined;

/** This host's plan, found once per process. */
export function hostCgroups(): CgroupPlan {
  cached ??= planCgroups(liveView());
  return cached;
}
