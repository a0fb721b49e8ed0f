// browser.*: the real guest drives Debian's Chromium over CDP against test
// pages served on loopback (tests/fixtures/pages). Nothing is faked.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import {
  BrowserScreenshotResult,
  BrowserWaitResult,
  BrowserSnapshotWire,
  TabInfo,
  BrowserConsoleResult,
  BrowserNetworkResult,
} from "@hutch/shared";
import { decodePng } from "../../tests/fixtures/png.ts";
import { call, result, useGuest, type Guest, type Host } from "./harness.ts";

const PAGES = join(import.meta.dir, "../../tests/fixtures/pages");
let host!: Host;
let server: ReturnType<typeof Bun.serve> | undefined;
let base = "";

let guest!: Guest;
useGuest((g, h) => {
  host = h;
  guest = g;
});
afterAll(async () => {
  if (guest.proc.exitCode !== null) console.error(await guest.stderr());
});
beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const file = Bun.file(join(PAGES, new URL(req.url).pathname.slice(1)));
      return (await file.exists()) ? new Response(file) : new Response("not here", { status: 404 });
    },
  });
  base = `http://127.0.0.1:${server.port}`;
});
afterAll(() => server?.stop(true));

async function ok<T extends Parameters<typeof result>[1]>(payload: unknown, schema: T) {
  const { c, error } = await call(host, payload);
  if (error) throw new Error(`${JSON.stringify(payload)}: ${error.code}: ${error.message}`);
  return { value: result(c, schema), bytes: Buffer.concat(c.out) };
}

async function refused(payload: unknown): Promise<{ code: string; message: string }> {
  const { error } = await call(host, payload);
  if (!error) throw new Error(`${JSON.stringify(payload)} was not refused`);
  return error;
}

function refOf(text: string, line: RegExp): string {
  const found = text.split("\n").find((l) => line.test(l));
  const ref = found?.match(/\[ref=(e\d+)\]/)?.[1];
  if (!ref) throw new Error(`no line ${line} with a ref in:\n${text}`);
  return ref;
}

async function open(page: string): Promise<string> {
  const { value } = await ok({ tool: "browser.open", url: `${base}/${page}` }, TabInfo);
  return value.tab;
}

/** A snapshot as the host sees it: the wire result, and its text from chan 1. */
async function snap(tab: string, extra: Record<string, unknown> = {}) {
  const { value, bytes } = await ok({ tool: "browser.snapshot", tab, ...extra }, BrowserSnapshotWire);
  expect(bytes.length).toBe(value.size);
  return { ...value, text: bytes.toString("utf8") };
}

describe("browser", () => {
  test("a form with labels: snapshot, fill and submit by ref, see the result", async () => {
    const tab = await open("form.html");
    const s = await snap(tab);
    expect(s.title).toBe("Sign up");
    expect(s.text).toContain('- heading "Sign up" [level=1]');
    const name = refOf(s.text, /^\s*- textbox "Name"/);
    const email = refOf(s.text, /^\s*- textbox "Email"/);
    const plan = refOf(s.text, /^\s*- combobox "Plan"/);
    const terms = refOf(s.text, /^\s*- checkbox "I agree"/);
    const submit = refOf(s.text, /^\s*- button "Submit"/);
    await ok({ tool: "browser.act", tab, action: "type", ref: name, text: "Ada" }, TabInfo);
    await ok({ tool: "browser.act", tab, action: "type", ref: email, text: "ada@example.com" }, TabInfo);
    await ok({ tool: "browser.act", tab, action: "select", ref: plan, values: ["Pro"] }, TabInfo);
    await ok({ tool: "browser.act", tab, action: "click", ref: terms }, TabInfo);
    await ok({ tool: "browser.act", tab, action: "click", ref: submit }, TabInfo);
    await ok({ tool: "browser.wait", tab, text: "Thanks Ada", timeoutMs: 5000 }, BrowserWaitResult);
    const after = await snap(tab);
    expect(after.text).toContain('- paragraph: "Thanks Ada <ada@example.com> on pro, agreed"');
    expect(after.text).toContain(`- textbox "Name" [ref=${name}]: "Ada"`);
    const logs = (await ok({ tool: "browser.console", tab }, BrowserConsoleResult)).value;
    expect(logs.map((l) => l.text)).toContain("submitted Ada");
    const net = (await ok({ tool: "browser.network", tab }, BrowserNetworkResult)).value;
    expect(net.find((n) => n.url.endsWith("/form.html"))?.status).toBe(200);
  });

  test("a ref from before a re-render is refused as stale, one never given is unknown", async () => {
    const tab = await open("rerender.html");
    const s = await snap(tab);
    expect(s.text).toContain('- paragraph: "Count: 0"');
    const inc = refOf(s.text, /button "Increment"/);
    await ok({ tool: "browser.act", tab, action: "click", ref: inc }, TabInfo);
    const e = await refused({ tool: "browser.act", tab, action: "click", ref: inc });
    expect(e.code).toBe("conflict");
    expect(e.message).toContain(`${inc} is stale`);
    const again = await snap(tab);
    expect(again.text).toContain('- paragraph: "Count: 1"');
    const inc2 = refOf(again.text, /button "Increment"/);
    expect(inc2).not.toBe(inc);
    await ok({ tool: "browser.act", tab, action: "click", ref: inc2 }, TabInfo);
    expect((await snap(tab)).text).toContain('- paragraph: "Count: 2"');
    const unknown = await refused({ tool: "browser.act", tab, action: "click", ref: "e99999" });
    expect(unknown.code).toBe("not_found");
    expect(unknown.message).toContain("take one");
  });

  test("a dialog: open it, type into it, close it", async () => {
    const tab = await open("dialog.html");
    const s = await snap(tab);
    await ok({ tool: "browser.act", tab, action: "click", ref: refOf(s.text, /button "Open settings"/) }, TabInfo);
    const d = await snap(tab);
    expect(d.text).toMatch(/- dialog[^\n]*:/);
    await ok({ tool: "browser.act", tab, action: "type", ref: refOf(d.text, /textbox "Nickname"/), text: "ace" }, TabInfo);
    await ok({ tool: "browser.act", tab, action: "click", ref: refOf(d.text, /button "Done"/) }, TabInfo);
    expect((await snap(tab)).text).toContain('"nickname: ace"');
  });

  test("an iframe's content is in the snapshot and acts by ref", async () => {
    const tab = await open("frame.html");
    await ok({ tool: "browser.wait", tab, text: "Outer page" }, BrowserWaitResult);
    let s = await snap(tab);
    for (let i = 0; i < 40 && !s.text.includes("Inner button"); i++) {
      await Bun.sleep(50);
      s = await snap(tab);
    }
    expect(s.text).toMatch(/- iframe "Inner frame" \[ref=e\d+\]:\n\s+- button "Inner button" \[ref=e\d+\]/);
    await ok({ tool: "browser.act", tab, action: "click", ref: refOf(s.text, /button "Inner button"/) }, TabInfo);
    expect((await snap(tab)).text).toContain('"inner clicked"');
  });

  test("an iframe from another origin is in the snapshot, its refs act in it, and they go stale with its document", async () => {
    const other = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (req) => new Response(Bun.file(join(PAGES, new URL(req.url).pathname.slice(1)))),
    });
    try {
      const inner = `http://127.0.0.1:${other.port}/inner.html`;
      const tab = await open(`xframe.html?inner=${encodeURIComponent(inner)}`);
      let s = await snap(tab);
      for (let i = 0; i < 40 && !s.text.includes("Inner button"); i++) {
        await Bun.sleep(50);
        s = await snap(tab);
      }
      expect(s.text).not.toContain("not shown");
      expect(s.text).toMatch(/- iframe "Other origin" \[ref=e\d+\]:\n\s+- button "Inner button" \[ref=e\d+\]\n\s+- paragraph: "not yet"/);
      const innerRef = refOf(s.text, /button "Inner button"/);
      const outerRef = refOf(s.text, /button "Outer button"/);
      // Refs are the tab's: none is given twice across the two documents.
      const refs = [...s.text.matchAll(/\[ref=(e\d+)\]/g)].map((m) => m[1]);
      expect(new Set(refs).size).toBe(refs.length);
      await ok({ tool: "browser.act", tab, action: "click", ref: innerRef }, TabInfo);
      await ok({ tool: "browser.act", tab, action: "click", ref: outerRef }, TabInfo);
      const after = (await snap(tab)).text;
      expect(after).toContain('"inner clicked"');
      expect(after).toContain('"outer clicked"');
      // The same element keeps its ref in the next snapshot.
      expect(refOf(after, /button "Inner button"/)).toBe(innerRef);
      // A new document: the frame's old refs are stale, never resolved to something else.
      await ok(
        {
          tool: "browser.navigate",
          tab,
          url: `${base}/xframe.html?inner=${encodeURIComponent(`http://127.0.0.1:${other.port}/red.html`)}`,
        },
        TabInfo,
      );
      expect((await refused({ tool: "browser.act", tab, action: "click", ref: innerRef })).code).toBe("conflict");
    } finally {
      other.stop(true);
    }
  });

  test("a screenshot is a PNG of the viewport whose pixels show the page", async () => {
    const tab = await open("red.html");
    const { value, bytes } = await ok({ tool: "browser.screenshot", tab }, BrowserScreenshotResult);
    expect(value.size).toBe(bytes.length);
    const png = decodePng(bytes);
    expect([png.width, png.height]).toEqual([1280, 800]);
    expect([value.width, value.height]).toEqual([1280, 800]);
    for (const [x, y] of [
      [0, 0],
      [640, 400],
      [1279, 799],
      [17, 700],
    ] as const)
      expect(png.pixel(x, y)).toEqual([255, 0, 0]);
  });

  test("snapshots are capped with a continuation, and a delta after one change is small", async () => {
    const tab = await open("form.html");
    const full = await snap(tab);
    const cut = await snap(tab, { maxBytes: 256 });
    expect(Buffer.byteLength(cut.text)).toBeLessThanOrEqual(256);
    expect(cut.more).toMatch(/^s\d+:\d+$/);
    let joined = cut.text;
    for (let more = cut.more; more; ) {
      const next = await snap(tab, { more, maxBytes: 256 });
      joined += `\n${next.text}`;
      more = next.more;
    }
    expect(joined).toBe(full.text);
    await ok({ tool: "browser.act", tab, action: "type", ref: refOf(full.text, /textbox "Name"/), text: "Bo" }, TabInfo);
    const d = await snap(tab, { delta: true });
    expect(d.delta).toBe(true);
    expect(d.text).toContain("+ ");
    expect(d.text).toContain('"Bo"');
    expect(Buffer.byteLength(d.text)).toBeLessThan(full.bytes / 2);
  });

  test("bad input: a closed tab, an unknown key, an unreachable URL; the browser keeps working", async () => {
    const tab = await open("form.html");
    await ok({ tool: "browser.close", tab }, TabInfo);
    const closed = await refused({ tool: "browser.screenshot", tab });
    expect(closed.code).toBe("not_found");
    expect(closed.message).toContain(`no tab ${tab}`);
    const tab2 = await open("form.html");
    const key = await refused({ tool: "browser.act", tab: tab2, action: "press", key: "Hyper" });
    expect(key.message).toContain("unknown key");
    const closedPort = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = closedPort.port;
    closedPort.stop(true);
    const far = await refused({ tool: "browser.navigate", tab: tab2, url: `http://127.0.0.1:${port}/` });
    expect(far.message).toContain("ERR_CONNECTION_REFUSED");
    const bad = await refused({ tool: "browser.act", tab: tab2, action: "click", ref: "button" });
    expect(bad.code).toBe("invalid");
    await ok({ tool: "browser.navigate", tab: tab2, url: `${base}/form.html` }, TabInfo);
    expect((await snap(tab2)).text).toContain("Sign up");
  });
});
