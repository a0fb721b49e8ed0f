// Path confinement for the file tools. A request names a path; the guest
// resolves it (relative to the default cwd), follows every symlink on it,
// including a dangling one at the end, and refuses anything that lands outside
// the roots. This guards the host's requests, not the box: code running in the
// box has the guest's uid and could race a check, and needs no guest to read
// its own files.
import { lstat, readlink, realpath } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";

/** Links followed before giving up, as the kernel's MAXSYMLINKS. */
const MAX_LINKS = 40;

export class PathError extends Error {
  constructor(
    readonly code: "denied" | "not_found" | "invalid" | "failed",
    message: string,
  ) {
    super(message);
  }
}

export class PathPolicy {
  private constructor(
    /** Roots as given, for messages. */
    readonly roots: string[],
    /** Roots with their own symlinks resolved, for comparisons. */
    private readonly realRoots: string[],
    readonly cwd: string,
  ) {}

  static async create(roots: string[], cwd: string): Promise<PathPolicy> {
    const real = await Promise.all(roots.map((r) => resolveLinks(resolve(r))));
    return new PathPolicy(roots, real, cwd);
  }

  /** The real path a request names, with every existing symlink resolved; throws PathError("denied") outside the roots. */
  async resolve(requested: string): Promise<string> {
    if (requested.includes("\0")) throw new PathError("invalid", `path ${JSON.stringify(requested)} contains a NUL byte`);
    const real = await resolveLinks(resolve(this.cwd, requested));
    if (!this.realRoots.some((root) => within(real, root))) {
      throw new PathError(
        "denied",
        `path ${JSON.stringify(requested)} resolves to ${real}, outside the allowed roots (${this.roots.join(", ")})`,
      );
    }
    return real;
  }
}

export function within(path: string, root: string): boolean {
  return root === "/" || path === root || path.startsWith(`${root}/`);
}

/**
 * realpath(3) for paths that may not exist yet: the existing prefix is
 * resolved by the kernel, a dangling symlink is followed by hand, and the
 * missing rest is appended as is.
 */
async function resolveLinks(abs: string, depth = 0): Promise<string> {
  if (depth > MAX_LINKS) throw new PathError("failed", `too many levels of symbolic links at ${abs}`);
  try {
    return await realpath(abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ELOOP") throw new PathError("failed", `too many levels of symbolic links at ${abs}`);
    if (code !== "ENOENT" && code !== "ENOTDIR") throw err;
  }
  const parent = dirname(abs);
  if (parent === abs) return abs;
  const here = join(await resolveLinks(parent, depth), basename(abs));
  const st = await lstat(here).catch(() => undefined);
  if (st?.isSymbolicLink()) {
    return resolveLinks(resolve(dirname(here), await readlink(here)), depth + 1);
  }
  return here;
}
