// `hutch ide --stdio`, spoken to as the extension does: LSP framing, the
// initialize handshake, hutch/... methods and notifications, diagnostics.
// Drives the compiled dist/hutch and the real daemon it talks to.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Change, DaemonStatus, EventsNotification, ListResult, SubscriptionEnded } from "@hutch/shared";
import { HUTCH, makeHome, pidAlive, waitFor, type Home } from "../../tests/helpers.ts";
import { startBridge, type Bridge } from "./ide-client.ts";

let h: Home;
let b: Bridge;
let ws: string;
let sid: string;

async function cli(args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

async function stopDaemon(): Promise<void> {
  const pid = h.daemonPid()!;
  process.kill(pid, "SIGTERM");
  await waitFor("the daemon to exit", () => !pidAlive(pid) || null);
}

beforeAll(async () => {
  h = makeHome("hutch-ide-");
  ws = mkdtempSync(join(tmpdir(), "hutch-ide-ws-"));
  mkdirSync(join(ws, "src"));
  await cli(["box", "create", "ide1", "--start"]);
  sid = (await cli(["run", "ide1", "--detach", "--label", "first"])).trim();
  b = startBridge(HUTCH, h.env);
});

afterAll(async () => {
  await b?.stop();
  await h.cleanup();
  rmSync(ws, { recursive: true, force: true });
});

describe("hutch ide --stdio", () => {
  test("initialize names the server, its version and the protocol", async () => {
    const r = await b.conn.sendRequest<{ serverInfo: { name: string; version: string }; hutch: { protocolVersion: number; home: string } }>(
      "initialize",
      {
        processId: process.pid,
        rootUri: pathToFileURL(ws).href,
        capabilities: {},
      },
    );
    expect(r.serverInfo.name).toBe("hutch");
    expect(r.serverInfo.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(r.hutch.protocolVersion).toBe(1);
    expect(r.hutch.home).toBe(h.home);
    await b.conn.sendNotification("initialized", {});
    await b.waitFor<DaemonStatus>("hutch/daemon", (p) => p.connected);
  });

  test("list returns boxes and sessions with their activity", async () => {
    const l = await b.conn.sendRequest<ListResult>("hutch/list");
    expect(l.connected).toBe(true);
    const box = l.boxes.find((x) => x.name === "ide1")!;
    expect(box.state).toBe("running");
    expect(box.isolation).toBe("namespace");
    const s = l.sessions.find((x) => x.id === sid)!;
    expect(s.label).toBe("first");
    expect(s.activity).toBe("idle");
  });

  test("a box created from the CLI is announced without polling", async () => {
    await cli(["box", "create", "ide2"]);
    const c = await b.waitFor<Change>("hutch/changed", (p) => p.type === "box" && p.box.name === "ide2");
    expect(c.type === "box" && c.box.engine).toBe("process");
    await b.waitFor<Change>("hutch/changed", (p) => p.type === "box" && p.box.name === "ide2" && p.box.state === "stopped");
    await cli(["box", "delete", "ide2"]);
    await b.waitFor<Change>("hutch/changed", (p) => p.type === "box.removed");
  });

  test("a session started from the CLI is announced with its activity", async () => {
    const id = (await cli(["run", "ide1", "--detach", "--label", "second"])).trim();
    const c = await b.waitFor<Change>("hutch/changed", (p) => p.type === "session" && p.session.id === id);
    expect(c.type === "session" && c.session.label).toBe("second");
    expect(c.type === "session" && c.session.activity).toBe("idle");
    await cli(["session", "close", id]);
    await b.waitFor<Change>("hutch/changed", (p) => p.type === "session" && p.session.id === id && p.session.activity === "closed");
  });

  test("an anchored annotation is published as an information diagnostic on its file", async () => {
    await cli(["session", "annotate", sid, "check this loop", "--anchor", "src/a.ts:3"]);
    const uri = pathToFileURL(join(ws, "src/a.ts")).href;
    const d = await b.waitFor<{ uri: string; diagnostics: { message: string; severity: number; range: { start: { line: number } } }[] }>(
      "textDocument/publishDiagnostics",
      (p) => p.uri === uri && p.diagnostics.length > 0,
    );
    expect(d.diagnostics).toHaveLength(1);
    expect(d.diagnostics[0]!.severity).toBe(3);
    expect(d.diagnostics[0]!.range.start.line).toBe(2);
    expect(d.diagnostics[0]!.message).toContain("check this loop");
    // An anchor under the box's /workspace lands on the same file.
    await cli(["session", "annotate", sid, "and this", "--anchor", "/workspace/src/a.ts:5"]);
    const d2 = await b.waitFor<{ uri: string; diagnostics: unknown[] }>(
      "textDocument/publishDiagnostics",
      (p) => p.uri === uri && p.diagnostics.length === 2,
    );
    expect(d2.diagnostics).toHaveLength(2);
  });

  test("annotate through the bridge is stamped as the ide actor", async () => {
    const r = await b.conn.sendRequest<{ seq: number }>("hutch/annotate", {
      session: sid,
      text: "from the editor",
      anchor: { path: "src/b.ts", line: 1 },
    });
    expect(r.seq).toBeGreaterThan(1);
    const log = JSON.parse(await cli(["session", "log", sid, "--from", String(r.seq), "--json"]).then((s) => s.split("\n")[0]!)) as {
      actor: { kind: string };
    };
    expect(log.actor.kind).toBe("ide");
  });

  test("a subscription from a seq survives a daemon restart with nothing lost or repeated", async () => {
    for (let i = 0; i < 20; i++) await cli(["session", "annotate", sid, `before ${i}`]);
    const from = 3;
    const got: number[] = [];
    const { subscription } = await b.conn.sendRequest<{ subscription: string }>("hutch/subscribe", { session: sid, from });
    b.on<EventsNotification>("hutch/events", (n) => {
      if (n.subscription === subscription) got.push(...n.events.map((e) => e.seq));
    });
    await b.waitFor<EventsNotification>("hutch/events", (n) => n.subscription === subscription && n.caughtUp !== undefined);
    const caughtUpAt = got[got.length - 1]!;
    expect(got[0]).toBe(from);

    await stopDaemon();
    await b.waitFor<DaemonStatus>("hutch/daemon", (p) => !p.connected);
    const list = await b.conn.sendRequest<ListResult>("hutch/list");
    expect(list.connected).toBe(false);

    // The next CLI verb starts a daemon again; the bridge finds it by itself.
    for (let i = 0; i < 20; i++) await cli(["session", "annotate", sid, `after ${i}`]);
    const last = JSON.parse(await cli(["session", "info", sid, "--json"])).lastSeq as number;
    await waitFor("every event at the bridge", () => got[got.length - 1] === last || null, 20_000);
    expect(last).toBeGreaterThan(caughtUpAt + 19);
    expect(got).toEqual(Array.from({ length: last - from + 1 }, (_, i) => from + i));
    expect((b.seen.get("hutch/daemon") as DaemonStatus[]).filter((s) => s.connected).length).toBeGreaterThanOrEqual(2);
    await b.conn.sendRequest("hutch/unsubscribe", { subscription });
  }, 60_000);

  test("subscribing to a session that does not exist ends with not_found", async () => {
    const { subscription } = await b.conn.sendRequest<{ subscription: string }>("hutch/subscribe", {
      session: "ses_0000000000000000000a",
      from: 1,
    });
    const end = await b.waitFor<SubscriptionEnded>("hutch/subscriptionEnded", (p) => p.subscription === subscription);
    expect(end.code).toBe("not_found");
    expect(end.hint).toContain("hutch session list");
  });

  test("a daemon error reaches the client with its code and next step", async () => {
    const err = await b.conn
      .sendRequest("hutch/box", { action: "start", name: "no-such-box" })
      .catch((e: { message: string; data: { code: string; hint?: string } }) => e);
    expect((err as { data: { code: string } }).data.code).toBe("not_found");
    expect((err as { message: string }).message).toContain("no-such-box");
  });
});
