// What the host's apt knows: the Debian mirror it uses and the exact versions
// of the packages an image is built from. Parsers are pure; queries run apt-cache.
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import { env } from "../env.ts";
import { TOOLS, isRoot, run } from "./tools.ts";

export const DEFAULT_MIRROR = "http://deb.debian.org/debian";

interface AptSource {
  uris: string[];
  suites: string[];
}

/** One-line sources.list: "deb [opts] URI suite comp…". */
function parseList(text: string): AptSource[] {
  const out: AptSource[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    const m = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)/.exec(line);
    if (m) out.push({ uris: [m[1]!], suites: [m[2]!] });
  }
  return out;
}

/** deb822 .sources: paragraphs of "Key: value" fields. */
function parseDeb822(text: string): AptSource[] {
  const out: AptSource[] = [];
  for (const para of text.split(/\n\s*\n/)) {
    const fields = new Map<string, string>();
    for (const raw of para.split("\n")) {
      const m = /^([A-Za-z-]+):\s*(.*)$/.exec(raw.replace(/#.*/, ""));
      if (m) fields.set(m[1]!.toLowerCase(), m[2]!.trim());
    }
    if (!(fields.get("types") ?? "").split(/\s+/).includes("deb")) continue;
    if ((fields.get("enabled") ?? "yes").toLowerCase() === "no") continue;
    out.push({
      uris: (fields.get("uris") ?? "").split(/\s+/).filter(Boolean),
      suites: (fields.get("suites") ?? "").split(/\s+/).filter(Boolean),
    });
  }
  return out;
}

/**
 * The mirror debootstrap should use: the first "deb" source carrying the plain
 * suite (not -security or -updates, which debootstrap cannot bootstrap from).
 */
export function pickMirror(files: { name: string; text: string }[], suite: string): string | undefined {
  for (const f of files) {
    const sources = f.name.endsWith(".sources") ? parseDeb822(f.text) : parseList(f.text);
    for (const s of sources) {
      if (s.suites.includes(suite) && s.uris[0]) return s.uris[0].replace(/\/+$/, "");
    }
  }
  return undefined;
}

/** /etc/apt/sources.list and sources.list.d/*.{list,sources}, in apt's order. */
function hostSourceFiles(): { name: string; text: string }[] {
  const files: { name: string; text: string }[] = [];
  if (existsSync("/etc/apt/sources.list")) files.push({ name: "sources.list", text: readFileSync("/etc/apt/sources.list", "utf8") });
  const dir = "/etc/apt/sources.list.d";
  if (existsSync(dir)) {
    for (const name of readdirSync(dir).sort()) {
      if (name.endsWith(".list") || name.endsWith(".sources")) files.push({ name, text: readFileSync(join(dir, name), "utf8") });
    }
  }
  return files;
}

/** The mirror the host's apt uses for suite, or Debian's own. */
export function hostMirror(suite: string): string {
  return pickMirror(hostSourceFiles(), suite) ?? DEFAULT_MIRROR;
}

export const DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security";

/** One suite an image's packages come from, and where. */
export interface SuiteSource {
  suite: string;
  uri: string;
}

/**
 * The suites of an image, in apt's order: the release itself, its stable
 * updates and its security updates, each from the mirror the host uses for it
 * (Debian's own where the host names none: security lives on its own archive).
 */
export function imageSources(suite: string, files = hostSourceFiles()): SuiteSource[] {
  const main = pickMirror(files, suite) ?? DEFAULT_MIRROR;
  return [
    { suite, uri: main },
    { suite: `${suite}-updates`, uri: pickMirror(files, `${suite}-updates`) ?? main },
    { suite: `${suite}-security`, uri: pickMirror(files, `${suite}-security`) ?? DEFAULT_SECURITY_MIRROR },
  ];
}

/** apt's name for a suite's Release file under its lists dir: "deb.debian.org_debian-security_dists_bookworm-security_InRelease". */
export function listName(s: SuiteSource): string {
  return `${s.uri
    .replace(/^[a-z]+:\/\//, "")
    .replace(/\/+$/, "")
    .replaceAll("/", "_")}_dists_${s.suite}_InRelease`;
}

/** The Date of a Release file ("Sun, 29 Nov 2026 00:53:13 UTC"), or undefined. */
export function parseReleaseDate(text: string): string | undefined {
  return /^Date:\s*(.+?)\s*$/m.exec(text)?.[1];
}

/** When each suite was last published, as the package lists in listsDir have it; null for a suite they lack. */
export function listDates(sources: SuiteSource[], listsDir = "/var/lib/apt/lists"): (SuiteSource & { date: string | null })[] {
  return sources.map((s) => {
    const path = join(listsDir, listName(s));
    return { ...s, date: (existsSync(path) && parseReleaseDate(readFileSync(path, "utf8"))) || null };
  });
}

/** `apt-cache depends linux-image-amd64` -> "linux-image-6.1.0-57-amd64". */
export function parseKernelDepends(text: string): string | undefined {
  return /^\s*Depends:\s*(linux-image-\d\S*)\s*$/m.exec(text)?.[1];
}

/** Package -> Version from the paragraphs of `apt-cache show --no-all-versions`. */
export function parseVersions(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const para of text.split(/\n\s*\n/)) {
    const pkg = /^Package:\s*(\S+)\s*$/m.exec(para)?.[1];
    const version = /^Version:\s*(\S+)\s*$/m.exec(para)?.[1];
    if (pkg && version && !out.has(pkg)) out.set(pkg, version);
  }
  return out;
}

let updated = false;

/**
 * apt's binary caches at a path of hutch's own. Debian's container images
 * (and machines made from them) set Dir::Cache::pkgcache to "", so every
 * apt-cache call parses the whole package lists again: ~1 s of CPU here,
 * against ~0.2 s from a cache, and an image's up-to-date check makes two.
 * apt checks a cache against the lists it was built from and rebuilds it
 * when they changed, so one kept here is never stale. Where the directory
 * cannot be made, apt runs with its own settings.
 */
let cacheArgs: string[] | undefined;
function cacheOptions(): string[] {
  if (cacheArgs) return cacheArgs;
  const dir = join(env.cacheDir(), "apt");
  try {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
  } catch {
    return [];
  }
  cacheArgs = ["-o", `Dir::Cache::pkgcache=${join(dir, "pkgcache.bin")}`, "-o", `Dir::Cache::srcpkgcache=${join(dir, "srcpkgcache.bin")}`];
  return cacheArgs;
}

/** apt-cache, refreshing the package lists once if the answer is empty (a fresh machine). */
async function aptCache(args: string[]): Promise<string> {
  const query = () => run([TOOLS.aptCache.bin, ...cacheOptions(), ...args]).catch(() => "");
  const out = await query();
  if (out.trim() || updated || !isRoot()) return out;
  updated = true;
  await run([TOOLS.aptGet.bin, "update"]);
  return query();
}

/** The candidate versions apt would install (one apt-cache call); throws naming the packages apt has not got. */
export async function candidateVersions(pkgs: readonly string[]): Promise<Map<string, string>> {
  // apt-cache show fails as a whole when one name is unknown; the answer is then empty and names the missing ones below.
  const versions = parseVersions(await aptCache(["show", "--no-all-versions", ...pkgs]));
  const missing = pkgs.filter((p) => !versions.has(p));
  if (missing.length > 0) {
    throw new HutchError(
      "unavailable",
      `apt has no package ${missing.join(", ")}`,
      "refresh the package lists, then retry: sudo apt-get update && hutch image build",
    );
  }
  return versions;
}

/** The versioned kernel package behind the linux-image-amd64 metapackage. */
export async function kernelPackage(): Promise<string> {
  const pkg = parseKernelDepends(await aptCache(["depends", "linux-image-amd64"]));
  if (!pkg)
    throw new HutchError(
      "unavailable",
      "apt cannot resolve linux-image-amd64 to a kernel package",
      "refresh the package lists, then retry: sudo apt-get update && hutch image build",
    );
  return pkg;
}

/** Downloads one .deb into dir (no root needed) and returns its path. */
export async function download(pkg: string, version: string, dir: string): Promise<string> {
  await run([TOOLS.aptGet.bin, "download", `${pkg}=${version}`], { cwd: dir });
  const deb = readdirSync(dir).find((f) => f.startsWith(`${pkg}_`) && f.endsWith(".deb"));
  if (!deb) throw new HutchError("failed", `apt-get download ${pkg} left no .deb in ${dir}`);
  return join(dir, deb);
}
