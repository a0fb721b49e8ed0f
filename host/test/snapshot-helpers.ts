// What the snapshot tests share: throwaway homes, trees on disk, and a
// description of a tree precise enough to call two of them identical.
import { createHash, randomBytes } from "node:crypto";
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readXattrs } from "../src/snapshot/fsx.ts";
import { type CreateOptions, Store, type StoreLocation } from "../src/snapshot/index.ts";

const temps: string[] = [];

export function tempDir(prefix = "hutch-snap-"): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  temps.push(d);
  return d;
}

export function cleanupTemps(): void {
  for (const d of temps.splice(0)) {
    // A test may leave read-only directories behind; rm as root does not care, others need write bits.
    rmSync(d, { recursive: true, force: true });
  }
}

/** A store location in a fresh home: store, keys and cache in their own directories. */
export function location(home = tempDir(), clock?: () => number): StoreLocation & { home: string } {
  return { home, dir: join(home, "snapshots", "default"), keysDir: join(home, "keys"), cacheDir: join(home, "cache", "snapshots"), clock };
}

export async function newStore(
  opts: Partial<CreateOptions> & { home?: string } = {},
): Promise<{ store: Store; loc: StoreLocation & { home: string } }> {
  const loc = location(opts.home, opts.clock);
  const store = await Store.create({ ...loc, ...opts });
  return { store, loc };
}

/** Deterministic pseudo-random bytes (fast, not crypto). */
export function bytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  const words = new Uint32Array(out.buffer, 0, n >> 2);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x >>> 0;
  }
  for (let i = words.length * 4; i < n; i++) out[i] = i & 0xff;
  return out;
}

/** Text-like content that compresses, distinct per seed. */
export function text(n: number, seed: number): string {
  const words = ["const", "let", "return", "import", "function", "export", "class", "the", "of", "and", "value", "index"];
  let s = `// file ${seed}\n`;
  let x = seed * 2654435761 + 1;
  while (s.length < n) {
    x = (x * 1103515245 + 12345) >>> 0;
    s += words[x % words.length] + (x % 7 === 0 ? "\n" : " ");
  }
  return s.slice(0, n);
}

/** A tree of `dirs` directories with `perDir` small text files each. */
export function smallFiles(root: string, dirs: number, perDir: number, seed = 1): void {
  for (let d = 0; d < dirs; d++) {
    const dir = join(root, `d${Math.floor(d / 10)}`, `m${d % 10}`);
    mkdirSync(dir, { recursive: true });
    for (let f = 0; f < perDir; f++)
      writeFileSync(join(dir, `f${f}.ts`), text(200 + ((d * perDir + f) % 1800), seed * 100_000 + d * perDir + f));
  }
}

export interface Node {
  type: "file" | "dir" | "symlink" | "other";
  mode: number;
  mtimeNs: bigint;
  size?: number;
  sha256?: string;
  target?: string;
  xattrs?: string;
  /** For a file with several links: the first path (in walk order) of its link group. */
  linkOf?: string;
}

/** Every path under root (and root itself as ""), with what a faithful copy must keep. */
export function describeTree(root: string): Map<string, Node> {
  const out = new Map<string, Node>();
  const groups = new Map<string, string>();
  const visit = (rel: string) => {
    const abs = rel === "" ? root : join(root, rel);
    const st = lstatSync(abs, { bigint: true });
    const x = readXattrs(abs);
    const node: Node = {
      type: st.isFile() ? "file" : st.isDirectory() ? "dir" : st.isSymbolicLink() ? "symlink" : "other",
      mode: Number(st.mode & 0o7777n),
      mtimeNs: st.mtimeNs,
      ...(x.length > 0 ? { xattrs: JSON.stringify(x.map(([n, v]) => [n, Buffer.from(v).toString("hex")])) } : {}),
    };
    if (node.type === "file") {
      node.size = Number(st.size);
      node.sha256 = createHash("sha256").update(readFileSync(abs)).digest("hex");
      if (st.nlink > 1n) {
        const key = `${st.dev}:${st.ino}`;
        node.linkOf = groups.get(key) ?? rel;
        if (!groups.has(key)) groups.set(key, rel);
      }
    }
    if (node.type === "symlink") node.target = readlinkSync(abs);
    out.set(rel, node);
    if (node.type === "dir") for (const name of readdirSync(abs).sort()) visit(rel === "" ? name : `${rel}/${name}`);
  };
  visit("");
  return out;
}

/** The differences between two described trees, as readable lines (empty when identical). */
export function treeDiff(a: Map<string, Node>, b: Map<string, Node>, limit = 20): string[] {
  const lines: string[] = [];
  for (const [path, na] of a) {
    const nb = b.get(path);
    if (!nb) lines.push(`missing: ${JSON.stringify(path)}`);
    else {
      for (const k of Object.keys({ ...na, ...nb }) as (keyof Node)[]) {
        if (String(na[k]) !== String(nb[k])) lines.push(`${JSON.stringify(path)}: ${k} ${String(na[k])} != ${String(nb[k])}`);
      }
    }
    if (lines.length >= limit) return lines;
  }
  for (const path of b.keys()) if (!a.has(path)) lines.push(`extra: ${JSON.stringify(path)}`);
  return lines.slice(0, limit);
}

/** Every file under dir, recursively (for raw searches of a store). */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/** Bytes of every file under dir (what a store holds on disk). */
export function bytesUnder(dir: string): number {
  return filesUnder(dir).reduce((n, f) => n + statSync(f).size, 0);
}

export function randomName(): string {
  return randomBytes(6).toString("hex");
}
