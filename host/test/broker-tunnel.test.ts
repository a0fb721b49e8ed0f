// CONNECT tunnels through a real gate on a unix socket to a real TCP server on
// loopback, on both copy paths: the kernel's (splice in the worker, Linux) and
// JavaScript's (elsewhere). Bytes must arrive exactly, half-closes must pass
// through, and nothing may be left open: fds are counted in /proc/self/fd.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createConnection, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Socket as BunSocket, TCPSocketListener } from "bun";
import type { EgressDecision } from "@hutch/shared";
import { Gate, type EgressFacts } from "../src/broker/gate.ts";
import { splicer, type Splicer } from "../src/broker/splice.ts";

const dir = mkdtempSync(join(tmpdir(), "hutch-tunnel-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What the upstream does with one connection. */
type Behaviour = "echo-hash" | "banner" | "answer-after-eof" | "hold";

interface Upstream {
  port: number;
  /** Per connection: bytes received, whether EOF came, whether it closed. */
  seen: { bytes: number; eof: boolean; closed: boolean }[];
  stop(): void;
}

/** Deterministic bytes, so both ends can check content without keeping it. */
function pattern(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}
const sha = (b: Uint8Array | Buffer) => new Bun.CryptoHasher("sha256").update(b).digest("hex");

/**
 * echo-hash: reads until EOF, then answers the sha256 of what it read followed
 * by DOWN bytes of pattern(…, 7), and closes.
 * banner: sends "hello box\n" at once, then echoes; closes after the box does.
 * answer-after-eof: says nothing until the box half-closes, then "got N\n" and closes.
 * hold: keeps the connection open and quiet.
 */
function startUpstream(behaviour: Behaviour, down = 0): Upstream {
  const seen: Upstream["seen"] = [];
  const payload = down > 0 ? pattern(down, 7) : new Uint8Array(0);
  type S = { i: number; hash: Bun.CryptoHasher; out: Uint8Array[]; ending: boolean };
  /** Writes what is queued as far as the socket takes it; ends the socket once all of it left, if asked. */
  const pump = (s: BunSocket<S>) => {
    while (s.data.out.length > 0) {
      const head = s.data.out[0]!;
      const n = s.write(head);
      if (n < head.length) {
        s.data.out[0] = head.subarray(Math.max(0, n));
        return;
      }
      s.data.out.shift();
    }
    if (s.data.ending) s.end();
  };
  const send = (s: BunSocket<S>, bytes: Uint8Array, end = false) => {
    s.data.out.push(bytes.slice());
    s.data.ending ||= end;
    pump(s);
  };
  const server: TCPSocketListener<S> = Bun.listen<S>({
    hostname: "127.0.0.1",
    port: 0,
    allowHalfOpen: true,
    socket: {
      open(s) {
        s.data = { i: seen.length, hash: new Bun.CryptoHasher("sha256"), out: [], ending: false };
        seen.push({ bytes: 0, eof: false, closed: false });
        if (behaviour === "banner") send(s, new TextEncoder().encode("hello box\n"));
      },
      data(s, b) {
        seen[s.data.i]!.bytes += b.length;
        if (behaviour === "echo-hash") s.data.hash.update(b);
        if (behaviour === "banner") send(s, b);
      },
      end(s) {
        const st = seen[s.data.i]!;
        st.eof = true;
        if (behaviour === "echo-hash") {
          send(s, new TextEncoder().encode(`${s.data.hash.digest("hex")}\n`));
          send(s, payload, true);
        } else if (behaviour === "answer-after-eof") send(s, new TextEncoder().encode(`got ${st.bytes}\n`), true);
        else if (behaviour === "banner") send(s, new Uint8Array(0), true);
      },
      drain: pump,
      close(s) {
        seen[s.data.i]!.closed = true;
      },
    },
  });
  return { port: server.port, seen, stop: () => server.stop(true) };
}

interface Box {
  records: { decision: EgressDecision; facts: EgressFacts }[];
  gate: Gate;
  sock: string;
}

let nth = 0;
async function openGate(port: number, kernel: () => Splicer | null): Promise<Box> {
  const records: Box["records"] = [];
  const gate = new Gate(
    {
      boxId: "box_t",
      policy: () => ({ allow: [`up.example.test:${port}`], bindings: [] }),
      bindings: () => ({}),
      pins: () => ({ "up.example.test": "127.0.0.1" }),
      lookup: async () => {
        throw new Error("no DNS in this test");
      },
      stub: () => "",
      secret: async () => undefined,
      record: (decision, facts) => records.push({ decision, facts }),
    },
    kernel,
  );
  const sock = join(dir, `g${nth++}.sock`);
  await gate.listen(sock);
  return { records, gate, sock };
}

/** A box-side client: CONNECT, then raw bytes. Collects everything after the 200. */
class Client {
  readonly sock: Socket;
  head = "";
  body: Buffer[] = [];
  bytes = 0;
  keep = true;
  readonly established = Promise.withResolvers<string>();
  readonly ended = Promise.withResolvers<void>();
  readonly closed = Promise.withResolvers<void>();

  constructor(path: string, port: number, early?: Uint8Array) {
    this.sock = createConnection({ path, allowHalfOpen: true });
    let inHead = true;
    this.sock.on("data", (c: Buffer) => {
      if (inHead) {
        this.head += c.toString("latin1");
        const i = this.head.indexOf("\r\n\r\n");
        if (i < 0) return;
        const rest = Buffer.from(this.head.slice(i + 4), "latin1");
        this.head = this.head.slice(0, i + 4);
        inHead = false;
        this.established.resolve(this.head);
        if (rest.length > 0) this.take(rest);
        return;
      }
      this.take(c);
    });
    this.sock.on("end", () => this.ended.resolve());
    this.sock.on("close", () => {
      this.established.resolve(this.head);
      this.ended.resolve();
      this.closed.resolve();
    });
    this.sock.on("error", () => {});
    const req = Buffer.from(`CONNECT up.example.test:${port} HTTP/1.1\r\nhost: up.example.test:${port}\r\n\r\n`);
    this.sock.write(early ? Buffer.concat([req, early]) : req);
  }

  private take(c: Buffer): void {
    this.bytes += c.length;
    if (this.keep) this.body.push(c);
  }

  text(): string {
    return Buffer.concat(this.body).toString("latin1");
  }

  /** Writes all of data, respecting backpressure. */
  async send(data: Uint8Array, chunk = 1 << 20): Promise<void> {
    for (let i = 0; i < data.length; i += chunk) {
      if (!this.sock.write(data.subarray(i, i + chunk))) await new Promise<void>((r) => this.sock.once("drain", () => r()));
    }
  }
}

function openFds(): number {
  return readdirSync("/proc/self/fd").length;
}

async function until(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(5);
  }
}

// The JavaScript copy (Bun's sockets without allowHalfOpen) ends a tunnel at the first FIN, so half-closes are tested on the kernel path only.
const paths: [string, () => Splicer | null, boolean][] = [["JavaScript copy", () => null, false]];
if (process.platform === "linux") paths.unshift(["kernel copy (splice)", splicer, true]);

test("the kernel copy path loads on Linux", () => {
  if (process.platform === "linux") expect(splicer()).not.toBeNull();
});

describe.each(paths)("%s", (_name, kernel, halfClose) => {
  test.if(halfClose)(
    "64 MiB down and 24 MiB up arrive byte for byte, and the record counts them",
    async () => {
      const DOWN = 64 * 1024 * 1024;
      const up = pattern(24 * 1024 * 1024, 3);
      const upstream = startUpstream("echo-hash", DOWN);
      const box = await openGate(upstream.port, kernel);
      const c = new Client(box.sock, upstream.port);
      expect(await c.established.promise).toStartWith("HTTP/1.1 200");
      await c.send(up);
      c.sock.end();
      await c.closed.promise;
      const all = Buffer.concat(c.body);
      const nl = all.indexOf(10);
      expect(all.subarray(0, nl).toString()).toBe(sha(up));
      expect(all.length - nl - 1).toBe(DOWN);
      expect(sha(all.subarray(nl + 1))).toBe(sha(pattern(DOWN, 7)));
      await until("the egress record", () => box.records.length === 1);
      expect(box.records[0]).toMatchObject({
        decision: "allowed",
        facts: { host: "up.example.test", port: upstream.port, status: 200, bytesUp: up.length, bytesDown: all.length },
      });
      box.gate.close();
      upstream.stop();
    },
    60_000,
  );

  test("24 MiB echoed both ways at once arrive byte for byte", async () => {
    const up = pattern(24 * 1024 * 1024, 5);
    const upstream = startUpstream("banner");
    const box = await openGate(upstream.port, kernel);
    const c = new Client(box.sock, upstream.port);
    expect(await c.established.promise).toStartWith("HTTP/1.1 200");
    await c.send(up);
    await until("the whole echo", () => c.bytes >= 10 + up.length, 30_000);
    const all = Buffer.concat(c.body);
    expect(all.length).toBe(10 + up.length);
    expect(all.subarray(0, 10).toString()).toBe("hello box\n");
    expect(sha(all.subarray(10))).toBe(sha(up));
    c.sock.destroy();
    await until("the egress record", () => box.records.length === 1);
    expect(box.records[0]!.facts).toMatchObject({ bytesUp: up.length, bytesDown: 10 + up.length });
    box.gate.close();
    upstream.stop();
  }, 60_000);

  test("bytes sent with the CONNECT head go first, and a server that speaks first is heard", async () => {
    const upstream = startUpstream("banner");
    const box = await openGate(upstream.port, kernel);
    const c = new Client(box.sock, upstream.port, new TextEncoder().encode("early bytes\n"));
    expect(await c.established.promise).toStartWith("HTTP/1.1 200");
    await until("the banner and the echo", () => c.text() === "hello box\nearly bytes\n");
    c.sock.write("later\n");
    await until("the second echo", () => c.text().endsWith("later\n"));
    c.sock.destroy();
    await until("the upstream to see the box go", () => upstream.seen[0]!.eof || upstream.seen[0]!.closed);
    await until("the egress record", () => box.records.length === 1);
    box.gate.close();
    upstream.stop();
  });

  test.if(halfClose)("a half-close passes through: the box stops sending and still gets the answer", async () => {
    const upstream = startUpstream("answer-after-eof");
    const box = await openGate(upstream.port, kernel);
    const c = new Client(box.sock, upstream.port);
    expect(await c.established.promise).toStartWith("HTTP/1.1 200");
    c.sock.write("x".repeat(100_000));
    c.sock.end();
    await c.ended.promise;
    expect(c.text()).toBe("got 100000\n");
    expect(upstream.seen[0]!.eof).toBe(true);
    await c.closed.promise;
    await until("the egress record", () => box.records.length === 1);
    expect(box.records[0]!.facts).toMatchObject({ bytesUp: 100_000, bytesDown: 11 });
    box.gate.close();
    upstream.stop();
  });

  test("closing the gate (a box stopped or deleted) ends its open tunnels on both sides", async () => {
    const upstream = startUpstream("hold");
    const box = await openGate(upstream.port, kernel);
    const clients = [0, 1, 2].map(() => new Client(box.sock, upstream.port));
    for (const c of clients) expect(await c.established.promise).toStartWith("HTTP/1.1 200");
    await until("three upstream connections", () => upstream.seen.length === 3);
    box.gate.close();
    await Promise.all(clients.map((c) => c.ended.promise));
    await until("the upstream to see every close", () => upstream.seen.every((s) => s.closed || s.eof));
    await until("three egress records", () => box.records.length === 3);
    for (const c of clients) c.sock.destroy();
    upstream.stop();
  });

  test("no file descriptor is left open after 30 tunnels", async () => {
    const upstream = startUpstream("banner");
    const box = await openGate(upstream.port, kernel);
    const round = async (n: number) => {
      const cs = Array.from({ length: n }, () => new Client(box.sock, upstream.port));
      for (const c of cs) {
        await c.established.promise;
        c.sock.write("ping");
      }
      for (const c of cs) await until("the echo", () => c.text() === "hello box\nping");
      for (const c of cs) c.sock.destroy();
      await Promise.all(cs.map((c) => c.closed.promise));
    };
    // Warm up: the worker thread, its epoll and eventfd are made once per process.
    await round(1);
    await until("the warm-up record", () => box.records.length === 1);
    const before = openFds();
    for (let i = 0; i < 3; i++) await round(10);
    await until("30 more records", () => box.records.length === 31);
    await until("fds back to where they were", () => openFds() <= before, 5_000).catch(() => {});
    expect(openFds()).toBeLessThanOrEqual(before);
    box.gate.close();
    upstream.stop();
  });
});
