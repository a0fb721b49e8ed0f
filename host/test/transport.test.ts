// The client transport against a real server on a unix socket: HTTP and
// WebSocket reach the daemon path they name, and NDJSON lines come out whole
// however the bytes were cut.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ndjson } from "@hutch/shared";
import { localTarget, transport } from "../src/client/transport.ts";

const home = mkdtempSync(join(tmpdir(), "hutch-transport-"));
const server = Bun.serve<string | null>({
  unix: join(home, "hutch.sock"),
  fetch(req, srv) {
    const url = new URL(req.url);
    if (url.pathname === "/ws" && srv.upgrade(req, { data: req.headers.get("x-hutch-client") })) return undefined;
    return Response.json({ path: url.pathname + url.search, method: req.method, client: req.headers.get("x-hutch-client") });
  },
  websocket: {
    open(ws) {
      ws.send(`hello ${ws.data}`);
    },
    message() {},
  },
});
afterAll(() => {
  server.stop(true);
  rmSync(home, { recursive: true, force: true });
});

function body(chunks: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(ctl) {
      for (const c of chunks) ctl.enqueue(enc.encode(c));
      ctl.close();
    },
  });
}

describe("transport", () => {
  test("a local target is the home's socket", () => {
    expect(localTarget(home)).toEqual({ kind: "local", socket: join(home, "hutch.sock") });
    expect(transport(localTarget(home)).where).toBe(join(home, "hutch.sock"));
  });

  test("fetch reaches the path it names, with the method and headers given", async () => {
    const res = await transport(localTarget(home)).fetch("/v1/boxes?x=1", { method: "POST", headers: { "x-hutch-client": "cli" } });
    expect(await res.json()).toEqual({ path: "/v1/boxes?x=1", method: "POST", client: "cli" });
  });

  test("a WebSocket reaches the path it names and carries the headers", async () => {
    const ws = transport(localTarget(home)).websocket("/ws", { "x-hutch-client": "ide" });
    const first = await new Promise<string>((res, rej) => {
      ws.onmessage = (e) => res(String(e.data));
      ws.onerror = () => rej(new Error("websocket failed"));
    });
    ws.close();
    expect(first).toBe("hello ide");
  });

  test("a missing daemon is a thrown fetch, not a response", async () => {
    const gone = mkdtempSync(join(tmpdir(), "hutch-transport-gone-"));
    try {
      await expect(transport(localTarget(gone)).fetch("/v1/health")).rejects.toThrow();
    } finally {
      rmSync(gone, { recursive: true, force: true });
    }
  });
});

describe("ndjson", () => {
  test("lines cut across chunks, several in one chunk, and blank lines", async () => {
    const out: unknown[] = [];
    for await (const v of ndjson(body(['{"a":', '1}\n{"b":2}\n\n{"c"', ':"x\\ny"}\n']))) out.push(v);
    expect(out).toEqual([{ a: 1 }, { b: 2 }, { c: "x\ny" }]);
  });

  test("a last line without its newline is not delivered: the body was cut", async () => {
    const out: unknown[] = [];
    for await (const v of ndjson(body(['{"a":1}\n{"b":2}']))) out.push(v);
    expect(out).toEqual([{ a: 1 }]);
  });

  test("multi-byte characters split between chunks survive", async () => {
    const bytes = new TextEncoder().encode('{"t":"é✓"}\n');
    const stream = new ReadableStream<Uint8Array>({
      start(ctl) {
        ctl.enqueue(bytes.subarray(0, 9));
        ctl.enqueue(bytes.subarray(9));
        ctl.close();
      },
    });
    const out: unknown[] = [];
    for await (const v of ndjson(stream)) out.push(v);
    expect(out).toEqual([{ t: "é✓" }]);
  });
});
