// browser.*: the box's Chromium, started on the first browser.open and shared
// by every tab. A Chromium that dies takes its tabs with it; the next open
// starts a new one. Each handler answers with one result and closes.
import CDP from "chrome-remote-interface";
import { Chan, SNAPSHOT_DEFAULT_BYTES } from "@hutch/shared/wire";
import type { GuestConfig } from "../../config.ts";
import type { Logger } from "../../log.ts";
import type { PathPolicy } from "../../paths.ts";
import type { ProcessTable } from "../../procs.ts";
import { ToolError, type Replier, type Req } from "../base.ts";
import { spawnEnv, spawnIdentity } from "../spawn.ts";
import { startChromium, type Chromium } from "./chromium.ts";
import { Tab, within } from "./tab.ts";

/** A first page load in a tcg VM was measured at ~28 s. */
const NAVIGATE_TIMEOUT_MS = 60_000;
/** Tabs one box may hold open at once. */
const MAX_TABS = 32;

/**
 * A freshly started Chromium (slow under tcg) can hang up on a DevTools
 * request it is not ready for: such a connection error is tried again, a few
 * times, anything else is not.
 */
async function settled<T>(what: string, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const m = (err as Error).message ?? "";
      if (attempt >= 5 || !/socket hang up|ECONNRESET|ECONNREFUSED/.test(m)) throw new ToolError("failed", `${what}: ${m}`);
      await Bun.sleep(500 * attempt);
    }
  }
}

/** Width and height from a PNG's header. */
export function pngSize(png: Uint8Array): { width: number; height: number } {
  const v = new DataView(png.buffer, png.byteOffset, png.byteLength);
  if (png.byteLength < 24) return { width: 0, height: 0 };
  return { width: v.getUint32(16), height: v.getUint32(20) };
}

export class BrowserTable {
  private chromium: Promise<Chromium> | undefined;
  /** The running Chromium's DevTools port, so port.list can leave it out. */
  devtoolsPort: number | undefined;
  private readonly tabs = new Map<string, Tab>();
  private nextTab = 1;

  constructor(
    private readonly config: GuestConfig,
    private readonly paths: PathPolicy,
    private readonly log: Logger,
    private readonly procs: ProcessTable,
  ) {}

  private start(): Promise<Chromium> {
    if (!this.chromium) {
      const who = spawnIdentity(this.config, { argv: [] });
      const id = "uid" in who ? who : {};
      const started = startChromium(spawnEnv(this.config, { argv: [] }, {}, "env" in who ? who : { env: {} }), id, this.log, (p) =>
        this.procs.add(p),
      );
      this.chromium = started;
      started.then(
        (c) => {
          this.devtoolsPort = c.port;
          return c.exited.then(() => {
            this.devtoolsPort = undefined;
            this.log.info("chromium exited", { pid: c.pid });
            for (const t of this.tabs.values()) t.closed = true;
            this.tabs.clear();
            if (this.chromium === started) this.chromium = undefined;
          });
        },
        () => {
          if (this.chromium === started) this.chromium = undefined;
        },
      );
    }
    return this.chromium.catch((err: unknown) => {
      throw new ToolError("unavailable", (err as Error).message);
    });
  }

  private tab(id: string): Tab {
    const t = this.tabs.get(id);
    if (!t || t.closed) {
      this.tabs.delete(id);
      throw new ToolError("not_found", `no tab ${id} (closed, or the browser restarted); list them: browser.tabs`);
    }
    return t;
  }

  /** Bytes on chan 1, then its eof; false when the host went away. */
  private async send(stream: Replier, bytes: Uint8Array): Promise<boolean> {
    for (let at = 0; at < bytes.length; at += 60_000) if (!(await stream.write(Chan.stdout, bytes.subarray(at, at + 60_000)))) return false;
    stream.eof(Chan.stdout);
    return true;
  }

  private reply(stream: Replier, value: unknown): void {
    stream.msg({ type: "result", value });
    stream.close();
  }

  async open(stream: Replier, req: Req<"browser.open">): Promise<void> {
    if (this.tabs.size >= MAX_TABS) throw new ToolError("conflict", `${MAX_TABS} tabs are open already; close one: browser.close`);
    const c = await this.start();
    const target = await settled("opening a tab", () =>
      within(30_000, "opening a tab", CDP.New({ port: c.port, host: "127.0.0.1", url: "about:blank" })),
    );
    const id = `tab_${this.nextTab++}`;
    const tab = await settled("connecting to the tab", () => Tab.attach(id, c.port, target.id));
    this.tabs.set(id, tab);
    if (req.url) await tab.navigate(req.url, req.timeoutMs ?? NAVIGATE_TIMEOUT_MS);
    this.reply(stream, await tab.info());
  }

  /** The last opened tab still open: what a call that names none acts on (as the host's clients do). */
  lastTab(): string | undefined {
    let last: string | undefined;
    for (const t of this.tabs.values()) if (!t.closed) last = t.id;
    return last;
  }

  async list(stream: Replier): Promise<void> {
    const out = [];
    for (const t of this.tabs.values()) if (!t.closed) out.push(await t.info().catch(() => ({ tab: t.id, url: "", title: "" })));
    this.reply(stream, out);
  }

  async navigate(stream: Replier, req: Req<"browser.navigate">): Promise<void> {
    const tab = this.tab(req.tab);
    await tab.navigate(req.url, req.timeoutMs ?? NAVIGATE_TIMEOUT_MS);
    this.reply(stream, await tab.info());
  }

  async close(stream: Replier, req: Req<"browser.close">): Promise<void> {
    const tab = this.tab(req.tab);
    const info = await tab.info().catch(() => ({ tab: tab.id, url: "", title: "" }));
    this.tabs.delete(req.tab);
    await tab.close();
    const c = await this.chromium;
    if (c) await CDP.Close({ port: c.port, host: "127.0.0.1", id: tab.targetId }).catch(() => {});
    this.reply(stream, info);
  }

  async snapshot(stream: Replier, req: Req<"browser.snapshot">): Promise<void> {
    const tab = this.tab(req.tab);
    const { text, ...view } = await tab.snapshot({
      maxBytes: req.maxBytes ?? SNAPSHOT_DEFAULT_BYTES,
      delta: req.delta ?? false,
      more: req.more,
    });
    const bytes = new TextEncoder().encode(text);
    if (!(await this.send(stream, bytes))) return;
    this.reply(stream, { tab: tab.id, ...view, size: bytes.length });
  }

  async act(stream: Replier, req: Req<"browser.act">): Promise<void> {
    const tab = this.tab(req.tab);
    const files = req.paths ? await Promise.all(req.paths.map((p) => this.paths.resolve(p))) : undefined;
    await tab.act({ ...req, files });
    this.reply(stream, await tab.info());
  }

  async wait(stream: Replier, req: Req<"browser.wait">): Promise<void> {
    const tab = this.tab(req.tab);
    const waitedMs = await tab.waitFor(req, req.timeoutMs ?? 10_000);
    this.reply(stream, { tab: tab.id, waitedMs });
  }

  async screenshot(stream: Replier, req: Req<"browser.screenshot">): Promise<void> {
    const png = await this.tab(req.tab).screenshot(req);
    if (!(await this.send(stream, png))) return;
    this.reply(stream, { ...pngSize(png), size: png.length });
  }

  console(stream: Replier, req: Req<"browser.console">): void {
    this.reply(stream, this.tab(req.tab).console.slice(-1000));
  }

  network(stream: Replier, req: Req<"browser.network">): void {
    this.reply(
      stream,
      this.tab(req.tab).network.map(({ id: _id, ...n }) => n),
    );
  }

  /** On shutdown: the browser goes with the guest. */
  async stop(): Promise<void> {
    const c = await this.chromium?.catch(() => undefined);
    for (const t of this.tabs.values()) await t.close();
    this.tabs.clear();
    await c?.stop();
  }
}
