// Image builds for the daemon, in a worker process of their own (`hutch
// daemon --image-build BODY`). A build is minutes of root work that needs
// umask 022 for what it puts in the image (the daemon runs under 077), installs
// SIGINT/SIGTERM handlers to remove its staging, and keeps a process-wide
// abort flag for its commands (./tools.ts, ./staging.ts): none of that may
// touch the daemon's process. The worker speaks an operation's lines
// (shared/src/ops.ts) on stdout, one JSON a line, its result or error last;
// the daemon checks each and relays it. Stopping a build is a SIGTERM (its
// commands are killed and its staging removed), a second one if it lingers,
// then SIGKILL.
import {
  check,
  firstError,
  HutchError,
  ImageBuildBody,
  ImageBuildResult,
  ndjson,
  OpLine,
  type OpError,
  type OpReport,
} from "@hutch/shared";
import { log } from "../log.ts";
import { selfArgv } from "../self.ts";
import { BUILD_STEPS, buildImage } from "./build.ts";
import { DEFAULT_IMAGE, checkImageName, overlayUsers, removeImage } from "./store.ts";
import { env } from "../env.ts";

const logger = log.create({ service: "image.build" });

/** How long a stopped build gets to remove its staging before it is asked again, then killed. */
const STOP_GRACE_MS = 10_000;

/** The worker's side: runs the build the daemon asked for (a JSON body), writing its lines on stdout; the exit code. */
export async function runBuildWorker(home: string, raw: string): Promise<number> {
  // Files in the image are read by the box's user: the umask is the build's, not the daemon's.
  process.umask(0o022);
  const write = (line: OpLine<ImageBuildResult>) => process.stdout.write(`${JSON.stringify(line)}\n`);
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    body = undefined;
  }
  if (!check(ImageBuildBody, body)) {
    write({
      type: "error",
      error: { code: "invalid", message: `--image-build: not a build request (${firstError(ImageBuildBody, body)})` },
    });
    return 2;
  }
  let n = 0;
  const progress = {
    step: (title: string) => write({ type: "step", n: ++n, total: BUILD_STEPS, title }),
    detail: (text: string) => write({ type: "detail", text }),
    note: (text: string) => write({ type: "note", text }),
    done: (summary: string) => write({ type: "done", summary }),
  };
  try {
    const r = await buildImage({
      home,
      name: body.name ?? DEFAULT_IMAGE,
      force: body.force ?? false,
      noCache: body.noCache ?? false,
      profile: body.profile ?? "base",
      progress,
    });
    write({ type: "result", value: { manifest: r.manifest, cached: r.cached } });
    return 0;
  } catch (err) {
    const e = err instanceof HutchError ? err : new HutchError("failed", (err as Error).message, "see the daemon log");
    write({ type: "error", error: e.toBody().error as OpError["error"] });
    return 1;
  }
}

/** The daemon's side: at most one build per image name at a time. */
export class ImageBuilds {
  private readonly running = new Set<string>();

  constructor(private readonly home: string) {}

  /**
   * Claims the name or refuses (before any answer starts streaming), and
   * returns the build to run; the claim ends with it.
   */
  claim(body: ImageBuildBody): (report: OpReport, signal: AbortSignal) => Promise<ImageBuildResult> {
    const name = body.name ?? DEFAULT_IMAGE;
    checkImageName(name);
    if (this.running.has(name))
      throw new HutchError(
        "conflict",
        `image "${name}" is being built already`,
        "wait for that build to finish, then run it again if you still need to",
      );
    this.running.add(name);
    return (report, signal) => this.inWorker(body, report, signal).finally(() => this.running.delete(name));
  }

  /** Removes a name, unless it is building or users' boxes are built on it (named through `names`; `own`: the server's own boxes). */
  remove(name: string, names: (ids: string[]) => string, own?: (id: string) => boolean): void {
    if (this.running.has(name))
      throw new HutchError("conflict", `image "${name}" is being built`, "wait for the build to finish, then remove it");
    removeImage(this.home, name, overlayUsers(this.home), names, own);
  }

  private async inWorker(body: ImageBuildBody, report: OpReport, signal: AbortSignal): Promise<ImageBuildResult> {
    const child = Bun.spawn(selfArgv("daemon", "--home", this.home, "--image-build", JSON.stringify(body)), {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      env: env.all(),
    });
    logger.info("build started", {
      name: body.name ?? DEFAULT_IMAGE,
      force: body.force ?? false,
      noCache: body.noCache ?? false,
      worker: child.pid,
    });
    const stop = () => {
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGTERM"), STOP_GRACE_MS).unref();
      setTimeout(() => child.kill("SIGKILL"), 2 * STOP_GRACE_MS).unref();
    };
    signal.addEventListener("abort", stop, { once: true });
    const stderr = (async () => {
      const decoder = new TextDecoder();
      let partial = "";
      for await (const chunk of child.stderr) {
        const lines = (partial + decoder.decode(chunk, { stream: true })).split("\n");
        partial = lines.pop() ?? "";
        for (const l of lines) logger.debug(`image-build[stderr]: ${l}`);
      }
    })();
    const schema = OpLine(ImageBuildResult);
    let last: { ok: true; value: ImageBuildResult } | { ok: false; error: HutchError } | null = null;
    try {
      for await (const line of ndjson(child.stdout)) {
        if (!check(schema, line))
          throw new HutchError(
            "failed",
            `the image build worker wrote a malformed line: ${firstError(schema, line)}`,
            "see the daemon log",
          );
        const l = line as OpLine<ImageBuildResult>;
        if (l.type === "result") last = { ok: true, value: l.value };
        else if (l.type === "error") last = { ok: false, error: new HutchError(l.error.code, l.error.message, l.error.hint, l.error.data) };
        else report(l);
      }
    } finally {
      signal.removeEventListener("abort", stop);
      const code = await child.exited;
      await stderr.catch(() => undefined);
      logger.info("build ended", {
        name: body.name ?? DEFAULT_IMAGE,
        exit: code,
        ...(child.signalCode ? { signal: child.signalCode } : {}),
      });
    }
    if (last?.ok) return last.value;
    if (last) throw last.error;
    throw new HutchError(
      "failed",
      `the image build stopped (exit ${child.exitCode ?? child.signalCode}) before it said how it ended`,
      "see the daemon log",
    );
  }
}
