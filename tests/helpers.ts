// Drives the compiled dist/hutch as a user would: a private $HUTCH_HOME per
// test file, the real daemon it starts, real bubblewrap boxes.
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  readdirSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sharedMount } from "../host/src/engine/agent-disks.ts";
import { check } from "../shared/src/validate.ts";
import { OpProgress } from "../shared/src/ops.ts";

export const ROOT = join(import.meta.dir, "..");

/** Scratch directories of this test file's process, removed when it exits, whatever its tests did. */
const scratch: string[] = [];
process.on("exit", () => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A new directory in the system's temp dir, removed when the test file's process exits (tests/helpers.ts scratch). */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
}

export const HUTCH = join(ROOT, "dist", "hutch");

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
  out: Uint8Array;
}

export interface Home {
  home: string;
  env: Record<string, string>;
  run(args: string[], opts?: { stdin?: Uint8Array | string | Blob; env?: Record<string, string>; cwd?: string }): Promise<RunResult>;
  spawn(args: string[], opts?: { env?: Record<string, string> }): ReturnType<typeof Bun.spawn>;
  daemonPid(): number | null;
  /** Deletes every box the home's daemon (or its remote) lists. */
  deleteBoxes(): Promise<void>;
  /** Deletes the boxes (unless `boxes: false`: a server's, stopped already), stops the daemon, removes the home. */
  cleanup(opts?: { boxes?: boolean }): Promise<void>;
}

export function makeHome(prefix = "hutch-e2e-"): Home {
  if (!existsSync(HUTCH)) throw new Error(`${HUTCH} is missing: run bun run build`);
  // Short base path: unix socket paths are limited to ~104 bytes.
  const home = mkdtempSync(join(tmpdir(), prefix));
  const env: Record<string, string> = { ...(process.env as Record<string, string>), HUTCH_HOME: home, HUTCH_STOP_TIMEOUT_MS: "3000" };
  const self: Home = {
    home,
    env,
    async run(args, opts = {}) {
      const proc = Bun.spawn([HUTCH, ...args], {
        env: { ...env, ...opts.env },
        ...(opts.cwd ? { cwd: opts.cwd } : {}),
        stdin: opts.stdin === undefined ? "ignore" : typeof opts.stdin === "string" ? new TextEncoder().encode(opts.stdin) : opts.stdin,
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).bytes(), new Response(proc.stderr).text(), proc.exited]);
      return { code, stdout: new TextDecoder().decode(out), stderr: err, out };
    },
    spawn(args, opts = {}) {
      return Bun.spawn([HUTCH, ...args], { env: { ...env, ...opts.env }, stdin: "pipe", stdout: "pipe", stderr: "pipe" });
    },
    daemonPid() {
      try {
        return Number(readFileSync(join(home, "daemon.lock"), "utf8").trim().split(" ")[0]) || null;
      } catch {
        return null;
      }
    },
    async deleteBoxes() {
      // A client of a remote (HUTCH_REMOTE) may have boxes on its own daemon too (`--remote local`): boxes
      // outlive their daemon, so those would keep running after the home is gone.
      for (const where of self.env.HUTCH_REMOTE ? [[], ["--remote", "local"]] : [[]]) {
        const list = await self.run([...where, "box", "list", "--json"]);
        if (list.code !== 0) continue;
        for (const b of JSON.parse(list.stdout) as { name: string }[]) await self.run([...where, "box", "delete", b.name]);
      }
    },
    async cleanup(opts = {}) {
      if (opts.boxes !== false) await self.deleteBoxes();
      const pid = self.daemonPid();
      if (pid) {
        try {
          process.kill(pid, "SIGTERM");
        } catch {
          // already gone
        }
        for (let i = 0; i < 100 && pidAlive(pid); i++) await Bun.sleep(20);
      }
      unmountUnder(home);
      unmountUnder(sharedMount(join(home, "agents")), true);
      rmSync(home, { recursive: true, force: true });
    },
  };
  return self;
}

/**
 * Unmounts whatever is still mounted under dir (a box's disk, when a test
 * left its box behind), deepest first, so removing dir never descends into
 * a mounted filesystem.
 */
export function unmountUnder(dir: string, andItself = false): void {
  const points = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4] ?? "")
    .filter((p) => p.startsWith(`${dir}/`) || (andItself && p === dir))
    .sort((a, b) => b.length - a.length);
  for (const p of points) Bun.spawnSync(["umount", "-l", p]);
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The QEMU processes running for a box (its id is on their command line: -name …,process=hutch-<id>). */
export function qemuFor(boxId: string): number[] {
  return readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "utf8").includes(`process=hutch-${boxId}`);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Pids of live (non-zombie) processes whose environment carries HUTCH_BOX_ID=<id>. */
export function boxPids(boxId: string): number[] {
  const out: number[] = [];
  for (const e of require("node:fs").readdirSync("/proc") as string[]) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z") continue;
      if (readFileSync(`/proc/${e}/environ`, "latin1").includes(`HUTCH_BOX_ID=${boxId}\0`)) out.push(Number(e));
    } catch {
      // exited while we looked
    }
  }
  return out;
}

export async function waitFor<T>(what: string, fn: () => T | Promise<T>, timeoutMs = 15000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last as NonNullable<T>;
    await Bun.sleep(50);
  }
  throw new Error(`timed out waiting for ${what} (last: ${String(last)})`);
}

export const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");

/** Runs hutch on a real local terminal (as a person would), collecting what it prints. */
export function onTerminal(h: Home, args: string[], cols = 80, rows = 24) {
  let screen = "";
  const decoder = new TextDecoder();
  const proc = Bun.spawn([HUTCH, ...args], {
    env: h.env,
    terminal: {
      cols,
      rows,
      data(_t, bytes) {
        screen += decoder.decode(bytes, { stream: true });
      },
    },
  });
  return {
    proc,
    text: () => screen,
    type: (s: string) => proc.terminal!.write(s),
    until: (what: string | RegExp, ms = 15000) =>
      waitFor(`terminal output ${what}`, () => (typeof what === "string" ? screen.includes(what) : what.test(screen)), ms).catch(
        (err: Error) => {
          throw new Error(`${err.message}; the screen ends with ${JSON.stringify(screen.slice(-400))}`);
        },
      ),
  };
}

/**
 * The NDJSON an operation prints with --json (shared/src/ops.ts): every line
 * parsed, and the result's value, which must be the last line.
 */
export function opOutput<T>(stdout: string): { lines: { type: string; [k: string]: unknown }[]; result: T } {
  const lines = stdout
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l) as { type: string; [k: string]: unknown });
  const last = lines.at(-1);
  if (last?.type !== "result") throw new Error(`the last line is not a result: ${JSON.stringify(last)}`);
  return { lines, result: last.value as T };
}

/**
 * The VM image the tests boot: one per machine, in a shared cache
 * ($HUTCH_TEST_IMAGE_HOME/images/default, default /var/tmp/hutch-test-images).
 * Images are the daemon's work, so a throwaway home's daemon builds it, or
 * finds it up to date, seeing the cached one through a symlink; an image it
 * had to rebuild replaces the cached one (copied beside it, then renamed).
 */
/** Copies the test image (testImage below) into a home as its "default" image; returns its manifest. */
export async function installTestImage(
  h: Home,
  opts: { sharedBooted?: boolean } = {},
): Promise<{ kernel: { release?: string; version?: string } | string } & Record<string, unknown>> {
  const image = await testImage();
  mkdirSync(join(h.home, "images"), { recursive: true });
  cpSync(image, join(h.home, "images", "default"), { recursive: true });
  // The booted states of the image's shapes (engine/qemu/booted.ts), shared by every home of the run, and by
  // later runs while the image and guest are the same: a box's first start loads one instead of booting.
  // A file that tests how states are made, or what a boot alone does, keeps its own (sharedBooted: false).
  if (opts.sharedBooted !== false) {
    mkdirSync(join(testImagesDir(), ".booted"), { recursive: true, mode: 0o700 });
    symlinkSync(join(testImagesDir(), ".booted"), join(h.home, "images", ".booted"));
  }
  return JSON.parse(readFileSync(join(h.home, "images/default/manifest.json"), "utf8"));
}

/** Where the test images are cached, for every file and run on the machine. */
const testImagesDir = () => join(process.env.HUTCH_TEST_IMAGE_HOME ?? "/var/tmp/hutch-test-images", "images");

/** `desktop`: the image with the desktop profile (Chromium, Xvfb, …), cached as "desktop". */
export async function testImage(profile: "base" | "desktop" = "base"): Promise<string> {
  const name = profile === "base" ? "default" : profile;
  const cache = testImagesDir();
  const cached = join(cache, name);
  // The whole suite's runner built it, or found it up to date, this run (scripts/test-runner.ts): each file that
  // boots it would only ask a throwaway daemon the same question again (a daemon's start and apt's lists read).
  const checked = (process.env.HUTCH_TEST_IMAGES_CHECKED ?? "").split(",");
  if (checked.includes(profile) && existsSync(join(cached, "manifest.json"))) return cached;
  mkdirSync(cache, { recursive: true });
  const b = makeHome("hutch-imgcache-");
  try {
    const mine = join(b.home, "images", name);
    mkdirSync(join(b.home, "images"));
    if (existsSync(join(cached, "manifest.json"))) symlinkSync(cached, mine);
    // The upgraded tree one profile's build keeps, so the next profile's copies it (image/tree-cache.ts).
    mkdirSync(join(cache, ".trees"), { recursive: true });
    symlinkSync(join(cache, ".trees"), join(b.home, "images", ".trees"));
    const build = Bun.spawn([HUTCH, "image", "build", "--name", name, "--profile", profile], {
      env: b.env,
      stdout: "inherit",
      stderr: "inherit",
    });
    if ((await build.exited) !== 0) throw new Error("hutch image build failed");
    // A rebuild points the name at a new build in the home's store (image/store.ts), no longer at the cache.
    const built = realpathSync(mine);
    if (!existsSync(cached) || built !== realpathSync(cached)) {
      const fresh = `${cached}.tmp-${process.pid}`;
      const old = `${cached}.old-${process.pid}`;
      cpSync(built, fresh, { recursive: true });
      if (existsSync(cached)) renameSync(cached, old);
      renameSync(fresh, cached);
      rmSync(old, { recursive: true, force: true });
    }
  } finally {
    await b.cleanup();
  }
  return cached;
}

/**
 * Copies the upgraded root filesystem the test images' build kept
 * (image/tree-cache.ts) into `h`'s image store, so a rebuild there starts
 * from it as a second build on one machine does. A copy, not a link: the
 * home's last `image rm` removes its kept tree. False when the cache keeps none.
 */
export function installTestTree(h: Home): boolean {
  const from = join(testImagesDir(), ".trees");
  const names = existsSync(from) ? readdirSync(from).filter((n) => !n.startsWith(".")) : [];
  if (names.length === 0) return false;
  const to = join(h.home, "images", ".trees");
  mkdirSync(to, { recursive: true });
  for (const n of names) {
    const cp = Bun.spawnSync(["cp", "-a", join(from, n), join(to, n)]);
    if (cp.exitCode !== 0) throw new Error(`cp -a ${join(from, n)}: ${cp.stderr.toString()}`);
  }
  return true;
}

/**
 * What a client verb run with `--json` may write to stderr: its progress, one
 * checked `{"type":"step",…}` line per step (so an IDE can show it), and
 * nothing else — no warning, no stray text.
 */
export function expectOnlySteps(stderr: string): void {
  const lines = stderr.split("\n").filter((l) => l !== "");
  for (const l of lines) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(l);
    } catch {
      throw new Error(`stderr holds a line that is not a progress step: ${l}`);
    }
    if (!check(OpProgress, parsed) || (parsed as { type: string }).type !== "step")
      throw new Error(`stderr holds a line that is not a progress step: ${l}`);
  }
}

/** git in dir; throws with git's stderr when it fails. */
export function git(dir: string, ...args: string[]): string {
  const r = Bun.spawnSync(["git", ...args], { cwd: dir, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr.toString()}`);
  return r.stdout.toString();
}

/** A new repository at dir (made) on branch main, a user configured, with `files` as its first commit. */
export function newRepo(dir: string, files: Record<string, string>, message = "start"): string {
  mkdirSync(dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  git(dir, "config", "user.email", "dev@example.com");
  git(dir, "config", "user.name", "Dev");
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  git(dir, "add", ".");
  git(dir, "commit", "-qm", message);
  return dir;
}

/** `hutch browser ARGS…` in h: its stdout, or a throw naming the verb, its exit code and stderr. */
export const browserCli =
  (h: Home) =>
  async (args: string[]): Promise<string> => {
    const r = await h.run(["browser", ...args]);
    if (r.code !== 0) throw new Error(`hutch browser ${args.join(" ")}: ${r.code}: ${r.stderr}`);
    return r.stdout;
  };

/** The ref of the first line of a browser snapshot that matches `line` (`- button "Save" [ref=e3]` gives e3). */
export function refIn(snapshot: string, line: RegExp): string {
  const m = snapshot
    .split("\n")
    .find((l) => line.test(l))
    ?.match(/\[ref=(e\d+)\]/);
  if (!m?.[1]) throw new Error(`no ${line} in\n${snapshot}`);
  return m[1];
}
