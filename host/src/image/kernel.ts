// The kernel and its modules, taken from Debian's kernel package without
// installing it: apt-get download, dpkg-deb -x into the build's scratch space.
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import { download } from "./apt.ts";
import { moduleName, parseBuiltin, parseModulesDep, planLanes, stripSignature } from "./modules.ts";
import { TOOLS, ensureTools, run } from "./tools.ts";

export interface KernelModule {
  /** File name inside the initramfs (/lib/modules/<file>), uncompressed. */
  file: string;
  data: Uint8Array;
  /** Which of /init's two parallel lanes loads it (modules.order or modules.fs). */
  lane: 0 | 1;
}

export interface Kernel {
  /** uname -r of the kernel, e.g. 6.1.0-57-amd64. */
  release: string;
  vmlinuz: string;
  /** Dependencies first within each lane: the order /init loads them in. */
  modules: KernelModule[];
  builtin: string[];
}

/** busybox insmod takes plain .ko files only. */
async function uncompressed(path: string): Promise<Uint8Array> {
  const bytes = new Uint8Array(await Bun.file(path).arrayBuffer());
  if (path.endsWith(".ko")) return bytes;
  if (path.endsWith(".ko.zst")) return Bun.zstdDecompressSync(bytes);
  if (path.endsWith(".ko.gz")) return Bun.gunzipSync(bytes);
  if (path.endsWith(".ko.xz")) {
    await ensureTools([TOOLS.xz], "decompressing .ko.xz kernel modules");
    const proc = Bun.spawn([TOOLS.xz.bin, "-dc", path], { stdout: "pipe", stderr: "pipe" });
    const out = new Uint8Array(await new Response(proc.stdout).arrayBuffer());
    if ((await proc.exited) !== 0) throw new HutchError("failed", `xz could not decompress ${path}`);
    return out;
  }
  throw new HutchError("failed", `unknown kernel module format: ${path}`);
}

/** Extracts the kernel package and picks out vmlinuz and the modules a box needs. */
export async function fetchKernel(work: string, pkg: string, version: string, onStep: (what: string) => void): Promise<Kernel> {
  const debs = join(work, "debs");
  const tree = join(work, "kernel");
  mkdirSync(debs, { recursive: true });
  onStep(`downloading ${pkg} ${version}`);
  const deb = await download(pkg, version, debs);
  onStep(`extracting ${pkg}`);
  await run([TOOLS.dpkgDeb.bin, "-x", deb, tree]);

  // Debian moved /lib to /usr/lib (merged /usr); accept either layout.
  const base = [join(tree, "lib/modules"), join(tree, "usr/lib/modules")].find(existsSync);
  const release = base ? readdirSync(base)[0] : undefined;
  if (!base || !release) throw new HutchError("failed", `${pkg} has no lib/modules/<release> directory`);
  const vmlinuz = join(tree, "boot", `vmlinuz-${release}`);
  if (!existsSync(vmlinuz)) throw new HutchError("failed", `${pkg} has no boot/vmlinuz-${release}`);
  const modDir = join(base, release);

  // Debian generates modules.dep in the package's postinst, so the .deb has none: run the same depmod on the extracted tree.
  if (!existsSync(join(modDir, "modules.dep"))) {
    onStep("depmod on the extracted modules");
    await run([TOOLS.depmod.bin, "-b", base.endsWith("usr/lib/modules") ? join(tree, "usr") : tree, release]);
  }
  const dep = parseModulesDep(readFileSync(join(modDir, "modules.dep"), "utf8"));
  const builtinPath = join(modDir, "modules.builtin");
  const builtin = parseBuiltin(existsSync(builtinPath) ? readFileSync(builtinPath, "utf8") : "");
  let plan: ReturnType<typeof planLanes>;
  try {
    plan = planLanes(dep, builtin);
  } catch (err) {
    throw new HutchError("failed", `${pkg}: ${(err as Error).message}`);
  }
  const modules: KernelModule[] = [];
  for (const lane of [0, 1] as const) {
    for (const rel of plan.lanes[lane])
      modules.push({ file: `${moduleName(rel)}.ko`, data: stripSignature(await uncompressed(join(modDir, rel))), lane });
  }
  return { release, vmlinuz, modules, builtin: plan.builtin };
}
