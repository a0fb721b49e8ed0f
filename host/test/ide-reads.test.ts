// What `hutch ide --stdio` reads from the daemon, counted on the wire: the
// bridge talks to the daemon through a unix-socket proxy that counts every
// event line the daemon sends it and every subscription it opens. At start it
// reads summaries and tails, no log; it subscribes once per open session, and
// a log view reads through that same subscription.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Socket } from "bun";
import { Events, type Change, type DaemonStatus, type EventsNotification, type ListResult } from "@hutch/shared";
import { HUTCH, makeHome, waitFor, type Home } from "../../tests/helpers.ts";
import { fixtureEvent } from "../../tests/fixtures/events.ts";
import { startBridge, type Bridge } from "./ide-client.ts";

/** What went through the proxy: event lines to the bridge, by session, and subscriptions it opened. */
class Wire {
  readonly events = new Map<string, number>();
  readonly subscriptions = new Map<string, number>();
  eventsOf(session: string): number {
    return this.events.get(session) ?? 0;
  }
  get totalEvents(): number {
    return [...this.events.values()].reduce((a, b) => a + b, 0);
  }
}

/** Finds every match of `re` in a byte stream that arrives in pieces (matches may straddle them). */
function scanner(re: RegExp, on: (m: RegExpExecArray) => void): (chunk: Uint8Array) => void {
  let carry = "";
  return (chunk) => {
    const text = carry + Buffer.from(chunk).toString("latin1");
    for (const m of text.matchAll(re)) if (m.index + m[0].length > carry.length) on(m as RegExpExecArray);
    carry = text.slice(-120);
  };
}

/** A byte-for-byte proxy from `listen` to the daemon's socket at `upstream`. */
function countingProxy(listen: string, upstream: string, wire: Wire) {
  type Pipe = { to?: Socket<unknown>; queue: Uint8Array[] };
  const write = (p: Pipe, bytes: Uint8Array) => {
    p.queue.push(bytes);
    flush(p);
  };
  const flush = (p: Pipe) => {
    while (p.to && p.queue.length) {
      const b = p.queue[0]!;
      const n = p.to.write(b);
      if (n < b.length) {
        p.queue[0] = b.subarray(n);
        return;
      }
      p.queue.shift();
    }
  };
  return Bun.listen<{ up: Pipe; down: Pipe; toDaemon: (c: Uint8Array) => void; toBridge: (c: Uint8Array) => void }>({
    unix: listen,
    socket: {
      open(client) {
        const up: Pipe = { queue: [] };
        const down: Pipe = { to: client, queue: [] };
        client.data = {
          up,
          down,
          toDaemon: scanner(/GET \/v1\/sessions\/(ses_[0-9a-z]{20})\/subscribe/g, (m) =>
            wire.subscriptions.set(m[1]!, (wire.subscriptions.get(m[1]!) ?? 0) + 1),
          ),
          toBridge: scanner(/\{"session":"(ses_[0-9a-z]{20})","seq":\d+[,}]/g, (m) =>
            wire.events.set(m[1]!, (wire.events.get(m[1]!) ?? 0) + 1),
          ),
        };
        void Bun.connect({
          unix: upstream,
          socket: {
            open(server) {
              up.to = server;
              flush(up);
            },
            data(_server, bytes) {
              const copy = new Uint8Array(bytes);
              client.data.toBridge(copy);
              write(down, copy);
            },
            drain: () => flush(up),
            close: () => void client.end(),
            error: () => void client.end(),
          },
        }).catch(() => void client.end());
      },
      data(client, bytes) {
        const copy = new Uint8Array(bytes);
        client.data.toDaemon(copy);
        write(client.data.up, copy);
      },
      drain: (client) => flush(client.data.down),
      close: (client) => void client.data.up.to?.end(),
    },
  });
}

let h: Home;
let b: Bridge;
let proxy: ReturnType<typeof countingProxy>;
let bridgeHome: string;
let ws: string;
const wire = new Wire();
const ids: Record<"busy" | "quiet" | "closed", string> = { busy: "", quiet: "", closed: "" };
const EVENTS = 1500;

async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`http://hutch${path}`, {
    method,
    unix: join(h.home, "hutch.sock"),
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}
const lastSeq = async (id: string) => (await api<{ lastSeq: number }>("GET", `/v1/sessions/${id}`)).lastSeq;
const append = (id: string, events: ReturnType<typeof fixtureEvent>[]) => api("POST", `/v1/sessions/${id}/events`, { events });

beforeAll(async () => {
  h = makeHome("hutch-idr-");
  ws = mkdtempSync(join(tmpdir(), "hutch-idr-ws-"));
  mkdirSync(join(ws, "src"));
  const made = await h.run(["box", "create", "idr", "--start"]);
  if (made.code !== 0) throw new Error(made.stderr);
  // `sleep` prints nothing: after the setup below, nothing more is appended unless the test appends it.
  for (const k of ["busy", "quiet", "closed"] as const) {
    ids[k] = (await api<{ id: string }>("POST", "/v1/sessions", { box: "idr", argv: ["sleep", "3600"], label: k })).id;
    for (let i = 0; i < EVENTS; i += 500)
      await append(
        ids[k],
        Array.from({ length: 500 }, (_, j) => fixtureEvent(Events.annotationAdded, { text: `${k} ${i + j}` })),
      );
  }
  await append(ids.busy, [
    fixtureEvent(Events.annotationAdded, { text: "look here", anchor: { path: "src/a.ts", line: 2 } }),
    fixtureEvent(Events.attentionRequired, { reason: "approve?" }),
  ]);
  await api("POST", `/v1/sessions/${ids.closed}/close`, {});
  await waitFor("the terminals to have started", async () => (await lastSeq(ids.quiet)) > EVENTS + 1 || null);
  bridgeHome = mkdtempSync(join(tmpdir(), "hutch-idr-b-"));
  proxy = countingProxy(join(bridgeHome, "hutch.sock"), join(h.home, "hutch.sock"), wire);
  b = startBridge(HUTCH, { ...h.env, HUTCH_HOME: bridgeHome });
}, 60_000);

afterAll(async () => {
  await b?.stop();
  proxy?.stop(true);
  await h.cleanup();
  for (const d of [ws, bridgeHome]) if (d) rmSync(d, { recursive: true, force: true });
});

describe("what the IDE bridge reads", () => {
  test("at start: summaries and one tail per open session, no log", async () => {
    await b.conn.sendRequest("initialize", { processId: process.pid, rootUri: pathToFileURL(ws).href, capabilities: {} });
    await b.conn.sendNotification("initialized", {});
    await b.waitFor<DaemonStatus>("hutch/daemon", (p) => p.connected);
    const list = await b.conn.sendRequest<ListResult>("hutch/list");
    const activity = Object.fromEntries(list.sessions.map((s) => [s.label, s.activity]));
    expect(activity).toEqual({ busy: "needs-input", quiet: "idle", closed: "closed" });
    const uri = pathToFileURL(join(ws, "src/a.ts")).href;
    const d = await b.waitFor<{ uri: string; diagnostics: { message: string }[] }>("textDocument/publishDiagnostics", (p) => p.uri === uri);
    expect(d.diagnostics.map((x) => x.message)).toEqual([expect.stringMatching(/^look here \(.+, busy\)$/)]);
    await waitFor("a tail of each open session", () => wire.subscriptions.size === 2 || null);
    expect(Object.fromEntries(wire.subscriptions)).toEqual({ [ids.busy]: 1, [ids.quiet]: 1 });
    // Each log holds over 1,500 events; the bridge was sent none of them.
    expect(wire.totalEvents).toBe(0);
  });

  test("then only what is appended, through those tails", async () => {
    await append(ids.busy, [fixtureEvent(Events.annotationAdded, { text: "and here", anchor: { path: "src/a.ts", line: 4 } })]);
    await append(ids.quiet, [fixtureEvent(Events.attentionRequired, { reason: "stuck" })]);
    await b.waitFor<Change>(
      "hutch/changed",
      (c) => c.type === "session" && c.session.id === ids.quiet && c.session.activity === "needs-input",
    );
    const uri = pathToFileURL(join(ws, "src/a.ts")).href;
    await b.waitFor<{ uri: string; diagnostics: unknown[] }>(
      "textDocument/publishDiagnostics",
      (p) => p.uri === uri && p.diagnostics.length === 2,
    );
    expect(Object.fromEntries(wire.events)).toEqual({ [ids.busy]: 1, [ids.quiet]: 1 });
    expect(Object.fromEntries(wire.subscriptions)).toEqual({ [ids.busy]: 1, [ids.quiet]: 1 });
  });

  test("a log view reads the log once, through the session's one subscription", async () => {
    const before = wire.eventsOf(ids.busy);
    const got: number[] = [];
    const { subscription } = await b.conn.sendRequest<{ subscription: string }>("hutch/subscribe", { session: ids.busy, from: 1 });
    b.on<EventsNotification>("hutch/events", (n) => {
      if (n.subscription === subscription) got.push(...n.events.map((e) => e.seq));
    });
    await b.waitFor<EventsNotification>("hutch/events", (n) => n.subscription === subscription && n.caughtUp !== undefined);
    const last = await lastSeq(ids.busy);
    expect(got).toEqual(Array.from({ length: last }, (_, i) => i + 1));
    await append(ids.busy, [fixtureEvent(Events.annotationAdded, { text: "live" })]);
    await waitFor("the live event in the view", () => got.at(-1) === last + 1 || null);
    // The history once, as pages, and the live event once for the view and the watcher together.
    expect(wire.eventsOf(ids.busy) - before).toBe(last + 1);
    expect(wire.subscriptions.get(ids.busy)).toBe(1);
    await b.conn.sendRequest("hutch/unsubscribe", { subscription });
  });
});
