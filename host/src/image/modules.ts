// Which kernel modules the initramfs carries, and in what order /init loads
// them: read from the kernel's own modules.dep and modules.builtin, never guessed.

/**
 * The drivers a box needs, by module name. crc32c_generic comes before ext4
 * because ext4 asks for "crypto-crc32c" only as a soft dependency (modinfo
 * softdep), which modules.dep does not list, and cannot mount a metadata_csum
 * filesystem without it. virtio_pmem and nd_pmem carry the guest disk as
 * /dev/pmem0 (image/BOOT.md). No virtio_net: boxes have no NIC, their one way
 * out is the broker over the agent channel, and every module costs boot time.
 */
export const DRIVER_MODULES = ["virtio_pci", "virtio_blk", "virtio_pmem", "nd_pmem", "virtio_console", "virtio_rng"] as const;
export const FS_MODULES = ["crc32c_generic", "ext4"] as const;
export const WANTED_MODULES = [...DRIVER_MODULES, ...FS_MODULES] as const;

/** "kernel/drivers/char/hw_random/virtio-rng.ko.xz" -> "virtio_rng" (the kernel treats - and _ alike). */
export function moduleName(path: string): string {
  const base = path.slice(path.lastIndexOf("/") + 1);
  return base.replace(/\.ko(\.(xz|zst|gz))?$/, "").replaceAll("-", "_");
}

/** modules.dep: "path: dep dep …" per line -> path -> its dependencies' paths. */
export function parseModulesDep(text: string): Map<string, string[]> {
  const deps = new Map<string, string[]>();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const colon = line.indexOf(":");
    if (colon < 0) throw new Error(`modules.dep: no ":" in line ${JSON.stringify(line)}`);
    deps.set(
      line.slice(0, colon).trim(),
      line
        .slice(colon + 1)
        .trim()
        .split(/\s+/)
        .filter(Boolean),
    );
  }
  return deps;
}

/** modules.builtin: one path per line -> the set of module names compiled into the kernel. */
export function parseBuiltin(text: string): Set<string> {
  return new Set(
    text
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .map(moduleName),
  );
}

export interface ModulePlan {
  /** Paths relative to the modules directory, every dependency before its dependents. */
  order: string[];
  /** Wanted modules the kernel has built in, so nothing is loaded for them. */
  builtin: string[];
}

/** Orders the wanted modules and everything they depend on, dependencies first, each once. */
export function resolveModules(dep: Map<string, string[]>, builtin: Set<string>, wanted: readonly string[]): ModulePlan {
  const byName = new Map<string, string>();
  for (const path of dep.keys()) byName.set(moduleName(path), path);
  const order: string[] = [];
  const done = new Set<string>();
  const visiting: string[] = [];

  const visit = (path: string): void => {
    if (done.has(path)) return;
    if (visiting.includes(path)) throw new Error(`modules.dep has a dependency cycle: ${[...visiting, path].map(moduleName).join(" -> ")}`);
    const deps = dep.get(path);
    if (!deps) throw new Error(`modules.dep lists ${path} as a dependency but has no line for it`);
    visiting.push(path);
    for (const d of deps) visit(d);
    visiting.pop();
    done.add(path);
    order.push(path);
  };

  const found: string[] = [];
  for (const name of wanted.map((w) => w.replaceAll("-", "_"))) {
    if (builtin.has(name)) {
      found.push(name);
      continue;
    }
    const path = byName.get(name);
    if (!path) throw new Error(`the kernel has no module ${name}, neither loadable nor built in`);
    visit(path);
  }
  return { order, builtin: found };
}

/**
 * The wanted modules as two lanes that /init loads at the same time, one per
 * vCPU: the virtio drivers, and the filesystem stack, which under tcg is a
 * third of the load time on its own (ext4 alone ~0.2 s). Lanes that would
 * share a module (loading it twice at once fails) become one.
 */
export function planLanes(dep: Map<string, string[]>, builtin: Set<string>): { lanes: [string[], string[]]; builtin: string[] } {
  const drivers = resolveModules(dep, builtin, DRIVER_MODULES);
  const fs = resolveModules(dep, builtin, FS_MODULES);
  if (fs.order.some((m) => drivers.order.includes(m))) {
    const all = resolveModules(dep, builtin, WANTED_MODULES);
    return { lanes: [all.order, []], builtin: all.builtin };
  }
  return { lanes: [drivers.order, fs.order], builtin: [...drivers.builtin, ...fs.builtin] };
}

const SIG_MAGIC = new TextEncoder().encode("~Module signature appended~\n");
/** struct module_signature, between the signature and the magic: 8 bytes of ids, then sig_len (big-endian u32). */
const SIG_INFO = 12;

/**
 * A module without its appended signature. The kernel checks a signed module
 * with sha256 and RSA in emulated code: 0.15 s of every tcg boot for the
 * modules /init loads. Checking gains a box nothing: the modules were taken
 * from a Debian package apt verified, the kernel does not enforce signatures
 * (MODULE_SIG_FORCE is off), and root in the box can load modules anyway.
 * The kernel notes the first unsigned module in its log and taints itself 'E'.
 */
export function stripSignature(ko: Uint8Array): Uint8Array {
  const n = ko.length;
  if (n < SIG_MAGIC.length + SIG_INFO) return ko;
  for (let i = 0; i < SIG_MAGIC.length; i++) if (ko[n - SIG_MAGIC.length + i] !== SIG_MAGIC[i]) return ko;
  const info = n - SIG_MAGIC.length - SIG_INFO;
  const sigLen = new DataView(ko.buffer, ko.byteOffset + info + 8, 4).getUint32(0);
  if (sigLen > info) throw new Error(`a module signature of ${sigLen} bytes is longer than the module`);
  return ko.subarray(0, info - sigLen);
}
