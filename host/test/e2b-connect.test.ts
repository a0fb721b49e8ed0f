// The E2B API's pure parts, in-process: Connect's JSON codec (envelopes, the
// end of stream, malformed input as invalid_argument), how a request is
// addressed (host name or headers), and the control API's refusals (another
// user's sandbox, an unknown template, a read-only token, a bad body), which
// need no box.
import { afterAll, describe, expect, test } from "bun:test";
import { Type } from "@sinclair/typebox";
import { encodeJoin, HutchError } from "@hutch/shared";
import { testApp } from "./app-helpers.ts";
import type { Principal } from "../src/auth/service.ts";
import { SandboxService } from "../src/e2b/sandboxes.ts";
import { type ConnectError, errorResponse, serverStream, streamMessage, toConnect, unaryMessage } from "../src/daemon/e2b/connect.ts";
import { serveControl } from "../src/daemon/e2b/control.ts";
import { addressOf, apiKey } from "../src/daemon/e2b/listener.ts";
import { CreationGate } from "../src/daemon/creations.ts";
import { CreateLimiter } from "../src/auth/limit.ts";

const { home, services, close } = await testApp("hutch-e2b-");
afterAll(close);
const sandboxes = new SandboxService(services.boxes, {
  home,
  templates: (n) => (n === "base" ? { engine: "process" } : null),
  domain: null,
});
const alice: Principal = { user: "alice", scopes: ["read", "write"], remote: true, token: "tok_000000000000" };

const envelope = (json: string, flags = 0, claimed?: number) => {
  const body = new TextEncoder().encode(json);
  const out = new Uint8Array(5 + body.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, claimed ?? body.length);
  out.set(body, 5);
  return out;
};
const post = (body: string | Uint8Array, type: string) =>
  new Request("https://h/x", { method: "POST", headers: { "content-type": type }, body });
const Msg = Type.Object({ path: Type.String() });

async function thrown(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (e) {
    return e as ConnectError;
  }
  throw new Error("did not throw");
}

describe("Connect JSON", () => {
  test("a unary message is checked; not JSON, a wrong shape or content type is invalid_argument", async () => {
    expect(await unaryMessage(post('{"path":"/a"}', "application/json"), Msg, "t")).toEqual({ path: "/a" });
    for (const [body, type, why] of [
      ["{nope", "application/json", "not JSON"],
      ['{"path":3}', "application/json", "path"],
      ['{"path":"/a"}', "application/proto", "content-type"],
    ]) {
      const e = await thrown(unaryMessage(post(body!, type!), Msg, "t"));
      expect(e.code).toBe("invalid_argument");
      expect(e.message).toContain(why!);
    }
  });

  test("a stream message is one envelope; a short, lying or compressed one is refused", async () => {
    expect(await streamMessage(post(envelope('{"path":"/a"}'), "application/connect+json"), Msg, "t")).toEqual({ path: "/a" });
    expect((await thrown(streamMessage(post(new Uint8Array([0, 0]), "application/connect+json"), Msg, "t"))).code).toBe("invalid_argument");
    expect((await thrown(streamMessage(post(envelope("{}", 0, 99), "application/connect+json"), Msg, "t"))).message).toContain("99 bytes");
    expect((await thrown(streamMessage(post(envelope("{}", 1), "application/connect+json"), Msg, "t"))).code).toBe("unimplemented");
  });

  test("a server stream sends enveloped messages, then an end of stream with the error", async () => {
    const res = serverStream(post("", "application/connect+json"), { keepalive: {} }, (s) => {
      s.send({ a: 1 });
      s.end(new HutchError("not_found", "gone"));
    });
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(res.headers.get("content-type")).toBe("application/connect+json");
    const first = new DataView(bytes.buffer).getUint32(1);
    expect([bytes[0], JSON.parse(new TextDecoder().decode(bytes.subarray(5, 5 + first)))]).toEqual([0, { a: 1 }]);
    const rest = bytes.subarray(5 + first);
    expect(rest[0]).toBe(2);
    expect(JSON.parse(new TextDecoder().decode(rest.subarray(5)))).toEqual({ error: { code: "not_found", message: "gone" } });
  });

  test("hutch's errors map to Connect codes, and a unary error to its HTTP status", async () => {
    expect(toConnect(new HutchError("unauthorized", "x")).code).toBe("unauthenticated");
    expect(toConnect(new HutchError("not_ready", "x")).code).toBe("unavailable");
    const res = errorResponse(new HutchError("not_found", "no file", "list it"));
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ code: "not_found", message: "no file (list it)" });
  });
});

describe("addressing", () => {
  const at = (headers: Record<string, string>) => addressOf(new Request("https://h/x", { headers }));
  test("by host name, by the SDK's headers, or the control API", () => {
    expect(at({ host: "8000-abcdefghij0123456789.e2b.lan" })).toEqual({ id: "abcdefghij0123456789", port: 8000 });
    expect(at({ host: "127.0.0.1:1", "e2b-sandbox-id": "abcdefghij0123456789", "e2b-sandbox-port": "49983" })).toEqual({
      id: "abcdefghij0123456789",
      port: 49983,
    });
    expect(at({ host: "api.e2b.lan" })).toBeNull();
    expect(at({ host: "8000-short.e2b.lan" })).toBeNull();
  });
});

describe("E2B_API_KEY", () => {
  test("a token as is, or the join string that carries it; anything else is passed on to be refused", () => {
    const token = `hutch_tok_0123456789ab_${"A".repeat(43)}`;
    expect(apiKey(token)).toBe(token);
    expect(apiKey(encodeJoin({ v: 1, url: "https://h:1", fingerprint: "ab".repeat(32), user: "alice", token }))).toBe(token);
    expect(apiKey("e2b_123")).toBe("e2b_123");
  });
});

describe("the control API's refusals", () => {
  const call = async (method: string, path: string, body?: unknown, who = alice) => {
    const res = await serveControl(
      sandboxes,
      who,
      new Request(`https://h${path}`, { method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }),
    );
    return { status: res.status, body: (await res.json().catch(() => null)) as { code: number; message: string } | null };
  };

  test("an unknown sandbox is 404 for every verb, in E2B's error shape", async () => {
    for (const [m, p] of [
      ["GET", "/sandboxes/zzzzzzzzzzzzzzzzzzzz"],
      ["DELETE", "/sandboxes/zzzzzzzzzzzzzzzzzzzz"],
      ["POST", "/sandboxes/zzzzzzzzzzzzzzzzzzzz/pause"],
      ["POST", "/v2/sandboxes/zzzzzzzzzzzzzzzzzzzz/connect"],
    ] as const) {
      const r = await call(m, p, m === "POST" ? {} : undefined);
      expect(r.status).toBe(404);
      expect(r.body?.code).toBe(404);
      expect(r.body?.message).toContain("not found");
    }
  });

  test("an unknown template is 404 naming what is mapped; no box is made", async () => {
    const r = await call("POST", "/v2/sandboxes", { templateID: "nope" });
    expect(r.status).toBe(404);
    expect(r.body?.message).toContain('template "nope" not found');
    expect(services.boxes.list()).toEqual([]);
  });

  test("a bad body, a read-only token and an unknown path are refused, saying why", async () => {
    expect((await call("POST", "/sandboxes", { templateID: 3 })).status).toBe(400);
    expect((await call("POST", "/sandboxes", { templateID: "base", timeout: -1 })).status).toBe(400);
    expect((await call("POST", "/sandboxes", { templateID: "base" }, { ...alice, scopes: ["read"] })).status).toBe(403);
    expect((await call("GET", "/v2/sandboxes?state=sleeping")).status).toBe(400);
    expect(await call("GET", "/sandboxes")).toEqual({ status: 200, body: [] as never });
    expect((await call("GET", "/templates")).status).toBe(404);
  });
  test("a sandbox is charged to its token's creation limit: past it, 429 and no box", async () => {
    const gate = new CreationGate(new CreateLimiter(1, 1));
    gate.limiter.take(alice.token!);
    const detach = gate.attach(services.boxes);
    try {
      const res = await gate.as(alice, () =>
        serveControl(
          sandboxes,
          alice,
          new Request("https://h/v2/sandboxes", { method: "POST", body: JSON.stringify({ templateID: "base" }) }),
        ),
      );
      expect(res.status).toBe(429);
      expect(((await res.json()) as { message: string }).message).toContain("too many boxes created with this token");
      expect(services.boxes.list()).toEqual([]);
    } finally {
      detach();
    }
  });
});
