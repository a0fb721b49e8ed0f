// Child processes of an image build: the host tools it needs (installed from
// apt when missing, since CI starts from a clean machine) and one way to run them.
import { HutchError } from "@hutch/shared";
import { log } from "../log.ts";
import { env } from "../env.ts";

const logger = log.create({ service: "image" });

/** A command and the Debian package that provides it. */
export interface Tool {
  bin: string;
  pkg: string;
}

export const TOOLS = {
  aptGet: { bin: "apt-get", pkg: "apt" },
  aptCache: { bin: "apt-cache", pkg: "apt" },
  dpkgDeb: { bin: "dpkg-deb", pkg: "dpkg" },
  dpkgQuery: { bin: "dpkg-query", pkg: "dpkg" },
  depmod: { bin: "depmod", pkg: "kmod" },
  debootstrap: { bin: "debootstrap", pkg: "debootstrap" },
  chroot: { bin: "chroot", pkg: "coreutils" },
  cp: { bin: "cp", pkg: "coreutils" },
  du: { bin: "du", pkg: "coreutils" },
  mke2fs: { bin: "mke2fs", pkg: "e2fsprogs" },
  qemuImg: { bin: "qemu-img", pkg: "qemu-utils" },
  xz: { bin: "xz", pkg: "xz-utils" },
  umount: { bin: "umount", pkg: "mount" },
} as const satisfies Record<string, Tool>;

export const isRoot = (): boolean => process.getuid?.() === 0;

/** Installs the packages of the missing tools with apt-get, saying why (to `note`); refuses without root. */
export async function ensureTools(
  tools: readonly Tool[],
  why: string,
  note: (text: string) => void = (t) => logger.info(t),
): Promise<void> {
  const missing = tools.filter((t) => !Bun.which(t.bin) && !Bun.which(t.bin, { PATH: "/usr/sbin:/sbin:/usr/bin:/bin" }));
  if (missing.length === 0) return;
  const pkgs = [...new Set(missing.map((t) => t.pkg))];
  const bins = missing.map((t) => t.bin).join(", ");
  if (!isRoot()) {
    throw new HutchError(
      "unavailable",
      `${why} needs ${bins}, which this machine lacks`,
      `install them: sudo apt-get install -y ${pkgs.join(" ")}`,
    );
  }
  note(`${why} needs ${bins}; installing ${pkgs.join(" ")} with apt-get`);
  const install = () =>
    run(["apt-get", "install", "-y", "--no-install-recommends", ...pkgs], { env: { DEBIAN_FRONTEND: "noninteractive" } });
  try {
    await install();
  } catch {
    // A fresh machine may never have fetched its package lists.
    await run(["apt-get", "update"]);
    await install();
  }
}

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string>;
  /** Each line the command writes on stdout or stderr (for progress). */
  onLine?: (line: string) => void;
}

const running = new Set<Bun.Subprocess>();
let aborted = false;

/**
 * Kills every command still running, with all their children (each runs in its
 * own process group: debootstrap leaves dpkg behind otherwise), and refuses to
 * start more, so an interrupted build's files can be removed.
 */
export function abortRunning(): void {
  aborted = true;
  for (const p of running) {
    try {
      process.kill(-p.pid, "SIGTERM");
    } catch {
      p.kill("SIGTERM");
    }
  }
}

async function pump(stream: ReadableStream<Uint8Array>, prefix: string, keep: string[], onLine?: (line: string) => void): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  let partial = "";
  for await (const chunk of stream) {
    const s = decoder.decode(chunk, { stream: true });
    text += s;
    const lines = (partial + s).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      logger.debug(`${prefix} ${line}`);
      keep.push(line);
      if (keep.length > 20) keep.shift();
      onLine?.(line);
    }
  }
  if (partial) {
    keep.push(partial);
    onLine?.(partial);
  }
  return text;
}

/** Runs a command to completion and returns its stdout; a non-zero exit throws with the output's tail. */
export async function run(argv: string[], opts: RunOptions = {}): Promise<string> {
  const name = argv[0]!;
  if (aborted) throw new HutchError("failed", `interrupted before ${name} could start`);
  const proc = Bun.spawn(argv, {
    detached: true,
    cwd: opts.cwd,
    env: { ...env.all(), PATH: `${env.path() ?? ""}:/usr/sbin:/sbin`, ...opts.env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  running.add(proc);
  const tail: string[] = [];
  try {
    const [out] = await Promise.all([
      pump(proc.stdout, `${name}[stdout]:`, tail, opts.onLine),
      pump(proc.stderr, `${name}[stderr]:`, tail, opts.onLine),
    ]);
    const code = await proc.exited;
    if (code !== 0) {
      throw new HutchError(
        "failed",
        `${argv.slice(0, 3).join(" ")} exited ${code}${proc.signalCode ? ` (${proc.signalCode})` : ""}:\n${tail.slice(-8).join("\n")}`,
        "see the full output: hutch --log-level debug image build",
      );
    }
    return out;
  } finally {
    running.delete(proc);
  }
}
