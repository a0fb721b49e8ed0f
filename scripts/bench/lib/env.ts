// What every bench needs around the measurement: the compiled CLI, a
// throwaway HUTCH_HOME with one running box, the ssh peer, and child processes
// that cannot outlive a timeout.
import { parseArgs } from "node:util";
import {
  closeSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

export const repoRoot = join(import.meta.dir, "..", "..", "..");
export const hutchBin = join(repoRoot, "dist", "hutch");
const peerScript = join(import.meta.dir, "..", "ssh-peer.sh");

export function log(msg: string): void {
  process.stderr.write(`bench: ${msg}\n`);
}

export interface RunResult {
  code: number | null;
  signal: string | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  /** Wall time from spawn to exit, in milliseconds. */
  ms: number;
}

export interface RunOptions {
  env?: Record<string, string | undefined>;
  /** Default: no stdin (/dev/null). */
  stdin?: "ignore" | "inherit";
  /** Default: collect stdout. */
  stdout?: "pipe" | "ignore";
  timeoutMs?: number;
  /** Default: this process's working directory. */
  cwd?: string;
}

/**
 * Runs argv in its own process group and times it. On timeout the whole group
 * gets SIGKILL, so a hung pipeline leaves nothing behind.
 */
export async function run(argv: string[], opts: RunOptions = {}): Promise<RunResult> {
  const t0 = performance.now();
  const proc = Bun.spawn(argv, {
    env: opts.env ?? process.env,
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
    stdin: opts.stdin ?? "ignore",
    stdout: opts.stdout ?? "pipe",
    stderr: "pipe",
    detached: true,
  });
  let timedOut = false;
  const timer = opts.timeoutMs
    ? setTimeout(() => {
        timedOut = true;
        try {
          process.kill(-proc.pid, "SIGKILL");
        } catch {
          proc.kill("SIGKILL");
        }
      }, opts.timeoutMs)
    : undefined;
  const [stdout, stderr] = await Promise.all([
    proc.stdout instanceof ReadableStream ? new Response(proc.stdout).text() : Promise.resolve(""),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  const ms = performance.now() - t0;
  clearTimeout(timer);
  return { code: proc.exitCode, signal: proc.signalCode === null ? null : String(proc.signalCode), timedOut, stdout, stderr, ms };
}

/** One line saying how a failed run ended, for error reports. */
/** A flag's value as a positive integer, or exit 2 naming the flag. */
export function positiveInt(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) {
    process.stderr.write(`bench: --${name} ${value}: expected a positive integer\n`);
    process.exit(2);
  }
  return n;
}

/** The flags exec.ts and remote.ts share: `[--json] [--keep-ssh] [--rounds 30] [--runs 3] [--bytes 1 GiB] [--timeout 120]`. */
export function execFlags() {
  const { values: f } = parseArgs({
    options: {
      json: { type: "boolean", default: false },
      "keep-ssh": { type: "boolean", default: false },
      rounds: { type: "string", default: "30" },
      runs: { type: "string", default: "3" },
      bytes: { type: "string", default: String(1024 ** 3) },
      timeout: { type: "string", default: "120" },
    },
  });
  return {
    json: f.json!,
    keepSsh: f["keep-ssh"]!,
    rounds: positiveInt("rounds", f.rounds!),
    runs: positiveInt("runs", f.runs!),
    bytes: positiveInt("bytes", f.bytes!),
    timeoutMs: positiveInt("timeout", f.timeout!) * 1000,
  };
}

/**
 * The two measures exec.ts and remote.ts take of each side: one `true` round
 * trip (wall ms), and `bytes` zeros piped through the side's `cat` into
 * `wc -c`, all in one bash so the bench process stays out of the data path
 * (MB/s). Each returns null on failure, with the failure pushed to errors.
 */
export function execMeasures<S extends string>(
  commandFor: (side: S, cmd: string[]) => string[],
  env: Record<string, string | undefined>,
  errors: string[],
  timeoutMs: number,
) {
  return {
    async roundTrip(side: S): Promise<number | null> {
      const r = await run(commandFor(side, ["true"]), { env, stdout: "ignore", timeoutMs: 30_000 });
      if (r.code === 0) return r.ms;
      errors.push(describeFailure(r, `round trip (${side})`));
      return null;
    },
    async transfer(side: S, bytes: number): Promise<number | null> {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell script; bash expands it
      const script = 'head -c "$BENCH_BYTES" /dev/zero | "$@" | wc -c; echo "${PIPESTATUS[*]}"';
      const r = await run(["bash", "-c", script, "bash", ...commandFor(side, ["cat"])], {
        env: { ...env, BENCH_BYTES: String(bytes) },
        timeoutMs,
      });
      const [count, statuses] = r.stdout.trim().split("\n");
      const what = `throughput (${side}, ${bytes} bytes)`;
      if (r.code !== 0 || statuses !== "0 0 0") {
        errors.push(describeFailure(r, `${what}${statuses ? ` [pipeline statuses ${statuses}]` : ""}`));
        return null;
      }
      if (Number(count) !== bytes) {
        errors.push(`${what}: received ${count} bytes, expected ${bytes}`);
        return null;
      }
      return bytes / 1e6 / (r.ms / 1000);
    },
  };
}

/** The last line of a bench's report: every run fine, or each failure. */
export function runsVerdict(errors: string[]): string {
  return errors.length === 0 ? "all runs OK" : `BROKEN RUN — ${errors.length} failure(s):\n${errors.map((e) => `  - ${e}`).join("\n")}`;
}

/** Runs a bench's main, always cleans up, and exits with main's code (1 when it threw, saying why). */
/**
 * Runs a bench's main and exits with its code, cleaning up once whatever
 * happens: after main returns or throws, or on SIGINT/SIGTERM mid-run (exit
 * 130/143), so no box, daemon or ssh peer outlives the bench.
 */
export async function runBench(main: () => Promise<number>, cleanup: () => Promise<void>): Promise<never> {
  let cleaning: Promise<void> | undefined;
  const once = () => (cleaning ??= cleanup());
  process.on("SIGINT", () => void once().then(() => process.exit(130)));
  process.on("SIGTERM", () => void once().then(() => process.exit(143)));
  let code = 1;
  try {
    code = await main();
  } catch (e) {
    log(`failed: ${e instanceof Error ? e.message : String(e)}`);
  } finally {
    await once();
  }
  process.exit(code);
}

export function describeFailure(r: RunResult, what: string): string {
  const how = r.timedOut ? "timed out" : r.signal ? `died of ${r.signal}` : `exited ${r.code}`;
  const err = r.stderr.trim().split("\n").slice(-3).join(" | ");
  return `${what} ${how}${err ? `: ${err}` : ""}`;
}

export function requireHutch(binary = hutchBin): void {
  try {
    statSync(binary);
  } catch {
    process.stderr.write(`bench: ${binary} is missing; build it first: cd ${repoRoot} && bun run build\n`);
    process.exit(1);
  }
}

/**
 * A fresh HUTCH_HOME with its own daemon; dispose() leaves no trace of it.
 * The CLI runs from a private copy of dist/hutch taken at the start (the
 * daemon is the same executable), so a rebuild during the run cannot mix two
 * builds into one set of numbers.
 */
export class HutchHome {
  readonly dir = mkdtempSync(join(tmpdir(), "hutch-bench-home-"));
  private readonly binDir = mkdtempSync(join(tmpdir(), "hutch-bench-bin-"));
  readonly bin = join(this.binDir, "hutch");
  readonly env: Record<string, string | undefined> = { ...process.env, HUTCH_HOME: this.dir };
  private boxes: string[] = [];
  private serving?: Bun.Subprocess;

  /** The pid of the `hutch serve` that serve() started, while it runs. */
  get servePid(): number | undefined {
    return this.serving?.exitCode === null ? this.serving.pid : undefined;
  }

  /** `binary`: the build under test (default dist/hutch), e.g. an older build kept to compare against. */
  constructor(readonly binary = hutchBin) {
    copyFileSync(binary, this.bin);
  }

  /** sha256 of the build under test, first 16 hex digits. */
  async buildId(): Promise<string> {
    const hasher = new Bun.CryptoHasher("sha256");
    for await (const chunk of Bun.file(this.bin).stream()) hasher.update(chunk);
    return hasher.digest("hex").slice(0, 16);
  }

  hutch(args: string[], opts: Omit<RunOptions, "env"> = {}): Promise<RunResult> {
    return run([this.bin, ...args], { ...opts, env: this.env });
  }

  /** POSTs JSON to this home's daemon over its socket and returns the JSON answer. */
  async post(path: string, body: unknown): Promise<unknown> {
    const res = await fetch(`http://localhost${path}`, {
      method: "POST",
      unix: join(this.dir, "hutch.sock"),
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return res.json();
  }

  /**
   * Starts `hutch serve` in this home on a free loopback port (`args` after
   * --listen: --cluster, --node, ...), its output in serve.log, and resolves
   * once the daemon is ready: the TLS URL. dispose() stops it.
   */
  async serve(args: string[] = [], timeoutMs = 120_000): Promise<string> {
    const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = probe.port;
    probe.stop(true);
    const logPath = join(this.dir, "serve.log");
    const fd = openSync(logPath, "a", 0o600);
    const proc = Bun.spawn([this.bin, "serve", "--listen", `127.0.0.1:${port}`, ...args], {
      env: this.env,
      stdin: "ignore",
      stdout: fd,
      stderr: fd,
    });
    closeSync(fd);
    this.serving = proc;
    const deadline = Date.now() + timeoutMs;
    while (!readFileSync(logPath, "utf8").includes("daemon ready")) {
      if (proc.exitCode !== null || Date.now() > deadline)
        throw new Error(
          `hutch serve ${args.join(" ")} did not start (${proc.exitCode === null ? "timed out" : `exited ${proc.exitCode}`}):\n${readFileSync(logPath, "utf8").slice(-2000)}`,
        );
      await Bun.sleep(20);
    }
    return `https://127.0.0.1:${port}`;
  }

  async createBox(name: string, extra: string[] = []): Promise<void> {
    const r = await this.hutch(["box", "create", name, "--start", ...extra], { timeoutMs: 60_000 });
    if (r.code !== 0) throw new Error(describeFailure(r, `hutch box create ${name} --start ${extra.join(" ")}`));
    this.boxes.push(name);
  }

  /**
   * The VM image: the test cache's (tests/helpers.ts testImage), seen through a symlink and found up to date by
   * this home's daemon (images are the daemon's work), or rebuilt here and copied back into the cache.
   */
  async useTestImage(): Promise<void> {
    const cached = join(process.env.HUTCH_TEST_IMAGE_HOME ?? "/var/tmp/hutch-test-images", "images", "default");
    const mine = join(this.dir, "images", "default");
    mkdirSync(join(this.dir, "images"), { recursive: true });
    if (existsSync(join(cached, "manifest.json"))) symlinkSync(cached, mine);
    const build = await this.hutch(["image", "build"], { timeoutMs: 900_000 });
    if (build.code !== 0) throw new Error(describeFailure(build, "hutch image build"));
    // A rebuild points the name at a new build in this home's image store, no longer at the cache.
    const built = realpathSync(mine);
    if (!existsSync(cached) || built !== realpathSync(cached)) {
      rmSync(cached, { recursive: true, force: true });
      mkdirSync(dirname(cached), { recursive: true });
      cpSync(built, cached, { recursive: true });
    }
  }

  /** Deletes every box (those a bench made without createBox too, when it stopped half-way), stops the daemon (TERM, then KILL after 5 s), removes the home. */
  async dispose(): Promise<void> {
    const list = await this.hutch(["box", "list", "--json"], { timeoutMs: 30_000 });
    const names = new Set(this.boxes);
    if (list.code === 0) for (const b of JSON.parse(list.stdout) as { name: string }[]) names.add(b.name);
    for (const name of names) {
      const r = await this.hutch(["box", "delete", name], { timeoutMs: 30_000 });
      if (r.code !== 0) log(describeFailure(r, `cleanup: hutch box delete ${name}`));
    }
    this.boxes = [];
    await this.stopDaemon();
    if (this.serving) {
      // A serve that never took the daemon lock (it failed at start) is stopped here.
      this.serving.kill("SIGTERM");
      const forced = setTimeout(() => this.serving?.kill("SIGKILL"), 5000);
      await this.serving.exited;
      clearTimeout(forced);
    }
    rmSync(this.dir, { recursive: true, force: true });
    rmSync(this.binDir, { recursive: true, force: true });
  }

  private async stopDaemon(): Promise<void> {
    const lock = Bun.file(join(this.dir, "daemon.lock"));
    if (!(await lock.exists())) return;
    const pid = Number.parseInt((await lock.text()).trim(), 10);
    if (!Number.isInteger(pid) || pid <= 0) return;
    if (!signal(pid, "SIGTERM")) return;
    for (let i = 0; i < 50; i++) {
      await Bun.sleep(100);
      if (!signal(pid, 0)) return;
    }
    log(`cleanup: daemon ${pid} still up 5 s after SIGTERM; sending SIGKILL`);
    signal(pid, "SIGKILL");
  }
}

/** kill(2) that reports whether the process existed. */
function signal(pid: number, sig: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

/** The ssh peer of scripts/bench/ssh-peer.sh. */
export const sshPeer = {
  async start(): Promise<string[]> {
    const r = await run(["bash", peerScript, "start"], { timeoutMs: 300_000 });
    if (r.code !== 0) throw new Error(describeFailure(r, "ssh-peer.sh start"));
    const argv = r.stdout.trim().split(/\s+/);
    if (argv[0] !== "ssh") throw new Error(`ssh-peer.sh printed no ssh argv: ${r.stdout.trim()}`);
    return argv;
  },
  async stop(): Promise<void> {
    const r = await run(["bash", peerScript, "stop"], { timeoutMs: 30_000 });
    if (r.code !== 0) log(describeFailure(r, "cleanup: ssh-peer.sh stop"));
  },
  async version(): Promise<string> {
    const r = await run(["ssh", "-V"]);
    return r.stderr.trim();
  },
};
