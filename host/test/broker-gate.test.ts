// The broker's gate in-process: real unix listeners per box, a real sealed
// secret in sqlite, real TLS upstreams on loopback (the fake model API, a
// plain TLS echo server, and one that records each request line as it
// arrived), and raw bytes from the "box" side.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDb } from "../src/store/db.ts";
import { BrokerStore } from "../src/store/broker.ts";
import { BrokerService } from "../src/broker/service.ts";
import { Sealer } from "../src/broker/seal.ts";
import type { Gate } from "../src/broker/gate.ts";
import type { EgressRecord } from "@hutch/shared";
import { startFakeModel, type FakeModel } from "../../tests/fixtures/fake-model/index.ts";
import { startRecordingUpstream, type RecordingUpstream } from "../../tests/fixtures/recording-upstream.ts";

const SECRET = `sk-ant-real-${crypto.randomUUID()}`;
const home = mkdtempSync(join(tmpdir(), "hutch-gate-"));
const db = openDb(join(home, "hutch.db"));
// Test names: a public-looking name that resolves to the metadata address, and one to loopback.
const names: Record<string, string> = { "metadata.example.test": "169.254.169.254", "loop.example.test": "127.0.0.1", localhost: "::1" };
const broker = new BrokerService(new BrokerStore(db), Sealer.load(join(home, "keys/secrets.key")), join(home, "config.json"), async (h) => {
  const a = names[h];
  if (!a) throw new Error("NXDOMAIN");
  return a;
});
let fake: FakeModel;
let rec: RecordingUpstream;
/** The same broker with a short body idle time, for the test of it. */
const IDLE_MS = 1000;
const idleBroker = new BrokerService(
  new BrokerStore(db),
  Sealer.load(join(home, "keys/secrets.key")),
  join(home, "config.json"),
  async () => "127.0.0.1",
  { bodyIdleMs: IDLE_MS },
);
const sockIdle = join(home, "idle.sock");
let sawAuth: string | null = null;
const firstSeen = Promise.withResolvers<void>();
let echo: ReturnType<typeof Bun.serve>;
const gates: Gate[] = [];
const sockA = join(home, "a.sock");
const sockB = join(home, "b.sock");

beforeAll(async () => {
  fake = await startFakeModel();
  rec = startRecordingUpstream(fake.ca);
  // A TLS server standing in for an allowlisted host (CONNECT goes through untouched).
  echo = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: fake.ca.cert, key: fake.ca.key },
    fetch: (req) => {
      const blob = /^\/v1\/blob\/([0-9]+)$/.exec(new URL(req.url).pathname);
      if (blob) return new Response(blobBytes(Number(blob[1])));
      if (new URL(req.url).pathname !== "/v1/stream") return new Response(`hello over ${new URL(req.url).pathname}`);
      sawAuth = req.headers.get("authorization");
      // The second event is held back until the test has seen the first through the broker.
      const body = new ReadableStream<Uint8Array>({
        async start(c) {
          c.enqueue(new TextEncoder().encode("data: first\n\n"));
          await firstSeen.promise;
          c.enqueue(new TextEncoder().encode("data: second\n\n"));
          c.close();
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    },
  });
  writeFileSync(
    join(home, "config.json"),
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
          methods: ["POST", "GET"],
          paths: ["/v1/"],
        },
        sse: {
          host: "localhost",
          port: echo.port,
          address: "127.0.0.1",
          ca: fake.ca.caFile,
          header: "Authorization",
          format: "Bearer {secret}",
          secret: "fake",
          methods: ["GET"],
          paths: ["/v1/"],
        },
        rec: {
          host: "localhost",
          port: rec.port,
          address: "127.0.0.1",
          ca: fake.ca.caFile,
          header: "x-api-key",
          format: "{secret}",
          secret: "fake",
          methods: ["GET", "POST"],
          paths: ["/v1/", "/api/"],
        },
      },
      broker: { pins: { "tls.example.test": "127.0.0.1" } },
    }),
  );
  await broker.setSecret("fake", SECRET);
  db.query("INSERT INTO box_policy (box_id, allow, bindings) VALUES ('box_a', ?, ?), ('box_b', ?, ?)").run(
    JSON.stringify([`tls.example.test:${echo.port}`, "metadata.example.test", "loop.example.test", "169.254.169.254", "localhost"]),
    JSON.stringify(["fake", "sse", "rec"]),
    JSON.stringify([]),
    JSON.stringify(["fake"]),
  );
  gates.push(await broker.openGate("box_a", sockA), await broker.openGate("box_b", sockB), await idleBroker.openGate("box_a", sockIdle));
});

afterAll(async () => {
  for (const g of gates) g.close();
  echo.stop(true);
  rec.stop();
  await fake.stop();
  db.close();
  rmSync(home, { recursive: true, force: true });
});

/** n bytes the test can check without keeping a copy: byte i is (i * 7 + i >> 12) & 255. */
function blobBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 7 + (i >> 12)) & 255;
  return out;
}

/** Reads one response with a content-length from s (the head and exactly that many body bytes). */
function readResponse(s: Socket): Promise<{ head: string; body: Buffer }> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buf.subarray(0, end).toString("latin1");
      const length = Number(/content-length: *([0-9]+)/i.exec(head)?.[1] ?? NaN);
      if (buf.length - end - 4 < length) return;
      s.off("data", onData);
      resolve({ head, body: buf.subarray(end + 4, end + 4 + length) });
    };
    s.on("data", onData);
    s.once("close", () => reject(new Error(`closed after ${buf.length} bytes`)));
  });
}

/** Sends raw bytes on a fresh connection to a box's listener and returns everything until the broker closes. */
async function raw(sock: string, bytes: string | Uint8Array, waitMs = 5000): Promise<string> {
  const s = netConnect(sock);
  const chunks: Buffer[] = [];
  s.on("data", (c: Buffer) => chunks.push(c));
  s.write(bytes);
  await new Promise<void>((resolve) => {
    const t = setTimeout(() => {
      s.destroy();
      resolve();
    }, waitMs);
    s.on("close", () => {
      clearTimeout(t);
      resolve();
    });
  });
  return Buffer.concat(chunks).toString("latin1");
}

const messages = (stub: string, extra = "") =>
  `POST /fake/v1/messages HTTP/1.1\r\nhost: 127.0.0.1:3128\r\nx-api-key: ${stub}\r\ncontent-type: application/json\r\nconnection: close\r\n${extra}content-length: ${BODY.length}\r\n\r\n${BODY}`;
const BODY = JSON.stringify({ model: "claude-test", max_tokens: 64, stream: true, messages: [{ role: "user", content: "say hi" }] });

describe("credentialed endpoints", () => {
  test("the box's stub is swapped for the real secret; the upstream sees only the secret; SSE streams back", async () => {
    fake.reset();
    const out = await raw(sockA, messages(broker.stub("box_a", "fake")));
    expect(out).toStartWith("HTTP/1.1 200");
    expect(out).toContain("transfer-encoding: chunked");
    expect(out).toContain("event: message_stop");
    const seen = fake.modelCalls("anthropic");
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers["x-api-key"]).toBe(SECRET);
    expect(JSON.stringify(seen[0]!.headers)).not.toContain("hutch-stub");
    expect(out).not.toContain(SECRET);
  });

  test("an event stream is passed on as it arrives, not when it ends", async () => {
    const s = netConnect(sockA);
    let got = "";
    const first = new Promise<void>((resolve) =>
      s.on("data", (c: Buffer) => {
        got += c.toString("latin1");
        if (got.includes("data: first")) resolve();
      }),
    );
    s.write(`GET /sse/v1/stream HTTP/1.1\r\nauthorization: Bearer ${broker.stub("box_a", "sse")}\r\nconnection: close\r\n\r\n`);
    await first;
    expect(got).not.toContain("data: second");
    firstSeen.resolve();
    await new Promise<void>((resolve) => s.on("close", () => resolve()));
    expect(got).toContain("data: second");
    expect(sawAuth).toBe(`Bearer ${SECRET}`);
  });

  test("box A's stub presented through box B's listener is refused and nothing is forwarded", async () => {
    fake.reset();
    const out = await raw(sockB, messages(broker.stub("box_a", "fake")));
    expect(out).toStartWith("HTTP/1.1 403");
    expect(out).toContain("not this box's stub");
    expect(fake.requests).toHaveLength(0);
  });

  test("no stub, a wrong path, a wrong method and an unknown binding fail closed", async () => {
    fake.reset();
    const stub = broker.stub("box_a", "fake");
    expect(await raw(sockA, messages("hutch-stub-fake-forged"))).toStartWith("HTTP/1.1 403");
    expect(await raw(sockA, `GET /fake/admin HTTP/1.1\r\nx-api-key: ${stub}\r\nconnection: close\r\n\r\n`)).toStartWith("HTTP/1.1 403");
    expect(await raw(sockA, `DELETE /fake/v1/x HTTP/1.1\r\nx-api-key: ${stub}\r\nconnection: close\r\n\r\n`)).toStartWith("HTTP/1.1 405");
    expect(await raw(sockA, `GET /nope/v1/x HTTP/1.1\r\nconnection: close\r\n\r\n`)).toStartWith("HTTP/1.1 404");
    expect(await raw(sockA, `GET http://example.com/ HTTP/1.1\r\nconnection: close\r\n\r\n`)).toContain("plain-HTTP proxying is refused");
    expect(fake.requests).toHaveLength(0);
  });

  test("two requests on one kept-alive connection both go through", async () => {
    fake.reset();
    const stub = broker.stub("box_a", "fake");
    const one = `POST /fake/v1/messages HTTP/1.1\r\nx-api-key: ${stub}\r\ncontent-length: ${BODY.length}\r\n\r\n${BODY}`;
    const out = await raw(sockA, one + messages(stub));
    expect(out.match(/HTTP\/1\.1 200/g)).toHaveLength(2);
    expect(fake.modelCalls("anthropic")).toHaveLength(2);
  });

  test("a large body with a length goes to the box byte for byte, and the connection carries the next request", async () => {
    const s = netConnect(sockA);
    const auth = `authorization: Bearer ${broker.stub("box_a", "sse")}\r\n`;
    const size = 8 * 1024 * 1024 + 3;
    const first = readResponse(s);
    s.write(`GET /sse/v1/blob/${size} HTTP/1.1\r\n${auth}\r\n`);
    const big = await first;
    expect(big.head).toStartWith("HTTP/1.1 200");
    expect(big.body.length).toBe(size);
    expect(big.body.equals(Buffer.from(blobBytes(size)))).toBe(true);
    expect(broker.egress("box_a", "injected", 1)[0]).toMatchObject({ path: `/v1/blob/${size}`, status: 200, bytesDown: size });
    // The socket is still the gate's after the native write (a collection must not close it either).
    Bun.gc(true);
    const second = readResponse(s);
    s.write(`GET /sse/v1/blob/1000 HTTP/1.1\r\n${auth}\r\n`);
    const small = await second;
    expect(small.head).toStartWith("HTTP/1.1 200");
    expect(small.body.equals(Buffer.from(blobBytes(1000)))).toBe(true);
    s.destroy();
  });

  test("a box that hangs up in the middle of a large body leaves the gate serving", async () => {
    const s = netConnect(sockA);
    let got = 0;
    const some = new Promise<void>((resolve) =>
      s.on("data", (c: Buffer) => {
        got += c.length;
        if (got > 1024 * 1024) resolve();
      }),
    );
    s.write(`GET /sse/v1/blob/${64 * 1024 * 1024} HTTP/1.1\r\nauthorization: Bearer ${broker.stub("box_a", "sse")}\r\n\r\n`);
    await some;
    s.destroy();
    const out = await raw(
      sockA,
      `GET /sse/v1/blob/10 HTTP/1.1\r\nauthorization: Bearer ${broker.stub("box_a", "sse")}\r\nconnection: close\r\n\r\n`,
    );
    expect(out).toStartWith("HTTP/1.1 200");
  });

  test("a chunked request body is forwarded whole", async () => {
    fake.reset();
    const stub = broker.stub("box_a", "fake");
    const half = Math.floor(BODY.length / 2);
    const chunked = `${half.toString(16)}\r\n${BODY.slice(0, half)}\r\n${(BODY.length - half).toString(16)}\r\n${BODY.slice(half)}\r\n0\r\n\r\n`;
    const out = await raw(
      sockA,
      `POST /fake/v1/messages HTTP/1.1\r\nx-api-key: ${stub}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n${chunked}`,
    );
    expect(out).toStartWith("HTTP/1.1 200");
    expect(fake.modelCalls("anthropic")[0]!.body).toEqual(JSON.parse(BODY));
  });

  test("a secret that is not set answers 503 naming the command that sets it", async () => {
    broker.removeSecret("fake");
    try {
      const out = await raw(sockA, messages(broker.stub("box_a", "fake")));
      expect(out).toStartWith("HTTP/1.1 503");
      expect(out).toContain("hutch secret set fake");
    } finally {
      await broker.setSecret("fake", SECRET);
    }
  });
});

describe("paths: the upstream receives only the path that was checked", () => {
  // Each target from the box, and either the status the broker answers or the exact request-target the upstream receives.
  const cases: [string, number | string][] = [
    ["/rec/v1/messages", "/v1/messages"],
    ["/rec/v1/../secret", 403],
    ["/rec/v1/%2e%2e/admin", 400],
    ["/rec/v1/%2E%2E/admin", 400],
    ["/rec/v1/.%2e/admin", 400],
    ["/rec/v1/./../x", 403],
    ["/rec/v1/../../../../etc/passwd", 404],
    ["/rec/v1/./messages", "/v1/messages"],
    ["/rec/v1/a/../messages", "/v1/messages"],
    ["/rec/v1//messages", "/v1/messages"],
    ["/rec//v1/messages", "/v1/messages"],
    ["/rec/v1/messages/..", "/v1/"],
    ["/rec/v1/..", 403],
    ["/rec/v1//../admin", "/v1/admin"],
    ["/rec/v1/..\\admin", 400],
    ["/rec/v1\\..\\admin", 400],
    ["/rec/v1/%5c..%5cadmin", 400],
    ["/rec/v1/..%2fadmin", 400],
    ["/rec/v1/%2F..%2Fadmin", 400],
    ["/rec/v1/%c0%ae%c0%ae/admin", 400],
    ["/rec/v1/..;/admin", 400],
    ["/rec/v1/x%00", 400],
    ["/rec/v1/x%0d%0aevil:%201", 400],
    ["/rec/v1/x#/../../admin", 400],
    ["/rec/v1/x?/../../admin", "/v1/x?/../../admin"],
    ["/rec/v1?/../x", 403],
    ["/rec/v1/x?q=%2e%2e", "/v1/x?q=%2e%2e"],
    ['/rec/v1/a"b', 400],
    ["/rec/v1/x?q='", 400],
    ["/rec/v1/%41bc", "/v1/%41bc"],
    ["/rec/%2e%2e/other", 400],
    ["/rec/../fake/v1/x", 403],
    ["http://127.0.0.1:3128/rec/v1/../admin", 403],
    ["http://127.0.0.1:3128/rec/v1/./ok", "/v1/ok"],
    ["http://localhost/rec/v1/%2e%2e/admin", 400],
    ["HTTP://LOCALHOST:3128/rec//api/./x", "/api/x"],
    ["http://localhost@127.0.0.1/rec/v1/x", 403],
    ["http://example.com/rec/v1/x", 403],
  ];

  test("each trick is refused, or sent in its normalised form when that form is allowed; nothing else reaches the upstream", async () => {
    rec.requests.length = 0;
    const stub = broker.stub("box_a", "rec");
    const expected: string[] = [];
    for (const [target, want] of cases) {
      const before = rec.requests.length;
      const out = await raw(sockA, `GET ${target} HTTP/1.1\r\nx-api-key: ${stub}\r\nconnection: close\r\n\r\n`);
      if (typeof want === "number") {
        expect(`${target} → ${out.split(" ", 2).join(" ")}`).toBe(`${target} → HTTP/1.1 ${want}`);
        expect(out).toContain("hutch broker:");
        expect(rec.requests.length).toBe(before);
      } else {
        expect(`${target} → ${out.split("\r\n")[0]}`).toBe(`${target} → HTTP/1.1 200 OK`);
        expect(rec.requests.at(-1)?.target).toBe(want);
        expected.push(want);
      }
    }
    // The upstream's own record, request line by request line: exactly the normalised targets, each under a prefix, each with the secret.
    expect(rec.requests.map((r) => r.target)).toEqual(expected);
    for (const r of rec.requests) {
      expect(["/v1/", "/api/"].some((p) => r.target.startsWith(p))).toBe(true);
      expect(r.target.split("?")[0]).not.toMatch(/\/\.\.?(\/|$)|\/\/|%2e|%2f|%5c|\\\\/i);
      expect(r.headers["x-api-key"]).toBe(SECRET);
    }
  });

  test("a refused path is an egress.denied record naming the path as checked", async () => {
    const stub = broker.stub("box_a", "rec");
    await raw(sockA, `GET /rec/v1/../secret HTTP/1.1\r\nx-api-key: ${stub}\r\nconnection: close\r\n\r\n`);
    expect(broker.egress("box_a", "denied", 1)[0]).toMatchObject({ binding: "rec", path: "/secret", status: 403 });
    await raw(sockA, `GET /rec/v1/%2e%2e/admin HTTP/1.1\r\nx-api-key: ${stub}\r\nconnection: close\r\n\r\n`);
    expect(broker.egress("box_a", "denied", 1)[0]).toMatchObject({ path: "/rec/v1/%2e%2e/admin", status: 400 });
    expect(broker.egress("box_a", "denied", 1)[0]!.reason).toContain("%2e");
  });
});

describe("request bodies that stall", () => {
  /** Sends a head and then body pieces with pauses; resolves to what came back and whether the broker closed the connection. */
  async function send(head: string, pieces: string[], pauseMs: number): Promise<{ out: string; closedByBroker: boolean }> {
    const s = netConnect(sockIdle);
    let out = "";
    let closedByBroker = false;
    s.on("data", (c: Buffer) => (out += c.toString("latin1")));
    const closed = new Promise<void>((resolve) => s.on("close", () => resolve()));
    s.on("end", () => (closedByBroker = true));
    s.write(head);
    for (const p of pieces) {
      await Bun.sleep(pauseMs);
      if (!s.destroyed) s.write(p);
    }
    const timeout = setTimeout(() => s.destroy(), 4_000);
    await closed;
    clearTimeout(timeout);
    return { out, closedByBroker };
  }

  test("a body that stops arriving is answered 408, recorded as egress.denied, and its connection closed; nothing is forwarded", async () => {
    fake.reset();
    const before = idleBroker.egress("box_a", "denied", 100_000).length;
    const stub = broker.stub("box_a", "fake");
    const head = `POST /fake/v1/messages HTTP/1.1\r\nx-api-key: ${stub}\r\ncontent-length: ${BODY.length}\r\n\r\n`;
    const { out, closedByBroker } = await send(head + BODY.slice(0, 10), [], 0);
    expect(out).toStartWith("HTTP/1.1 408 Request Timeout");
    expect(out).toContain("the request body stalled");
    expect(out).toContain("connection: close");
    expect(closedByBroker).toBe(true);
    expect(fake.requests).toHaveLength(0);
    const denied = idleBroker.egress("box_a", "denied", 100_000);
    expect(denied.length).toBe(before + 1);
    expect(denied.at(-1)).toMatchObject({ decision: "denied", status: 408, binding: "fake", path: "/v1/messages", method: "POST" });
  });

  test("a chunked body that stops arriving is answered 408 too", async () => {
    const stub = broker.stub("box_a", "fake");
    const { out } = await send(
      `POST /fake/v1/messages HTTP/1.1\r\nx-api-key: ${stub}\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel`,
      [],
      0,
    );
    expect(out).toStartWith("HTTP/1.1 408");
  });

  test("a body that arrives slowly but steadily, for longer than the idle time in all, goes through", async () => {
    fake.reset();
    const stub = broker.stub("box_a", "fake");
    const pieces = Array.from({ length: 6 }, (_, i) => BODY.slice((i * BODY.length) / 6, ((i + 1) * BODY.length) / 6));
    const head = `POST /fake/v1/messages HTTP/1.1\r\nx-api-key: ${stub}\r\nconnection: close\r\ncontent-length: ${BODY.length}\r\n\r\n`;
    const { out } = await send(head, pieces, IDLE_MS / 4);
    expect(out).toStartWith("HTTP/1.1 200");
    expect(fake.modelCalls("anthropic")[0]!.body).toEqual(JSON.parse(BODY));
  });
});

/** CONNECT through a box's listener, then TLS to the far end with the test CA; resolves to the HTTP answer. */
const allowedCount = (box: string) => broker.egress(box, "allowed", 100_000).length;

/** The allowed egress record a box gets after it had `before`, waiting up to 2 s for it. */
async function recorded(box: string, before: number): Promise<EgressRecord | undefined> {
  for (let i = 0; i < 200 && allowedCount(box) <= before; i++) await Bun.sleep(10);
  return broker.egress(box, "allowed", 100_000)[before];
}

async function tunnel(sock: string, target: string): Promise<string> {
  const s: Socket = netConnect(sock);
  const head = await new Promise<string>((resolve, reject) => {
    let got = "";
    const onData = (c: Buffer) => {
      got += c.toString("latin1");
      if (got.includes("\r\n\r\n")) {
        s.off("data", onData);
        resolve(got);
      }
    };
    s.on("data", onData);
    s.on("error", reject);
    s.on("close", () => resolve(got));
    s.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n\r\n`);
  });
  if (!head.startsWith("HTTP/1.1 200")) return head;
  const t = tlsConnect({ socket: s, servername: "localhost", ca: readFileSync(fake.ca.caFile) });
  const chunks: Buffer[] = [];
  t.on("data", (c: Buffer) => chunks.push(c));
  t.write("GET /through HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
  await new Promise<void>((resolve) => t.on("close", () => resolve()));
  return Buffer.concat(chunks).toString("latin1");
}

describe("CONNECT", () => {
  test("an allowlisted host (pinned to loopback) is tunnelled untouched", async () => {
    const before = allowedCount("box_a");
    const out = await tunnel(sockA, `tls.example.test:${echo.port}`);
    expect(out).toStartWith("HTTP/1.1 200");
    expect(out).toContain("hello over /through");
    // A tunnel is recorded when both of its sides have closed, which the box may see a moment before the broker does.
    const last = await recorded("box_a", before);
    expect(last).toMatchObject({ host: "tls.example.test", port: echo.port, decision: "allowed" });
    expect(last?.bytesDown).toBeGreaterThan(100);
  });

  test("a host not on the list is refused and logged", async () => {
    const out = await tunnel(sockA, "evil.example.test:443");
    expect(out).toStartWith("HTTP/1.1 403");
    expect(out).toContain("not on this box's allowlist");
    expect(broker.egress("box_a", "denied", 1)[0]).toMatchObject({ host: "evil.example.test", port: 443 });
  });

  test("the same host on another box is refused: allowlists are per box", async () => {
    expect(await tunnel(sockB, `tls.example.test:${echo.port}`)).toStartWith("HTTP/1.1 403");
  });

  test("names resolving to the metadata address or loopback, and such literals, are refused without a pin", async () => {
    for (const target of ["metadata.example.test:443", "loop.example.test:443", "169.254.169.254:443", "localhost:443"]) {
      const out = await tunnel(sockA, target);
      expect(out).toStartWith("HTTP/1.1 403");
      expect(out).toMatch(/169\.254|127\.0\.0\.1|::1|loopback|link-local/);
    }
  });

  test("a port that is not allowed for an allowed host is refused", async () => {
    const out = await tunnel(sockA, "tls.example.test:22");
    expect(out).toStartWith("HTTP/1.1 403");
    expect(out).toContain("port 22 is not allowed");
  });

  test("a policy change applies to the next connection", async () => {
    broker.changePolicy("box_b", { allow: [`tls.example.test:${echo.port}`] });
    expect(await tunnel(sockB, `tls.example.test:${echo.port}`)).toContain("hello over /through");
    broker.changePolicy("box_b", { deny: [`tls.example.test:${echo.port}`] });
    expect(await tunnel(sockB, `tls.example.test:${echo.port}`)).toStartWith("HTTP/1.1 403");
  });
});

describe("bad input", () => {
  const cases: [string, string, number][] = [
    ["a bare LF inside a header value", `POST /fake/v1/messages HTTP/1.1\r\nx-api-key: a\nx-evil: 1\r\n\r\n`, 400],
    ["a bare CR inside a header value", `POST /fake/v1/messages HTTP/1.1\r\nx-api-key: a\rx-evil: 1\r\n\r\n`, 400],
    ["an oversized header block", `GET /fake/v1/x HTTP/1.1\r\n${"x-pad: ".concat("a".repeat(1000), "\r\n").repeat(40)}\r\n`, 431],
    ["a header block that never ends", `GET /fake/v1/x HTTP/1.1\r\nx-pad: ${"a".repeat(40000)}`, 431],
    ["a malformed request line", "GET /fake/v1/x\r\n\r\n", 400],
    ["a request line that is not HTTP", "HELLO THERE\r\n\r\n", 400],
    ["a folded header", "GET /fake/v1/x HTTP/1.1\r\nx-a: 1\r\n  folded\r\n\r\n", 400],
    [
      "both Content-Length and Transfer-Encoding",
      "POST /fake/v1/x HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\nabc",
      400,
    ],
    ["a CONNECT without a port", "CONNECT tls.example.test HTTP/1.1\r\n\r\n", 400],
  ];
  for (const [what, bytes, status] of cases) {
    test(`${what}: ${status}, nothing forwarded, the broker keeps serving`, async () => {
      fake.reset();
      const out = await raw(sockA, bytes);
      expect(out).toStartWith(`HTTP/1.1 ${status}`);
      expect(out).toContain("hutch broker:");
      expect(fake.requests).toHaveLength(0);
      expect(await raw(sockA, messages(broker.stub("box_a", "fake")))).toStartWith("HTTP/1.1 200");
    });
  }
});

test("the secret is nowhere in the database outside its sealed column, nor in the egress log", () => {
  const dump = db
    .query("SELECT name FROM sqlite_master WHERE type = 'table'")
    .all()
    .map((t) => (t as { name: string }).name)
    .flatMap((table) =>
      db
        .query(`SELECT * FROM ${table}`)
        .all()
        .map((row) => JSON.stringify(row, (k, v) => (table === "secrets" && k === "sealed" ? undefined : v))),
    );
  expect(dump.join("\n")).not.toContain(SECRET);
  expect(dump.join("\n")).toContain("tls.example.test"); // positive control: the log is there
});

test("an egress record with an overlong reason, path or host is cut to the event's bounds, so the session log takes it", async () => {
  const { clipEgress } = await import("../src/broker/service.ts");
  const { checkEvent } = await import("@hutch/shared");
  const long = {
    host: "h".repeat(400),
    port: 443,
    method: "M".repeat(40),
    path: `/${"p".repeat(5000)}`,
    binding: "b".repeat(100),
    reason: `upstream said: ${"x".repeat(10_000)}`,
    status: 502,
    bytesUp: 0,
    bytesDown: 0,
    ms: 1,
  };
  expect(checkEvent("egress.denied", { box: "box_x", ...long })).not.toBeNull();
  const cut = clipEgress(long);
  expect(checkEvent("egress.denied", { box: "box_x", ...cut })).toBeNull();
  expect(cut.reason!.startsWith("upstream said: ")).toBe(true);
  expect(cut.reason!.length).toBe(1024);
});
