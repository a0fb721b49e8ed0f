// The broker's per-box cap, end to end: one process box opens 10,000 connections
// to its broker and leaves each request half sent. It gets its cap's worth
// held and a 503 naming the cap for the rest, the session log gets a few
// counting records instead of thousands, the daemon's fds stay bounded, and a
// second box is served meanwhile. Real boxes through dist/hutch, the fake
// model API as the upstream.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeHome, waitFor, type Home } from "../helpers.ts";
import { startFakeModel, type FakeModel } from "../fixtures/fake-model/index.ts";

const SECRET = `sk-fake-${crypto.randomUUID()}`;
/** The daemon's default (host/src/broker/cap.ts). */
const CAP = 256;
const FLOOD = 10_000;
const floodScript = readFileSync(join(import.meta.dir, "..", "fixtures", "broker-flood.py"), "utf8");
let h: Home;
let fake: FakeModel;
let session = "";

beforeAll(async () => {
  h = makeHome("hutch-cap-");
  fake = await startFakeModel();
  writeFileSync(
    join(h.home, "config.json"),
    JSON.stringify({
      bindings: {
        fake: {
          host: "localhost",
          port: fake.port,
          address: "127.0.0.1",
          ca: fake.ca.caFile,
          header: "x-api-key",
          format: "{secret}",
          secret: "fake",
          methods: ["POST"],
          paths: ["/v1/"],
          env: { FAKE_KEY: "{stub}" },
        },
      },
    }),
  );
  expect((await h.run(["secret", "set", "fake"], { stdin: SECRET })).code).toBe(0);
  for (const name of ["flood", "calm"]) {
    const r = await h.run(["box", "create", name, "--start", "--secret", "fake"]);
    expect(r.code, r.stderr).toBe(0);
  }
  const run = await h.run(["run", "flood", "--detach", "--json"]);
  expect(run.code, run.stderr).toBe(0);
  session = (JSON.parse(run.stdout) as { id: string }).id;
}, 60_000);

afterAll(async () => {
  await h.cleanup();
  await fake.stop();
});

const fds = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the flood ended before its report: ${JSON.stringify(text.slice(-500))}`);
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.split("\n")[0]!;
}

/** One model call from a box through its broker, with the box's stub: the HTTP status curl saw, and the body. */
async function call(box: string): Promise<{ status: string; body: string }> {
  const body = JSON.stringify({ model: "m", max_tokens: 8, messages: [{ role: "user", content: "hi" }] });
  const r = await h.run([
    "exec",
    box,
    "--",
    "sh",
    "-c",
    `curl -sS -m 10 -o /tmp/out -w '%{http_code}' -H "x-api-key: $FAKE_KEY" -H 'content-type: application/json' --data '${body}' http://127.0.0.1:3128/fake/v1/messages; echo; cat /tmp/out`,
  ]);
  const [status = "", ...rest] = r.stdout.split("\n");
  return { status, body: rest.join("\n") };
}

interface FloodCounts {
  opened: number;
  answered: Record<string, number>;
  closedUnanswered: number;
  errors: number;
  held: number;
  sample: string;
}

/** Starts the flood in the box and waits for its report, sampling the daemon's fd count all along; the flood holds what it holds until stop(). */
async function flood(window: number): Promise<{ counts: FloodCounts; peak: number; stop(): Promise<void> }> {
  const pid = h.daemonPid()!;
  const stub = (await h.run(["exec", "flood", "--", "printenv", "FAKE_KEY"])).stdout.trim();
  expect(stub).toStartWith("hutch-stub-fake-");
  const proc = h.spawn(["exec", "flood", "--", "python3", "-c", floodScript, String(FLOOD), stub, String(window)]);
  let peak = fds(pid);
  const sampler = setInterval(() => (peak = Math.max(peak, fds(pid))), 20);
  const line = await firstLine(proc.stdout as ReadableStream<Uint8Array>)
    .catch(async (err: Error) => {
      throw new Error(`${err.message}; stderr: ${(await new Response(proc.stderr as ReadableStream<Uint8Array>).text()).slice(-2000)}`);
    })
    .finally(() => clearInterval(sampler));
  peak = Math.max(peak, fds(pid));
  const counts = JSON.parse(line) as FloodCounts;
  console.error(
    `flood (window ${window}): ${JSON.stringify({ ...counts, sample: undefined })}; daemon fds: ${baseline} before, ${peak} at most`,
  );
  const stop = async () => {
    (proc.stdin as import("bun").FileSink).end();
    await proc.exited;
    // Its connections close, the cap's worth of gate connections with them, and the box is served again.
    await waitFor("the daemon's fds to come back", () => fds(pid) <= baseline + 8, 15_000);
    expect((await call("flood")).status).toBe("200");
  };
  return { counts, peak, stop };
}

/** Cap refusals in the box's egress log, and the number of refusals they count. */
async function capRecords(): Promise<{ records: number; refused: number }> {
  const denied = JSON.parse((await h.run(["box", "egress", "flood", "--json", "--limit", "1000"])).stdout) as {
    status?: number;
    reason?: string;
  }[];
  const cap = denied.filter((d) => d.status === 503);
  return {
    records: cap.length,
    refused: cap.reduce((sum, d) => sum + Number(/^([0-9]+) connections? refused/.exec(d.reason ?? "")?.[1] ?? NaN), 0),
  };
}

let baseline = 0;

test("10,000 half-sent requests at the pace the box is answered: the cap's worth is held, every other one gets a 503 naming the cap, the log gets a few counting records, the daemon's fds stay bounded, another box is served", async () => {
  expect((await call("calm")).status).toBe("200");
  baseline = fds(h.daemonPid()!);
  const { counts, peak, stop } = await flood(128);

  expect(counts).toMatchObject({ opened: FLOOD, held: CAP, answered: { "503": FLOOD - CAP }, closedUnanswered: 0, errors: 0 });
  expect(counts.sample).toStartWith("HTTP/1.1 503 Service Unavailable");
  expect(counts.sample).toContain(`the box has ${CAP} connections open to the broker, its cap`);
  expect(counts.sample).toContain("close connections it no longer uses");
  // The daemon holds two fds per held connection (the relay's and the gate's), not two per attempt.
  expect(peak - baseline).toBeLessThanOrEqual(2 * CAP + 64);

  // While the flood holds its cap: the other box is served with the real secret; the flooding box is refused.
  fake.reset();
  const calm = await call("calm");
  expect(calm.status).toBe("200");
  expect(fake.modelCalls("anthropic")).toHaveLength(1);
  expect(fake.modelCalls("anthropic")[0]!.headers["x-api-key"]).toBe(SECRET);
  const refused = await call("flood");
  expect(refused.status).toBe("503");
  expect(refused.body).toContain("its cap");

  // Folded: at most a record a second (the first at once), counting every refusal; the session log has the same, no more.
  const { records, refused: total } = await waitFor(`${FLOOD - CAP + 1} refusals counted in the egress log`, async () => {
    const now = await capRecords();
    return now.refused >= FLOOD - CAP + 1 ? now : null;
  });
  console.error(`cap refusals: ${total} in ${records} egress record(s)`);
  expect(total).toBe(FLOOD - CAP + 1);
  expect(records).toBeGreaterThanOrEqual(1);
  expect(records).toBeLessThan(40);
  const log = await h.run(["session", "log", session, "--json"]);
  const events = log.stdout
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { kind?: string; data?: { status?: number } })
    .filter((e) => e.kind === "egress.denied" && e.data?.status === 503);
  expect(events.length).toBe(records);

  await stop();
}, 60_000);

test("10,000 as fast as the box can open them: whatever the guest sheds, the daemon's fds stay bounded and another box is served", async () => {
  const before = await capRecords();
  const { counts, peak, stop } = await flood(0);

  expect(counts.opened + counts.errors).toBe(FLOOD);
  expect(counts.held).toBe(CAP);
  // Every answer is the cap's 503; the rest the guest dropped unanswered (it keeps at most 256 connections waiting for the host).
  expect(Object.keys(counts.answered)).toEqual(["503"]);
  expect(counts.answered["503"]! + counts.closedUnanswered + counts.errors + CAP).toBe(FLOOD);
  expect(peak - baseline).toBeLessThanOrEqual(2 * CAP + 64);
  expect((await call("calm")).status).toBe("200");

  const after = await waitFor("the second flood's refusals counted in the egress log", async () => {
    const now = await capRecords();
    return now.refused - before.refused >= counts.answered["503"]! ? now : null;
  });
  expect(after.refused - before.refused).toBeGreaterThanOrEqual(counts.answered["503"]!);
  expect(after.records - before.records).toBeLessThan(40);
  await stop();
}, 60_000);
