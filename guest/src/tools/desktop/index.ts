// desktop.*: an Xvfb display in the box, started on the first desktop.start,
// its DISPLAY handed to every process started afterwards. Input goes through
// xdotool, screenshots through xwd (converted to PNG here). Input has one
// owner: the first to send input holds it, others are refused until it is
// released or stolen, so two actors never type into one window at once.
import { Chan, type DesktopInfo } from "@hutch/shared/wire";
import type { GuestConfig } from "../../config.ts";
import type { Logger } from "../../log.ts";
import type { ProcessTable } from "../../procs.ts";
import { ToolError, type Replier, type Req } from "../base.ts";
import { spawnEnv, spawnIdentity } from "../spawn.ts";
import { decodeXwd, encodePng } from "./xwd.ts";

/** XGA: what computer-use models are advised to read without scaling. */
const DEFAULT_SIZE = { width: 1024, height: 768 };
const START_TIMEOUT_MS = 15_000;
const RUN_TIMEOUT_MS = 30_000;
const OUTPUT_MAX = 64 * 1024 * 1024;
const ANONYMOUS = "host";

interface Display {
  info: DesktopInfo;
  proc: Bun.Subprocess;
}

/** The xdotool argv for one input request. */
export function xdotoolArgs(req: Req<"desktop.input">): string[] {
  const need = (v: number | undefined, what: string): string => {
    if (v === undefined) throw new ToolError("invalid", `${req.action} needs ${what}`);
    return String(v);
  };
  const button = String(req.button ?? 1);
  switch (req.action) {
    case "move":
      return ["mousemove", need(req.x, "x"), need(req.y, "y")];
    case "click":
      return [...(req.x !== undefined || req.y !== undefined ? ["mousemove", need(req.x, "x"), need(req.y, "y")] : []), "click", button];
    case "drag":
      return [
        "mousemove",
        need(req.x, "x"),
        need(req.y, "y"),
        "mousedown",
        button,
        "mousemove",
        need(req.toX, "toX"),
        need(req.toY, "toY"),
        "mouseup",
        button,
      ];
    case "key":
      if (!req.keys) throw new ToolError("invalid", "key needs keys (X keysym names: Return, ctrl+c, a)");
      return ["key", "--delay", "30", ...req.keys];
    case "type":
      if (req.text === undefined) throw new ToolError("invalid", "type needs text");
      return ["type", "--delay", "20", "--", req.text];
  }
}

export class DesktopTable {
  private display: Promise<Display> | undefined;
  private owner: string | null = null;

  constructor(
    private readonly config: GuestConfig,
    private readonly log: Logger,
    /** Every child goes in the guest's process table, so PID 1's reaper leaves it to Bun. */
    private readonly procs: ProcessTable,
  ) {}

  private who(): { uid?: number; gid?: number; env: Record<string, string> } {
    const w = spawnIdentity(this.config, { argv: [] });
    return "env" in w ? w : { env: {} };
  }

  private async launch(width: number, height: number): Promise<Display> {
    const who = this.who();
    let proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
    try {
      proc = Bun.spawn(
        [
          "Xvfb",
          "-displayfd",
          "1",
          "-screen",
          "0",
          `${width}x${height}x24`,
          "-nolisten",
          "tcp",
          "-nolisten",
          "unix",
          // Without it the server resets whenever its last client leaves (each xdotool call of
          // desktop.windows or desktop.input), and a client connecting meanwhile, such as an agent's
          // first window, is refused: "Can't open display" in 2 of 45 tries here, 0 with it.
          "-noreset",
          "+extension",
          "XTEST",
        ],
        {
          env: spawnEnv(this.config, { argv: [] }, {}, who),
          uid: who.uid,
          gid: who.gid,
          stdin: "ignore",
          stdout: "pipe",
          stderr: "pipe",
        },
      );
    } catch {
      throw new ToolError("unavailable", "no Xvfb in this box: install xvfb (a QEMU box needs the desktop image profile)");
    }
    this.procs.add(proc);
    const reader = proc.stdout.getReader();
    let text = "";
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!text.includes("\n")) {
      const next = await Promise.race([reader.read(), Bun.sleep(Math.max(0, deadline - Date.now())).then(() => "timeout" as const)]);
      if (next === "timeout" || next.done) {
        proc.kill("SIGKILL");
        const err = await new Response(proc.stderr).text().catch(() => "");
        throw new ToolError("failed", `Xvfb did not start: ${err.slice(0, 500) || "no display number within 15 s"}`);
      }
      text += new TextDecoder().decode(next.value);
    }
    reader.releaseLock();
    const display = `:${Number.parseInt(text, 10)}`;
    this.config.serviceEnv.DISPLAY = display;
    void proc.exited.then((code) => {
      this.log.info("Xvfb exited", { code, display });
      if (this.config.serviceEnv.DISPLAY === display) delete this.config.serviceEnv.DISPLAY;
      this.display = undefined;
      this.owner = null;
    });
    this.log.info("desktop started", { display, width, height });
    return { info: { display, width, height }, proc };
  }

  private ensure(width = DEFAULT_SIZE.width, height = DEFAULT_SIZE.height): Promise<Display> {
    if (!this.display) {
      const p = this.launch(width, height);
      this.display = p;
      p.catch(() => {
        if (this.display === p) this.display = undefined;
      });
    }
    return this.display;
  }

  private running(): Promise<Display> {
    if (!this.display) throw new ToolError("not_ready", "the desktop is not started; start it: desktop.start (hutch desktop start BOX)");
    return this.display;
  }

  /** Runs an X client against the display; its stdout, bounded. */
  private async run(argv: string[], display: string): Promise<Uint8Array> {
    const who = this.who();
    let proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
    try {
      proc = Bun.spawn(argv, {
        env: { ...spawnEnv(this.config, { argv }, {}, who), DISPLAY: display },
        uid: who.uid,
        gid: who.gid,
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
    } catch {
      throw new ToolError("unavailable", `no ${argv[0]} in this box: install ${argv[0] === "xwd" ? "x11-apps" : argv[0]}`);
    }
    this.procs.add(proc);
    const timer = setTimeout(() => proc.kill("SIGKILL"), RUN_TIMEOUT_MS);
    const [out, err, code] = await Promise.all([new Response(proc.stdout).bytes(), new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(timer);
    if (code !== 0) throw new ToolError("failed", `${argv[0]} failed (${code}): ${err.trim().slice(0, 500)}`);
    if (out.length > OUTPUT_MAX) throw new ToolError("failed", `${argv[0]} wrote more than ${OUTPUT_MAX} bytes`);
    return out;
  }

  private reply(stream: Replier, value: unknown): void {
    stream.msg({ type: "result", value });
    stream.close();
  }

  async start(stream: Replier, req: Req<"desktop.start">): Promise<void> {
    this.reply(stream, (await this.ensure(req.width, req.height)).info);
  }

  async screenshot(stream: Replier): Promise<void> {
    const d = await this.running();
    const png = encodePng(decodeXwd(await this.run(["xwd", "-root", "-silent"], d.info.display)));
    for (let at = 0; at < png.length; at += 60_000) if (!(await stream.write(Chan.stdout, png.subarray(at, at + 60_000)))) return;
    stream.eof(Chan.stdout);
    this.reply(stream, { width: d.info.width, height: d.info.height, size: png.length });
  }

  async windows(stream: Replier): Promise<void> {
    const d = await this.running();
    // search exits 1 when nothing matches: no windows is not an error.
    const ids = await this.run(["sh", "-c", "xdotool search --onlyvisible --name '' 2>/dev/null || true"], d.info.display);
    const out = [];
    for (const id of new TextDecoder()
      .decode(ids)
      .split("\n")
      .filter((l) => /^\d+$/.test(l))
      .slice(0, 256)) {
      const shell = new TextDecoder().decode(
        await this.run(["xdotool", "getwindowgeometry", "--shell", id], d.info.display).catch(() => new Uint8Array()),
      );
      const name = new TextDecoder()
        .decode(await this.run(["xdotool", "getwindowname", id], d.info.display).catch(() => new Uint8Array()))
        .trim();
      const g = Object.fromEntries(
        shell
          .split("\n")
          .map((l) => l.split("="))
          .filter((kv) => kv.length === 2),
      ) as Record<string, string>;
      out.push({
        id: Number(id),
        name: name.slice(0, 1024),
        x: Number(g.X) || 0,
        y: Number(g.Y) || 0,
        width: Math.max(0, Number(g.WIDTH) || 0),
        height: Math.max(0, Number(g.HEIGHT) || 0),
      });
    }
    this.reply(stream, out);
  }

  async input(stream: Replier, req: Req<"desktop.input">): Promise<void> {
    const who = req.owner ?? ANONYMOUS;
    let stolenFrom: string | undefined;
    if (this.owner !== null && this.owner !== who) {
      if (!req.steal)
        throw new ToolError("conflict", `the desktop's input is held by ${this.owner}; wait for it to release it, or take it: steal`);
      stolenFrom = this.owner;
      this.log.info("desktop input stolen", { from: this.owner, to: who });
    }
    const argv = xdotoolArgs(req);
    const d = await this.running();
    this.owner = who;
    await this.run(["xdotool", ...argv], d.info.display);
    this.reply(stream, { owner: this.owner, ...(stolenFrom ? { stolenFrom } : {}) });
  }

  release(stream: Replier, req: Req<"desktop.release">): void {
    const who = req.owner ?? ANONYMOUS;
    if (this.owner !== null && this.owner !== who)
      throw new ToolError("conflict", `the desktop's input is held by ${this.owner}, not ${who}`);
    this.owner = null;
    this.reply(stream, { owner: null });
  }

  async stop(): Promise<void> {
    const d = await this.display?.catch(() => undefined);
    if (!d) return;
    d.proc.kill("SIGTERM");
    await Promise.race([d.proc.exited, Bun.sleep(2000)]);
    d.proc.kill("SIGKILL");
  }
}
