// A terminal that floods: the daemon keeps a capped window of its output
// (per session, box and user; small caps set through the environment so this
// runs fast), logs what it dropped, and the box and its terminal go on.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { HUTCH, makeHome, waitFor, type Home } from "../helpers.ts";

const SESSION_CAP = 512 * 1024;
const BOX_CAP = 768 * 1024;
const USER_CAP = 1024 * 1024;

let h: Home;
let sock: string;
let db: Database;
beforeAll(async () => {
  h = makeHome();
  sock = join(h.home, "hutch.sock");
  Object.assign(h.env, {
    HUTCH_PTY_SESSION_MAX_BYTES: String(SESSION_CAP),
    HUTCH_PTY_BOX_MAX_BYTES: String(BOX_CAP),
    HUTCH_PTY_USER_MAX_BYTES: String(USER_CAP),
  });
  expect((await h.run(["box", "create", "oc", "--start"])).code).toBe(0);
  expect((await h.run(["box", "create", "oc2", "--start"])).code).toBe(0);
  db = new Database(join(h.home, "hutch.db"), { readonly: true });
});
afterAll(async () => {
  db?.close();
  await h.cleanup();
});

type Ev = { seq: number; kind: string; data: Record<string, unknown> };

async function get(path: string) {
  const res = await fetch(`http://localhost${path}`, { unix: sock });
  // biome-ignore lint/suspicious/noExplicitAny: a test reads whatever JSON the route answered, field by field
  return { status: res.status, body: (await res.json()) as any };
}

/** The bytes the store holds for these sessions, counted from its rows. */
function stored(...sessions: string[]): number {
  const q = db.query<{ n: number }, [string]>("SELECT COALESCE(SUM(length(data)), 0) AS n FROM pty_chunks WHERE session_id = ?");
  return sessions.reduce((n, s) => n + q.get(s)!.n, 0);
}

async function events(sid: string, kind: string): Promise<Ev[]> {
  const out: Ev[] = [];
  for (let from = 1; ; ) {
    const page = (await get(`/v1/sessions/${sid}/events?from=${from}&limit=10000`)).body as { events: Ev[]; next: number; last: number };
    out.push(...page.events.filter((e) => e.kind === kind));
    if (page.events.length === 0 || page.next > page.last) return out;
    from = page.next;
  }
}

/** What the terminal printed last: the latest output chunks, without reading the whole log. */
async function recent(sid: string): Promise<string> {
  const last = (await get(`/v1/sessions/${sid}`)).body.lastSeq as number;
  const page = (await get(`/v1/sessions/${sid}/events?from=${Math.max(1, last - 60)}&limit=100`)).body as { events: Ev[] };
  let text = "";
  for (const e of page.events.filter((e) => e.kind === "output.appended")) {
    const res = await fetch(`http://localhost/v1/sessions/${sid}/output/${e.data.chunk}`, { unix: sock });
    if (res.ok) text += await res.text();
  }
  return text;
}

async function shell(box: string): Promise<string> {
  const r = await h.run(["run", box, "--detach"]);
  expect(r.code, r.stderr).toBe(0);
  const sid = r.stdout.trim();
  expect((await h.run(["session", "driver", "acquire", sid])).code).toBe(0);
  await waitFor("the shell's prompt", async () => (await recent(sid)).includes("$"));
  return sid;
}

async function send(sid: string, text: string): Promise<void> {
  const r = await h.run(["session", "send", sid, text]);
  expect(r.stderr, "session send's stderr").toBe("");
  expect(r.code).toBe(0);
}

const printed = (sid: string, marker: string, timeoutMs = 60_000) =>
  waitFor(`${marker} in ${sid}'s output`, async () => (await recent(sid)).includes(marker), timeoutMs);

let first = "";

test("a session writing far past its cap keeps at most the cap, logs the drops, and its terminal goes on", async () => {
  first = await shell("oc");
  await send(first, "head -c 6000000 /dev/urandom | base64; echo flood-$((6*7))");
  await printed(first, "flood-42");
  expect(stored(first)).toBeLessThanOrEqual(SESSION_CAP);
  expect(stored(first)).toBeGreaterThan(SESSION_CAP / 2);

  const drops = await events(first, "output.dropped");
  expect(drops[0]!.data).toMatchObject({ fromChunk: 0, offset: 0, cap: "session", limit: SESSION_CAP });
  // One drop per eighth of the cap, not one per chunk: 8 MB through a 512 KiB window.
  expect(drops.length).toBeLessThanOrEqual(Math.ceil(8_200_000 / (SESSION_CAP / 8)) + 1);
  expect(drops.reduce((n, d) => n + (d.data.bytes as number), 0) + stored(first)).toBeGreaterThan(8_000_000);

  // A dropped chunk reads as a 404 that says so, and the log reads through it.
  const gone = await get(`/v1/sessions/${first}/output/0`);
  expect(gone.status).toBe(404);
  expect(gone.body.error).toMatchObject({ code: "not_found", data: { dropped: true } });
  const log = await h.run(["session", "log", first]);
  expect(log.code).toBe(0);
  expect(log.stdout).toMatch(/│ \[\d+ bytes of output dropped\]/);
  expect(log.stdout).toMatch(/✂ \d+ bytes of older output dropped \(chunks 0-\d+, over the session cap of 524288 bytes\)/);
  // Each chunk is its own event, rendered on its own lines: the marker may straddle two of them.
  const printedText = log.stdout
    .split("\n")
    .map((l) => /^#\d+ \S+ \S+ │ ?(.*)$/.exec(l)?.[1] ?? "")
    .join("");
  expect(printedText).toContain("flood-42");

  await send(first, "echo after-$((5*5))");
  await printed(first, "after-25", 15_000);
}, 120_000);

test("the whole log reaches a reader that starts late: the CLI waits for its pipe, not exits with output queued", async () => {
  // A shell's pipe to a reader that sleeps first: far more than the pipe holds (64 KiB) waits before the first read.
  const proc = Bun.spawn(["sh", "-c", '"$0" session log "$1" | (sleep 1; cat)', HUTCH, first], { env: h.env, stdout: "pipe" });
  const text = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  expect(text.length).toBeGreaterThan(SESSION_CAP / 2);
  const last = (await get(`/v1/sessions/${first}`)).body.lastSeq as number;
  expect(text.trimEnd().split("\n").at(-1)).toStartWith(`#${last} `);
});

test("the box's and the user's totals hold across sessions", async () => {
  const second = await shell("oc");
  await send(second, "head -c 3000000 /dev/urandom | base64; echo second-$((6*7))");
  await printed(second, "second-42");
  expect(stored(first, second), "the box's bytes").toBeLessThanOrEqual(BOX_CAP);
  const boxDrops = [...(await events(first, "output.dropped")), ...(await events(second, "output.dropped"))].filter(
    (d) => d.data.cap === "box",
  );
  expect(boxDrops.length, "drops for the box's cap").toBeGreaterThan(0);

  // The user's total goes over its cap only once a second box holds more
  // than the user cap leaves beside the first: a session alone stays under its
  // own cap, so two floods in oc2 take that box up to its cap while oc keeps
  // what the first two left it (at least what the second session's cap keeps).
  const third = await shell("oc2");
  await send(third, "head -c 3000000 /dev/urandom | base64; echo third-$((6*7))");
  await printed(third, "third-42");
  const fourth = await shell("oc2");
  await send(fourth, "head -c 3000000 /dev/urandom | base64; echo fourth-$((6*7))");
  await printed(fourth, "fourth-42");
  expect(stored(first, second, third, fourth), "the user's bytes").toBeLessThanOrEqual(USER_CAP);
  expect(stored(first, second), "oc's bytes after the floods in oc2").toBeLessThanOrEqual(BOX_CAP);
  expect(stored(third, fourth), "oc2's bytes").toBeLessThanOrEqual(BOX_CAP);
  const all = await Promise.all([first, second, third, fourth].map((s) => events(s, "output.dropped")));
  expect(
    all.flat().some((d) => d.data.cap === "user"),
    `a drop for the user's cap among ${JSON.stringify(all.map((ds) => ds.map((d) => d.data.cap)))}`,
  ).toBe(true);
}, 120_000);

test("a 120 MB burst the terminal's screen cannot keep up with leaves the box running; the next command works", async () => {
  const sid = await shell("oc2");
  // Colour, erase and insert-line sequences: the costliest output for the guest's screen to parse.
  await send(sid, `yes "$(printf '\\033[1;31mxx\\033[0m\\033[K\\033[2A\\033[L')" | head -c 120000000; echo; echo burst-$((6*7))`);
  await printed(sid, "burst-42", 240_000);
  const boxes = JSON.parse((await h.run(["box", "list", "--json"])).stdout) as { name: string; state: string }[];
  expect(boxes.find((b) => b.name === "oc2")?.state).toBe("running");
  await send(sid, "echo still-$((3*3))");
  await printed(sid, "still-9", 15_000);
  expect(stored(sid)).toBeLessThanOrEqual(SESSION_CAP);
}, 300_000);
