// The browser snapshot against @playwright/mcp (npm), both driving Debian's
// Chromium, both called as MCP tools by the official SDK's client, on the
// same generated pages (--sizes: 500, 2,000 and 8,000 DOM elements) in the
// same run:
//
//   snapshot   browser_snapshot's time (median of --rounds) and its size in
//              bytes (the text the agent gets). hutch's is asked uncut
//              (maxBytes 1,000,000); its default answer is capped at 24 KB.
//   roundtrip  snapshot, click a button by its ref, and see the page again:
//              Playwright's click answers with a link to a snapshot file, so
//              it is followed by browser_snapshot; hutch's by a delta
//              snapshot (what an agent would ask for).
//   delta      hutch only: a delta snapshot after one change, against the
//              full snapshot's size.
//
// Goals on the 8,000-element page: at most 0.5x Playwright's snapshot time and
// size, and a delta under 5 % of the full snapshot.
//
//   bun scripts/bench/browser.ts [--json] [--sizes 500,2000,8000] [--rounds 5]
import { parseArgs } from "node:util";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describeFailure, HutchHome, log, requireHutch, run } from "./lib/env.ts";
import { median, round, table } from "./lib/stats.ts";

const { values: flags } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    sizes: { type: "string", default: "500,2000,8000" },
    rounds: { type: "string", default: "5" },
  },
});
const SIZES = flags.sizes.split(",").map(Number);
const ROUNDS = Number(flags.rounds);
const PEER = { name: "@playwright/mcp", version: "0.0.83" };
const CHROMIUM = "/usr/lib/chromium/chromium";
const BENCH_DIR = process.env.BENCH_DIR ?? "/tmp/hutch-bench";
const PORT = 8765;

/** A page of about `elements` elements: cards of ten (section, h2, p, a, ul, li, li, label, input, button), one button that changes one line. */
export function page(elements: number): string {
  const cards = Math.max(1, Math.round(elements / 10));
  const body = Array.from(
    { length: cards },
    (_, i) =>
      `<section><h2>Item ${i}</h2><p>Description of item ${i} <a href="#i${i}">details</a></p><ul><li>colour ${i % 7}</li><li>size ${i % 5}</li></ul><label>Quantity ${i} <input name="q${i}"></label><button>Buy ${i}</button></section>`,
  ).join("\n");
  return `<!doctype html><html><head><title>Shop ${elements}</title></head><body>
<button id="change" onclick="document.getElementById('status').textContent='status: changed'">Change</button><p id="status">status: fresh</p>
${body}</body></html>`;
}

interface Side {
  name: string;
  client: Client;
  snapshot(): Promise<string>;
  /** Click the Change button, then have the page's state back. */
  clickAndSee(ref: string): Promise<string>;
  open(url: string): Promise<void>;
}

function textOf(r: CallToolResult): string {
  if (r.isError) throw new Error(r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n"));
  return r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

async function mcp(name: string, command: string, args: string[], env: Record<string, string | undefined>, cwd?: string): Promise<Client> {
  const client = new Client({ name: "hutch-bench", version: "1" });
  await client.connect(
    new StdioClientTransport({ command, args, env: env as Record<string, string>, stderr: "ignore", ...(cwd ? { cwd } : {}) }),
  );
  log(`${name}: connected`);
  return client;
}

const call = async (c: Client, name: string, args: Record<string, unknown>) =>
  textOf((await c.callTool({ name, arguments: args })) as CallToolResult);

function changeRef(snapshot: string): string {
  const ref = snapshot.match(/button "Change" \[ref=([a-z0-9]+)\]/)?.[1];
  if (!ref) throw new Error(`no Change button in the snapshot: ${snapshot.slice(0, 300)}`);
  return ref;
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t = performance.now();
  const value = await fn();
  return { ms: performance.now() - t, value };
}

async function installPeer(): Promise<string> {
  const dir = join(BENCH_DIR, "playwright-mcp");
  const cli = join(dir, "node_modules", "@playwright", "mcp", "cli.js");
  if (!(await Bun.file(cli).exists())) {
    mkdirSync(dir, { recursive: true });
    log(`installing ${PEER.name}@${PEER.version} into ${dir}`);
    const r = await run(["npm", "i", "--no-audit", "--no-fund", "--prefix", dir, `${PEER.name}@${PEER.version}`], { timeoutMs: 300_000 });
    if (r.code !== 0) throw new Error(describeFailure(r, "npm i @playwright/mcp"));
  }
  return cli;
}

requireHutch();
const home = new HutchHome();
const pages = mkdtempSync(join(tmpdir(), "hutch-bench-pages-"));
let server: ReturnType<typeof Bun.serve> | undefined;
const sides: Side[] = [];
try {
  for (const n of SIZES) writeFileSync(join(pages, `p${n}.html`), page(n));
  const peerCli = await installPeer();
  await home.createBox("bb");
  const cp = await home.hutch(["cp", pages, "bb:/workspace/pages"]);
  if (cp.code !== 0) throw new Error(describeFailure(cp, "hutch cp"));
  const serve = `cd /workspace/pages && (setsid python3 -m http.server ${PORT} --bind 127.0.0.1 >/dev/null 2>&1 &)`;
  await home.hutch(["exec", "bb", "--", "sh", "-c", serve]);
  // The same files for the peer, on this machine's loopback.
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const f = Bun.file(join(pages, new URL(req.url).pathname.slice(1)));
      return (await f.exists()) ? new Response(f) : new Response("", { status: 404 });
    },
  });

  const hutch = await mcp("hutch", home.bin, ["mcp"], { ...home.env, HUTCH_LOG_LEVEL: "warn" });
  let tab = "";
  sides.push({
    name: "hutch",
    client: hutch,
    async open(url) {
      if (!tab) tab = (await call(hutch, "browser_open", { box: "bb", url })).split(" ")[0] ?? "";
      else await call(hutch, "browser_navigate", { box: "bb", tab, url });
    },
    snapshot: () => call(hutch, "browser_snapshot", { box: "bb", tab, maxBytes: 1_000_000 }),
    async clickAndSee(ref) {
      await call(hutch, "browser_click", { box: "bb", tab, ref, element: "Change button" });
      return call(hutch, "browser_snapshot", { box: "bb", tab, delta: true });
    },
  });
  const peer = await mcp(
    PEER.name,
    "node",
    [
      peerCli,
      "--headless",
      "--isolated",
      "--no-sandbox",
      "--browser",
      "chromium",
      "--executable-path",
      CHROMIUM,
      "--viewport-size",
      "1280,800",
    ],
    process.env,
    pages,
  );
  sides.push({
    name: PEER.name,
    client: peer,
    open: async (url) => void (await call(peer, "browser_navigate", { url })),
    snapshot: () => call(peer, "browser_snapshot", {}),
    async clickAndSee(ref) {
      await call(peer, "browser_click", { element: "Change button", target: ref });
      return call(peer, "browser_snapshot", {});
    },
  });

  const rows: Record<string, unknown>[] = [];
  for (const n of SIZES) {
    const result: Record<string, { snapshotMs: number; bytes: number; roundtripMs: number; deltaBytes?: number }> = {};
    for (const side of sides) {
      const base = side.name === "hutch" ? `http://127.0.0.1:${PORT}` : `http://127.0.0.1:${server.port}`;
      const times: number[] = [];
      const trips: number[] = [];
      let bytes = 0;
      let deltaBytes: number | undefined;
      for (let r = 0; r < ROUNDS + 1; r++) {
        // A fresh load each round, so the click below always meets an unchanged page.
        await side.open(`${base}/p${n}.html`);
        const s = await timed(() => side.snapshot());
        const trip = await timed(async () => {
          const again = await side.snapshot();
          return side.clickAndSee(changeRef(again));
        });
        if (!trip.value.includes("status: changed")) throw new Error(`${side.name}: the click did not show the change`);
        if (r === 0) continue; // warm-up
        times.push(s.ms);
        trips.push(trip.ms);
        bytes = Buffer.byteLength(s.value);
        if (side.name === "hutch") deltaBytes = Buffer.byteLength(trip.value);
      }
      result[side.name] = {
        snapshotMs: median(times),
        bytes,
        roundtripMs: median(trips),
        ...(deltaBytes !== undefined ? { deltaBytes } : {}),
      };
      log(`${side.name} ${n}: snapshot ${round(median(times))} ms, ${bytes} bytes, round trip ${round(median(trips))} ms`);
    }
    const h = result.hutch!;
    const p = result[PEER.name]!;
    rows.push({
      elements: n,
      hutch: h,
      peer: p,
      timeRatio: round(h.snapshotMs / p.snapshotMs),
      sizeRatio: round(h.bytes / p.bytes),
      roundtripRatio: round(h.roundtripMs / p.roundtripMs),
      deltaShare: round((h.deltaBytes ?? 0) / h.bytes, 4),
    });
  }
  const last = rows.at(-1) as { timeRatio: number; sizeRatio: number; deltaShare: number };
  const goals = { time: last.timeRatio <= 0.5, size: last.sizeRatio <= 0.5, delta: last.deltaShare < 0.05 };
  const report = { bench: "browser", build: await home.buildId(), peer: `${PEER.name}@${PEER.version}`, rounds: ROUNDS, rows, goals };
  if (flags.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    process.stdout.write(
      table(
        ["elements", "hutch ms", "peer ms", "time x", "hutch bytes", "peer bytes", "size x", "trip ms h/p", "trip x", "delta %"],
        rows.map((r) => {
          const x = r as {
            elements: number;
            hutch: { snapshotMs: number; bytes: number; roundtripMs: number; deltaBytes: number };
            peer: { snapshotMs: number; bytes: number; roundtripMs: number };
            timeRatio: number;
            sizeRatio: number;
            roundtripRatio: number;
            deltaShare: number;
          };
          return [
            String(x.elements),
            String(round(x.hutch.snapshotMs)),
            String(round(x.peer.snapshotMs)),
            String(x.timeRatio),
            String(x.hutch.bytes),
            String(x.peer.bytes),
            String(x.sizeRatio),
            `${round(x.hutch.roundtripMs)}/${round(x.peer.roundtripMs)}`,
            String(x.roundtripRatio),
            String(round(x.deltaShare * 100, 2)),
          ];
        }),
      ),
    );
    process.stdout.write(
      `goals on the largest page: time ≤0.5x ${goals.time ? "met" : "MISSED"}, size ≤0.5x ${goals.size ? "met" : "MISSED"}, delta <5% ${goals.delta ? "met" : "MISSED"}\n`,
    );
  }
} finally {
  for (const s of sides) await s.client.close().catch(() => {});
  server?.stop(true);
  await home.dispose();
  rmSync(pages, { recursive: true, force: true });
}
