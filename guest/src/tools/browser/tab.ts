// One tab: its CDP connection, its refs and its last snapshots.
//
// The invariant: a ref names one element for the life of one document, and
// is never given to another. Refs are numbered per tab and never reused, so a
// ref below the next number that no longer resolves to an element in the page
// (it re-rendered, or the tab navigated) is stale and refused, and a number
// never handed out is refused as unknown. Nothing the page says is trusted to
// be small: names, console lines and URLs are cut, and every CDP call has a
// deadline, so a page that never loads cannot hold a tool stream forever.
import CDP from "chrome-remote-interface";
import type { BrowserAction } from "@hutch/shared/wire";
import { ToolError } from "../base.ts";
import { VIEWPORT } from "./chromium.ts";
import { keyEvent, KEY_NAMES } from "./keys.ts";
import inPage from "./in-page.js" with { type: "text" };
import { deltaLines, page } from "./snapshot.ts";

const CALL_TIMEOUT_MS = 30_000;
/** Lines of one snapshot, and its characters: a page larger than this is cut (said in its last line) or refused. */
const MAX_LINES = 200_000;
const SNAPSHOT_TEXT_MAX = 16 * 1024 * 1024;
/** The in-page script as an expression, whatever the formatter puts at its end. */
const PAGE = `(function () {\nconst page = ${inPage}\nreturn page;\n})()`;
const RING_MAX = 200;
/** Frames from another origin inside frames from another origin, at most this deep. */
const MAX_FRAME_DEPTH = 8;
/** Snapshots kept per tab for `more` cursors and deltas. */
const KEEP_SNAPSHOTS = 4;
/** The tallest full-page screenshot: taller ones are cut (Chromium fails on very tall captures). */
const FULL_PAGE_MAX_PX = 16_000;

function push<T>(ring: T[], item: T): void {
  ring.push(item);
  if (ring.length > RING_MAX) ring.shift();
}

function cutText(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

export async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: Timer | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ToolError("failed", `${what} took longer than ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export interface SnapshotView {
  url: string;
  title: string;
  text: string;
  delta: boolean;
  bytes: number;
  lines: number;
  more?: string;
}

export class Tab {
  /** The next ref number: every ref below it was handed out once. */
  private nextRef = 1;
  /** The isolated worlds the snapshot script runs in, by frame ("" for the main one), for their current documents. */
  private readonly worlds = new Map<string, number>();
  /** The frame each ref of a frame from another origin was handed out in (a ref not here is the main frame's). */
  private readonly refFrames = new Map<string, string>();
  private snapshotSeq = 0;
  private readonly snapshots = new Map<number, string[]>();
  /** The last full snapshot of the current document, for deltas. */
  private lastLines: string[] | undefined;
  readonly console: { level: string; text: string; at: number }[] = [];
  readonly network: { id: string; method: string; url: string; type: string; status?: number; failed?: string }[] = [];
  closed = false;

  private constructor(
    readonly id: string,
    readonly targetId: string,
    private readonly c: CDP.Client,
  ) {}

  static async attach(id: string, port: number, targetId: string): Promise<Tab> {
    // `local`: the protocol descriptor chrome-remote-interface ships, not Chromium's own fetched from
    // /json/protocol on every attach (~1 MB of JSON made and parsed: 0.65-1.1 s on the host, over 30 s
    // under tcg on a loaded machine; every method used here is in it: guest/test/browser-protocol.test.ts).
    const client = await within(CALL_TIMEOUT_MS, "connecting to the tab", CDP({ port, host: "127.0.0.1", target: targetId, local: true }));
    const tab = new Tab(id, targetId, client);
    await tab.listen();
    return tab;
  }

  private async listen(): Promise<void> {
    const c = this.c;
    c.on("disconnect", () => {
      this.closed = true;
    });
    c.Page.frameNavigated(({ frame }) => {
      // A frame's new document: every ref of the old one is stale (their numbers stay spent).
      if (frame.parentId) {
        this.worlds.delete(frame.id);
        return;
      }
      this.worlds.clear();
      this.refFrames.clear();
      this.lastLines = undefined;
    });
    c.Runtime.executionContextDestroyed(({ executionContextId }) => {
      for (const [frame, id] of this.worlds) if (id === executionContextId) this.worlds.delete(frame);
    });
    c.Runtime.executionContextsCleared(() => {
      this.worlds.clear();
    });
    c.Runtime.consoleAPICalled((e) => {
      const text = e.args.map((a) => (a.value !== undefined ? String(a.value) : (a.description ?? a.type))).join(" ");
      push(this.console, { level: e.type, text: cutText(text, 4096), at: e.timestamp });
    });
    c.Runtime.exceptionThrown((e) => {
      const text = e.exceptionDetails.exception?.description ?? e.exceptionDetails.text;
      push(this.console, { level: "error", text: cutText(text, 4096), at: e.timestamp });
    });
    c.Network.requestWillBeSent((e) => {
      push(this.network, {
        id: e.requestId,
        method: cutText(e.request.method, 16),
        url: cutText(e.request.url, 2048),
        type: cutText(e.type ?? "Other", 32),
      });
    });
    c.Network.responseReceived((e) => {
      const r = this.network.findLast((n) => n.id === e.requestId);
      if (r) r.status = Math.min(999, Math.max(0, Math.trunc(e.response.status)));
    });
    c.Network.loadingFailed((e) => {
      const r = this.network.findLast((n) => n.id === e.requestId);
      if (r) r.failed = cutText(e.errorText, 256);
    });
    await within(
      CALL_TIMEOUT_MS,
      "enabling the tab",
      Promise.all([
        c.Page.enable(),
        c.Runtime.enable(),
        c.Network.enable({}),
        c.DOM.enable({}),
        c.Emulation.setDeviceMetricsOverride({ ...VIEWPORT, deviceScaleFactor: 1, mobile: false }),
      ]),
    );
  }

  async info(): Promise<{ tab: string; url: string; title: string }> {
    const r = await this.call(
      "reading the page",
      this.c.Runtime.evaluate({ expression: "[location.href, document.title]", returnByValue: true }),
    );
    const [url, title] = (Array.isArray(r.result.value) ? r.result.value : ["", ""]).map((v: unknown) => String(v ?? ""));
    return { tab: this.id, url: cutText(url ?? "", 8192), title: cutText(title ?? "", 1024) };
  }

  async navigate(url: string, timeoutMs: number): Promise<void> {
    const loaded = this.c.Page.loadEventFired();
    const r = await this.call("navigating", this.c.Page.navigate({ url }));
    if (r.errorText) {
      const hint = /PROXY|TUNNEL|BLOCKED/i.test(r.errorText)
        ? " (the box's broker refused it: only allowed hosts are reachable, see hutch box info)"
        : "";
      throw new ToolError("failed", `cannot open ${cutText(url, 200)}: ${r.errorText}${hint}`);
    }
    // Same-document navigations fire no load event.
    if (!r.loaderId) return;
    await within(timeoutMs, `loading ${cutText(url, 200)}`, loaded);
  }

  async snapshot(opts: { maxBytes: number; delta: boolean; more?: string }): Promise<SnapshotView> {
    const { url, title } = await this.info();
    if (opts.more) {
      const [seq, line] = opts.more.slice(1).split(":").map(Number);
      const lines = this.snapshots.get(seq ?? -1);
      if (!lines)
        throw new ToolError(
          "not_found",
          `snapshot cursor ${opts.more} is gone (only the last ${KEEP_SNAPSHOTS} are kept); take a new snapshot`,
        );
      return this.view(url, title, seq ?? 0, lines, line ?? 0, opts.maxBytes, false);
    }
    const lines = await this.takeLines();
    const seq = ++this.snapshotSeq;
    this.snapshots.set(seq, lines);
    this.snapshots.delete(seq - KEEP_SNAPSHOTS);
    const before = this.lastLines;
    this.lastLines = lines;
    if (opts.delta && before) {
      const d = deltaLines(before, lines);
      return this.view(url, title, seq, d.length ? d : ["@@ no change"], 0, opts.maxBytes, true, lines);
    }
    return this.view(url, title, seq, lines, 0, opts.maxBytes, false);
  }

  private view(
    url: string,
    title: string,
    seq: number,
    shown: string[],
    start: number,
    maxBytes: number,
    delta: boolean,
    whole = shown,
  ): SnapshotView {
    const part = page(shown, start, maxBytes);
    // A delta's continuation would need the delta kept too: a cut delta points at the full snapshot instead.
    const more = part.next === undefined ? undefined : delta ? `s${seq}:0` : `s${seq}:${part.next}`;
    const bytes = whole.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0);
    return { url, title, text: part.text, delta, bytes, lines: whole.length, ...(more ? { more } : {}) };
  }

  /** The snapshot script's world in a frame ("": the main one), made once per document. */
  private async worldId(frame = ""): Promise<number> {
    const known = this.worlds.get(frame);
    if (known !== undefined) return known;
    const frameId = frame || (await this.call("reading the frames", this.c.Page.getFrameTree())).frameTree.frame.id;
    const { executionContextId } = await this.call("preparing the page", this.c.Page.createIsolatedWorld({ frameId, worldName: "hutch" }));
    this.worlds.set(frame, executionContextId);
    return executionContextId;
  }

  private async takeLines(): Promise<string[]> {
    const lines = await this.frameLines("", 0);
    if (lines.length <= MAX_LINES) return lines;
    return [...lines.slice(0, MAX_LINES), `- text: "(cut at ${MAX_LINES} lines)"`];
  }

  /**
   * One frame's lines, each frame from another origin in it (a marker line
   * from the page's script) replaced by that frame's own lines, indented
   * under it; its refs are remembered as that frame's. Site isolation is off
   * (chromium.ts), so every frame is in the tab's one renderer and target.
   */
  private async frameLines(frame: string, depth: number): Promise<string[]> {
    const contextId = await this.worldId(frame);
    const expression = `${PAGE}.snapshot(${this.nextRef}, ${MAX_LINES})`;
    const r = await this.call("taking the snapshot", this.c.Runtime.evaluate({ expression, contextId, returnByValue: true }));
    if (r.exceptionDetails)
      throw new ToolError(
        "failed",
        `the snapshot failed in the page: ${cutText(r.exceptionDetails.exception?.description ?? r.exceptionDetails.text, 500)}`,
      );
    // What comes back passed through the page's renderer: checked, not trusted.
    const v = r.result.value as { text?: unknown; next?: unknown } | undefined;
    if (typeof v?.text !== "string" || typeof v.next !== "number" || !Number.isSafeInteger(v.next))
      throw new ToolError("failed", "the snapshot came back malformed");
    if (v.text.length > SNAPSHOT_TEXT_MAX)
      throw new ToolError("failed", `the page's snapshot is larger than ${SNAPSHOT_TEXT_MAX} characters`);
    this.nextRef = Math.max(this.nextRef, v.next);
    const out: string[] = [];
    for (const line of v.text ? v.text.split("\n") : []) {
      const marker = /^( *)\u0000frame (\d{1,6})$/.exec(line);
      if (!marker) {
        if (frame) for (const m of line.matchAll(/\[ref=(e\d{1,9})\]/g)) this.refFrames.set(m[1]!, frame);
        out.push(line);
      } else if (depth >= MAX_FRAME_DEPTH || out.length >= MAX_LINES) {
        out.push(`${marker[1]}- text: "(a frame nested too deep; not shown)"`);
      } else {
        const child = await this.frameOf(contextId, Number(marker[2])).catch(() => undefined);
        const inner = child ? await this.frameLines(child, depth + 1).catch(() => undefined) : undefined;
        if (inner) for (const l of inner) out.push(`${marker[1]}${l}`);
        else out.push(`${marker[1]}- text: "(a frame that could not be read)"`);
      }
    }
    return out;
  }

  /** The frame an iframe element of the last snapshot in this world shows. */
  private async frameOf(contextId: number, i: number): Promise<string | undefined> {
    const r = await this.call("finding a frame", this.c.Runtime.evaluate({ expression: `${PAGE}.frameElement(${i})`, contextId }));
    if (!r.result.objectId || r.result.subtype === "null") return undefined;
    const { node } = await this.call("finding a frame", this.c.DOM.describeNode({ objectId: r.result.objectId }));
    return node.frameId;
  }

  /** The element a ref names, still in the page; a clear refusal otherwise. */
  private async element(ref: string): Promise<{ backendNodeId: number; objectId: string }> {
    if (Number(ref.slice(1)) >= this.nextRef)
      throw new ToolError("not_found", `no element ${ref} in ${this.id}: refs come from a snapshot; take one (browser.snapshot)`);
    // A frame that went away took its refs with it.
    const contextId = await this.worldId(this.refFrames.get(ref)).catch(() => {
      throw stale(ref, this.id);
    });
    const r = await this.call(
      "finding the element",
      this.c.Runtime.evaluate({ expression: `${PAGE}.element(${JSON.stringify(ref)})`, contextId }),
    );
    const objectId = r.result.objectId;
    if (!objectId || r.result.subtype === "null") throw stale(ref, this.id);
    const { node } = await this.call("finding the element", this.c.DOM.describeNode({ objectId }));
    return { backendNodeId: node.backendNodeId, objectId };
  }

  private async center(ref: string, backendNodeId: number): Promise<{ x: number; y: number }> {
    await this.c.DOM.scrollIntoViewIfNeeded({ backendNodeId }).catch(() => {});
    const { quads } = await this.call("locating the element", this.c.DOM.getContentQuads({ backendNodeId })).catch(() => ({
      quads: [] as number[][],
    }));
    const q = quads[0];
    if (!q || q.length < 8) throw new ToolError("conflict", `${ref} is not on screen (hidden or empty); take a snapshot`);
    const xs = [q[0], q[2], q[4], q[6]] as number[];
    const ys = [q[1], q[3], q[5], q[7]] as number[];
    return { x: xs.reduce((a, b) => a + b) / 4, y: ys.reduce((a, b) => a + b) / 4 };
  }

  async act(req: {
    action: BrowserAction;
    ref?: string;
    text?: string;
    key?: string;
    submit?: boolean;
    values?: string[];
    files?: string[];
  }): Promise<void> {
    const { action } = req;
    if (action === "press" && !req.ref) return this.press(req.key);
    if (action === "scroll" && !req.ref) {
      await this.call("scrolling", this.c.Input.dispatchMouseEvent({ type: "mouseWheel", x: 640, y: 400, deltaX: 0, deltaY: 600 }));
      return this.settle();
    }
    if (!req.ref) throw new ToolError("invalid", `${action} needs a ref from a snapshot`);
    const el = await this.element(req.ref);
    const input = this.c.Input;
    switch (action) {
      case "click":
      case "hover": {
        const { x, y } = await this.center(req.ref, el.backendNodeId);
        await input.dispatchMouseEvent({ type: "mouseMoved", x, y });
        if (action === "click") {
          await input.dispatchMouseEvent({ type: "mousePressed", x, y, button: "left", clickCount: 1 });
          await input.dispatchMouseEvent({ type: "mouseReleased", x, y, button: "left", clickCount: 1 });
        }
        break;
      }
      case "type":
        if (req.text === undefined) throw new ToolError("invalid", "type needs text");
        await this.call("focusing", this.c.DOM.focus({ backendNodeId: el.backendNodeId }));
        await this.fn(el.objectId, SELECT_ALL);
        if (req.text === "") await this.press("Delete");
        else await this.call("typing", input.insertText({ text: req.text }));
        if (req.submit) await this.press("Enter");
        break;
      case "press":
        await this.call("focusing", this.c.DOM.focus({ backendNodeId: el.backendNodeId }));
        await this.press(req.key);
        break;
      case "select": {
        if (!req.values) throw new ToolError("invalid", "select needs values");
        const n = await this.fn(el.objectId, SELECT_OPTIONS, [req.values]);
        if (n === -1) throw new ToolError("invalid", `${req.ref} is not a select element`);
        if (n === 0 && req.values.length > 0) throw new ToolError("not_found", `${req.ref} has no option ${JSON.stringify(req.values[0])}`);
        break;
      }
      case "scroll":
        await this.call("scrolling", this.c.DOM.scrollIntoViewIfNeeded({ backendNodeId: el.backendNodeId }));
        break;
      case "upload":
        if (!req.files) throw new ToolError("invalid", "upload needs paths");
        await this.call("setting files", this.c.DOM.setFileInputFiles({ files: req.files, backendNodeId: el.backendNodeId }));
        break;
    }
    await this.settle();
  }

  private async press(name: string | undefined): Promise<void> {
    if (!name) throw new ToolError("invalid", "press needs a key");
    const k = keyEvent(name);
    if (!k) throw new ToolError("invalid", `unknown key ${JSON.stringify(name)}: one character, or one of ${KEY_NAMES.join(", ")}`);
    await this.call("pressing", this.c.Input.dispatchKeyEvent({ type: k.text ? "keyDown" : "rawKeyDown", ...k }));
    await this.call(
      "pressing",
      this.c.Input.dispatchKeyEvent({ type: "keyUp", key: k.key, code: k.code, windowsVirtualKeyCode: k.windowsVirtualKeyCode }),
    );
  }

  /** After an action: if it started loading a page, wait for that page (bounded). */
  private async settle(): Promise<void> {
    await Bun.sleep(20);
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const r = await this.c.Runtime.evaluate({ expression: "document.readyState", returnByValue: true }).catch(() => undefined);
      if (!r || r.result.value === "complete") return;
      await Bun.sleep(25);
    }
  }

  async waitFor(req: { text?: string; ref?: string }, timeoutMs: number): Promise<number> {
    if (!req.text && !req.ref) throw new ToolError("invalid", "wait needs text or a ref");
    const start = Date.now();
    for (;;) {
      if (req.text) {
        const r = await this.c.Runtime.evaluate({
          expression: `document.body ? document.body.innerText.includes(${JSON.stringify(req.text)}) : false`,
          returnByValue: true,
        });
        if (r.result.value === true) return Date.now() - start;
      } else if (req.ref) {
        // A stale ref never comes back: element() throws and the wait ends with that.
        const el = await this.element(req.ref);
        const q = await this.c.DOM.getContentQuads({ backendNodeId: el.backendNodeId }).catch(() => ({ quads: [] }));
        if (q.quads.length > 0) return Date.now() - start;
      }
      if (Date.now() - start > timeoutMs)
        throw new ToolError("failed", `waited ${timeoutMs} ms for ${req.text ? JSON.stringify(req.text) : req.ref}; it did not appear`);
      await Bun.sleep(50);
    }
  }

  async screenshot(req: { ref?: string; fullPage?: boolean }): Promise<Uint8Array> {
    let clip: { x: number; y: number; width: number; height: number; scale: number } | undefined;
    if (req.ref) {
      const el = await this.element(req.ref);
      await this.c.DOM.scrollIntoViewIfNeeded({ backendNodeId: el.backendNodeId }).catch(() => {});
      const box = await this.fn(el.objectId, ELEMENT_RECT);
      if (!Array.isArray(box) || box[2] <= 0 || box[3] <= 0)
        throw new ToolError("conflict", `${req.ref} has no size on the page; nothing to capture`);
      clip = { x: box[0], y: box[1], width: box[2], height: Math.min(box[3], FULL_PAGE_MAX_PX), scale: 1 };
    } else if (req.fullPage) {
      const m = await this.call("measuring the page", this.c.Page.getLayoutMetrics());
      const size = m.cssContentSize;
      clip = { x: 0, y: 0, width: Math.ceil(size.width), height: Math.min(Math.ceil(size.height), FULL_PAGE_MAX_PX), scale: 1 };
    }
    const r = await this.call(
      "capturing",
      this.c.Page.captureScreenshot({ format: "png", ...(clip ? { clip, captureBeyondViewport: true } : {}) }),
    );
    return Buffer.from(r.data, "base64");
  }

  private async fn(objectId: string, body: string, args: unknown[] = []): Promise<unknown> {
    const r = await this.call(
      "running in the page",
      this.c.Runtime.callFunctionOn({
        objectId,
        functionDeclaration: body,
        arguments: args.map((value) => ({ value })),
        returnByValue: true,
      }),
    );
    return r.result.value;
  }

  private call<T>(what: string, p: Promise<T>): Promise<T> {
    if (this.closed) throw new ToolError("not_found", `${this.id} is closed; open one: browser.open`);
    return within(CALL_TIMEOUT_MS, what, p);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.c.close().catch(() => {});
  }
}

function stale(ref: string, tab: string): ToolError {
  return new ToolError(
    "conflict",
    `${ref} is stale: that element is no longer in ${tab}'s page (it re-rendered or navigated); take a new snapshot`,
  );
}

const SELECT_ALL = `function(){
  if (typeof this.select === "function") this.select();
  else if (this.isContentEditable) { const r = document.createRange(); r.selectNodeContents(this); const s = getSelection(); s.removeAllRanges(); s.addRange(r); }
}`;
const SELECT_OPTIONS = `function(values){
  if (this.tagName !== "SELECT") return -1;
  const want = new Set(values); let n = 0;
  for (const o of this.options) { o.selected = want.has(o.value) || want.has(o.label); if (o.selected) n++; }
  this.dispatchEvent(new Event("input", { bubbles: true })); this.dispatchEvent(new Event("change", { bubbles: true }));
  return n;
}`;
const ELEMENT_RECT = `function(){ const r = this.getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width, r.height]; }`;
