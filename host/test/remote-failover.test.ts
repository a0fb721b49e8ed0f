// A remote of several servers: which failures of one server send a request to
// the next, against real TLS servers on loopback. A refused or unreachable
// server, or one presenting a certificate other than its pin, never saw the
// request: anything goes to the next. A server that broke the connection
// after the request went out may have acted on it: only a read or a write
// with an idempotency key goes on. A server that answered with an HTTP error
// answered. WebSockets open on the first server that answers. A remotes
// file from before reads as remotes of one server.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IDEMPOTENCY_HEADER } from "@hutch/shared/base";
import { serveCert, type ServeCert } from "../src/auth/cert.ts";
import { failure, mayFailOver, resendable, tryOrder } from "../src/client/failover.ts";
import { type RemoteServerTarget, transport } from "../src/client/transport.ts";

const dir = mkdtempSync(join(tmpdir(), "hutch-failover-"));
let certA: ServeCert;
let certB: ServeCert;
const stops: (() => void)[] = [];

beforeAll(async () => {
  certA = await serveCert(join(dir, "a"), {}, []);
  certB = await serveCert(join(dir, "b"), {}, []);
});
afterAll(() => {
  for (const s of stops) s();
  rmSync(dir, { recursive: true, force: true });
});

/** A hutch-like server: counts what it was asked, answers JSON naming itself (status as asked), upgrades /ws. */
function server(name: string, cert: ServeCert, opts: { status?: number; refuseUpgrade?: boolean } = {}) {
  const seen: string[] = [];
  const s = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: cert.cert, key: cert.key },
    fetch(req, srv) {
      const path = new URL(req.url).pathname;
      seen.push(`${req.method} ${path}`);
      if (path === "/ws") {
        if (opts.refuseUpgrade) return Response.json({ error: { code: "unauthorized" } }, { status: 401 });
        if (srv.upgrade(req)) return undefined;
      }
      return Response.json({ server: name }, { status: opts.status ?? 200 });
    },
    websocket: {
      open(ws) {
        ws.send(`hello from ${name}`);
      },
      message() {},
    },
  });
  stops.push(() => s.stop(true));
  return {
    url: `https://127.0.0.1:${s.port}`,
    seen,
    target: { url: `https://127.0.0.1:${s.port}`, cert: cert.cert, fingerprint: cert.fingerprint },
  };
}

/** A TLS server that reads the request and drops the connection without answering: it may have acted on it. */
function dropper(cert: ServeCert) {
  let requests = 0;
  const l = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: cert.cert, key: cert.key },
    socket: {
      data(sock) {
        requests++;
        sock.terminate();
      },
    },
  });
  stops.push(() => l.stop(true));
  const url = `https://127.0.0.1:${l.port}`;
  return { url, requests: () => requests, target: { url, cert: cert.cert, fingerprint: cert.fingerprint } };
}

/** A TLS server that takes the connection and never answers. */
function silent(cert: ServeCert) {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, tls: { cert: cert.cert, key: cert.key }, socket: { data() {} } });
  stops.push(() => l.stop(true));
  const url = `https://127.0.0.1:${l.port}`;
  return { url, target: { url, cert: cert.cert, fingerprint: cert.fingerprint } };
}

/** A free loopback TCP port (taken and given back). */
function freePortOnLoopback(): number {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = l.port;
  l.stop(true);
  return port;
}

/** A loopback address nothing listens on (its pin is A's: the pin is never reached). */
function closed(): RemoteServerTarget {
  return { url: `https://127.0.0.1:${freePortOnLoopback()}`, cert: certA.cert, fingerprint: certA.fingerprint };
}

function remote(servers: RemoteServerTarget[], first = 0) {
  const answered: string[] = [];
  const t = transport({ kind: "remote", name: "fleet", servers, first, token: "t", answered: (u) => answered.push(u) });
  return { t, answered };
}

async function serverOf(res: Response): Promise<string> {
  return ((await res.json()) as { server: string }).server;
}

describe("the failover rule", () => {
  test("which methods may be sent again", () => {
    expect(resendable({ method: "GET" })).toBe(true);
    expect(resendable({})).toBe(true);
    expect(resendable({ method: "HEAD" })).toBe(true);
    expect(resendable({ method: "POST" })).toBe(false);
    expect(resendable({ method: "DELETE" })).toBe(false);
    expect(resendable({ method: "POST", headers: new Headers({ [IDEMPOTENCY_HEADER]: "k1" }) })).toBe(true);
    expect(resendable({ method: "PUT", body: new ReadableStream() })).toBe(false);
    expect(mayFailOver("not-sent", false)).toBe(true);
    expect(mayFailOver("maybe-sent", false)).toBe(false);
    expect(mayFailOver("maybe-sent", true)).toBe(true);
    expect(mayFailOver("other", true)).toBe(false);
    expect(tryOrder(3, 1)).toEqual([1, 2, 0]);
  });

  test("real failures, classified: refused and a wrong certificate were never sent; a dropped connection and a timeout may have been", async () => {
    const refused = await fetch(`${closed().url}/x`).catch((e) => e);
    expect(failure(refused)).toBe("not-sent");
    const b = server("b", certB);
    const wrongPin = await fetch(`${b.url}/x`, { tls: { ca: certA.cert, checkServerIdentity: () => undefined } } as RequestInit).catch(
      (e) => e,
    );
    expect(failure(wrongPin)).toBe("not-sent");
    expect(b.seen).toEqual([]);
    const d = dropper(certA);
    const dropped = await fetch(`${d.url}/x`, {
      method: "POST",
      body: "{}",
      tls: { ca: certA.cert, checkServerIdentity: () => undefined },
    } as RequestInit).catch((e) => e);
    expect(d.requests()).toBe(1);
    expect(failure(dropped)).toBe("maybe-sent");
    const s = silent(certA);
    const timedOut = await fetch(`${s.url}/x`, {
      tls: { ca: certA.cert, checkServerIdentity: () => undefined },
      signal: AbortSignal.timeout(300),
    } as RequestInit).catch((e) => e);
    expect(failure(timedOut)).toBe("maybe-sent");
    expect(failure(new TypeError("Body already used"))).toBe("other");
  });
});

describe("a remote of two servers", () => {
  test("a server that refuses the connection gives way to the next, which is then tried first", async () => {
    const b = server("b", certB);
    const { t, answered } = remote([closed(), b.target]);
    const res = await t.fetch("/v1/boxes", { method: "POST", body: "{}" });
    expect(await serverOf(res)).toBe("b");
    expect(answered).toEqual([b.url]);
    expect(t.where).toBe(b.url);
    expect(await serverOf(await t.fetch("/v1/boxes"))).toBe("b");
    expect(b.seen).toEqual(["POST /v1/boxes", "GET /v1/boxes"]);
    // No change, nothing more to remember.
    expect(answered).toEqual([b.url]);
  });

  test("the server that answered last is tried first: the one before it is not asked", async () => {
    const a = server("a", certA);
    const b = server("b", certB);
    const { t, answered } = remote([a.target, b.target], 1);
    expect(await serverOf(await t.fetch("/v1/health"))).toBe("b");
    expect(a.seen).toEqual([]);
    expect(answered).toEqual([]);
  });

  test("a server presenting a certificate other than its pin is passed over before the request is sent", async () => {
    const a = server("a", certB); // pinned below to certA
    const b = server("b", certB);
    const { t } = remote([{ url: a.url, cert: certA.cert, fingerprint: certA.fingerprint }, b.target]);
    expect(await serverOf(await t.fetch("/v1/sessions", { method: "POST", body: "{}" }))).toBe("b");
    expect(a.seen).toEqual([]);
  });

  test("a write without an idempotency key that may have reached a server is not sent to another", async () => {
    const d = dropper(certA);
    const b = server("b", certB);
    const { t } = remote([d.target, b.target]);
    await expect(t.fetch("/v1/boxes", { method: "POST", body: "{}" })).rejects.toThrow();
    expect(d.requests()).toBe(1);
    expect(b.seen).toEqual([]);
    expect(t.where).toBe(d.url);
  });

  test("a read, or a write with an idempotency key, that may have reached a server goes on to the next", async () => {
    const d = dropper(certA);
    const b = server("b", certB);
    const { t } = remote([d.target, b.target]);
    expect(await serverOf(await t.fetch("/v1/boxes"))).toBe("b");
    const { t: t2 } = remote([d.target, b.target]);
    const res = await t2.fetch("/v1/boxes", { method: "POST", body: "{}", headers: { [IDEMPOTENCY_HEADER]: "key-1" } });
    expect(await serverOf(res)).toBe("b");
    expect(d.requests()).toBe(2);
    expect(b.seen).toEqual(["GET /v1/boxes", "POST /v1/boxes"]);
  });

  test("a server that does not answer within answerWithinMs counts as unreachable for a read", async () => {
    const s = silent(certA);
    const b = server("b", certB);
    const { t } = remote([s.target, b.target]);
    expect(await serverOf(await t.fetch("/v1/whoami", {}, { answerWithinMs: 300 }))).toBe("b");
  });

  test("an HTTP error is the server's answer: the next server is not asked", async () => {
    const a = server("a", certA, { status: 500 });
    const b = server("b", certB);
    const { t } = remote([a.target, b.target]);
    const res = await t.fetch("/v1/boxes");
    expect(res.status).toBe(500);
    expect(b.seen).toEqual([]);
  });

  test("no server answers: one error naming each", async () => {
    const x = closed();
    const y = closed();
    const { t } = remote([x, y]);
    const err = (await t.fetch("/v1/health").catch((e) => e)) as Error;
    expect(err.message).toContain(`no server of remote "fleet" answered`);
    expect(err.message).toContain(x.url);
    expect(err.message).toContain(y.url);
  });
});

describe("a WebSocket over two servers", () => {
  const first = (ws: WebSocket) =>
    new Promise<string>((res, rej) => {
      ws.onmessage = (e) => res(String(e.data));
      ws.onclose = (e) => rej(new Error(`closed ${e.code}`));
    });

  test("opens on the next server when the first cannot be reached", async () => {
    const b = server("b", certB);
    const { t, answered } = remote([closed(), b.target]);
    const ws = t.websocket("/ws", {});
    expect(await first(ws)).toBe("hello from b");
    ws.close();
    expect(answered).toEqual([b.url]);
  });

  test("a refused upgrade is the answer: the caller sees the close, the next server is not asked", async () => {
    const a = server("a", certA, { refuseUpgrade: true });
    const b = server("b", certB);
    const { t } = remote([a.target, b.target]);
    const ws = t.websocket("/ws", {});
    let errored = false;
    ws.onerror = () => {
      errored = true;
    };
    const closed = await new Promise<number>((res) => {
      ws.onclose = (e) => res(e.code);
    });
    expect(closed).not.toBe(1000);
    expect(errored).toBe(true);
    expect(b.seen).toEqual([]);
  });
});

describe("remotes.json from before a remote listed several servers", () => {
  test("a remote of one server's fields reads as a remote of one server, tried first", async () => {
    const config = mkdtempSync(join(tmpdir(), "hutch-remotes-"));
    const saved = process.env.XDG_CONFIG_HOME;
    process.env.XDG_CONFIG_HOME = config;
    try {
      const { activeServer, readRemotes } = await import("../src/client/remotes.ts");
      mkdirSync(join(config, "hutch"), { mode: 0o700 });
      const old = {
        url: "https://127.0.0.1:8443",
        fingerprint: certA.fingerprint,
        cert: certA.cert,
        user: "alice",
        token: `hutch_tok_abcdefghijkl_${"x".repeat(43)}`,
        addedAt: "2026-12-01T00:00:00.000Z",
      };
      writeFileSync(join(config, "hutch", "remotes.json"), JSON.stringify({ default: "work", remotes: { work: old } }), { mode: 0o600 });
      const f = readRemotes();
      expect(f.default).toBe("work");
      expect(f.remotes.work).toEqual({
        servers: [{ url: old.url, fingerprint: old.fingerprint, cert: old.cert, addedAt: old.addedAt }],
        user: "alice",
        token: old.token,
        addedAt: old.addedAt,
      });
      expect(activeServer(f.remotes.work!)).toBe(0);
    } finally {
      if (saved === undefined) delete process.env.XDG_CONFIG_HOME;
      else process.env.XDG_CONFIG_HOME = saved;
      rmSync(config, { recursive: true, force: true });
    }
  });
});
