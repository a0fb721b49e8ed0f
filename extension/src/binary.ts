// Which `hutch` the extension runs, and whether it is new enough. The
// setting wins; then the one on PATH; then the copy bundled in the .vsix for
// this platform. A missing or too old binary is named with the fix.
import { execFile } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

export interface HutchBinary {
  path: string;
  /** Where the path came from, for error messages. */
  source: "the hutch.path setting" | "PATH" | "the copy bundled with the extension";
  version: string;
}

export class BinaryError extends Error {
  constructor(
    message: string,
    /** What the user should do, shown after the message. */
    readonly fix: string,
  ) {
    super(message);
  }
}

const executable = (p: string) => {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** The platform folder of the bundled copy (bin/linux-x64/hutch). */
export function bundledPath(extensionPath: string, platform = process.platform, arch = process.arch): string {
  return join(extensionPath, "bin", `${platform}-${arch}`, platform === "win32" ? "hutch.exe" : "hutch");
}

export function locate(setting: string, extensionPath: string, envPath = process.env.PATH ?? ""): Omit<HutchBinary, "version"> {
  if (setting) {
    if (!executable(setting))
      throw new BinaryError(
        `hutch binary not found: ${setting} (from the hutch.path setting) is missing or not executable`,
        "fix the hutch.path setting, or clear it to use the hutch on PATH",
      );
    return { path: setting, source: "the hutch.path setting" };
  }
  for (const dir of envPath.split(delimiter)) {
    const p = join(dir, process.platform === "win32" ? "hutch.exe" : "hutch");
    if (dir && executable(p)) return { path: p, source: "PATH" };
  }
  const bundled = bundledPath(extensionPath);
  if (executable(bundled)) return { path: bundled, source: "the copy bundled with the extension" };
  throw new BinaryError(
    `hutch binary not found: none on PATH and none bundled for ${process.platform}-${process.arch}`,
    "install hutch (bun run build, then put dist/hutch on PATH) or set hutch.path to its full path",
  );
}

/** a < b for dotted versions (pre-release tags ignored). */
export function olderThan(a: string, b: string): boolean {
  const pa = a.split(/[.-]/).slice(0, 3).map(Number);
  const pb = b.split(/[.-]/).slice(0, 3).map(Number);
  for (let i = 0; i < 3; i++) {
    const x = pa[i] ?? 0;
    const y = pb[i] ?? 0;
    if (x !== y) return x < y;
  }
  return false;
}

function versionOf(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(path, ["--version"], { timeout: 15_000 }, (err, stdout) => (err ? reject(err) : resolve(stdout.trim())));
  });
}

/** Finds the binary and checks it answers with a version at least `min`. */
export async function resolveHutch(setting: string, extensionPath: string, min: string): Promise<HutchBinary> {
  const found = locate(setting, extensionPath);
  let version: string;
  try {
    version = await versionOf(found.path);
  } catch (err) {
    throw new BinaryError(
      `${found.path} (from ${found.source}) did not run: ${(err as Error).message}`,
      "reinstall hutch, or set hutch.path to a working binary",
    );
  }
  if (!/^\d+\.\d+\.\d+/.test(version)) {
    throw new BinaryError(
      `${found.path} (from ${found.source}) is not hutch: --version printed "${version.slice(0, 80)}"`,
      "set hutch.path to the hutch binary",
    );
  }
  if (olderThan(version, min)) {
    throw new BinaryError(
      `hutch ${version} at ${found.path} (from ${found.source}) is too old for this extension, which needs ${min} or newer`,
      "update hutch (rebuild it: bun run build), or set hutch.path to a newer binary",
    );
  }
  return { ...found, version };
}
