// Operations over HTTP (daemon/ops.ts, client/ops.ts): progress lines in
// order, then exactly one last line, the result or the error; the client
// checks every line, returns the result, throws the error by its code; a
// client that goes away, or a daemon shutting down, aborts the work.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Elysia } from "elysia";
import { t as Type } from "elysia";
import { HutchError, ndjson, type OpProgress } from "@hutch/shared";
import { opResponse, RunningOps, type OpWork } from "../src/daemon/ops.ts";
import { runOp } from "../src/client/ops.ts";
import { localTarget, transport } from "../src/client/transport.ts";
import type { DaemonClient } from "../src/client/daemon.ts";

const running = new RunningOps();
let work: OpWork<unknown> = async () => null;
const app = new Elysia().post("/v1/op", ({ request }) => opResponse("test", request, running, (r, s) => work(r, s)));
const home = mkdtempSync(join(tmpdir(), "hutch-ops-"));
const server = Bun.serve({ unix: join(home, "hutch.sock"), fetch: (req) => app.handle(req), ...({ idleTimeout: 0 } as object) });
const t = transport(localTarget(home));
const daemon = { home, transport: t, headers: {} } as unknown as DaemonClient;
afterAll(() => {
  server.stop(true);
  rmSync(home, { recursive: true, force: true });
});

async function lines(): Promise<unknown[]> {
  const res = await t.fetch("/v1/op", { method: "POST" });
  expect(res.headers.get("content-type")).toBe("application/x-ndjson");
  const out: unknown[] = [];
  for await (const l of ndjson(res.body!)) out.push(l);
  return out;
}

describe("an operation's answer", () => {
  test("progress in order, then the result as the last line", async () => {
    work = async (report) => {
      report({ type: "step", n: 1, total: 2, title: "one" });
      report({ type: "detail", text: "half" });
      await Bun.sleep(5);
      report({ type: "step", n: 2, total: 2, title: "two" });
      return { answer: 42 };
    };
    expect(await lines()).toEqual([
      { type: "step", n: 1, total: 2, title: "one" },
      { type: "detail", text: "half" },
      { type: "step", n: 2, total: 2, title: "two" },
      { type: "result", value: { answer: 42 } },
    ]);
  });

  test("a failure is the last line: the error body, tagged; any other throw becomes a named failure", async () => {
    work = async (report) => {
      report({ type: "note", text: "heads up" });
      throw new HutchError("conflict", "busy", "wait for it");
    };
    expect(await lines()).toEqual([
      { type: "note", text: "heads up" },
      { type: "error", error: { code: "conflict", message: "busy", hint: "wait for it" } },
    ]);
    work = async () => {
      throw new Error("boom");
    };
    expect(await lines()).toEqual([{ type: "error", error: { code: "failed", message: "boom", hint: "see the daemon log" } }]);
  });

  test("the client returns the result, passes progress on, and throws the error by its code", async () => {
    work = async (report) => {
      report({ type: "step", n: 1, title: "only" });
      return { n: 1 };
    };
    const seen: OpProgress[] = [];
    const all: unknown[] = [];
    const v = await runOp(daemon, "/v1/op", {}, Type.Object({ n: Type.Number() }), {
      progress: (p) => seen.push(p),
      line: (l) => all.push(l),
    });
    expect(v).toEqual({ n: 1 });
    expect(seen).toEqual([{ type: "step", n: 1, title: "only" }]);
    expect(all).toEqual([
      { type: "step", n: 1, title: "only" },
      { type: "result", value: { n: 1 } },
    ]);
    work = async () => {
      throw new HutchError("not_found", "no such thing", "make one");
    };
    const err = await runOp(daemon, "/v1/op", {}, Type.Unknown()).catch((e) => e);
    expect(err).toBeInstanceOf(HutchError);
    expect(err).toMatchObject({ code: "not_found", message: "no such thing", hint: "make one" });
  });

  test("the client refuses a result of the wrong shape", async () => {
    work = async () => ({ n: "one" });
    const err = await runOp(daemon, "/v1/op", {}, Type.Object({ n: Type.Number() })).catch((e) => e);
    expect(err).toMatchObject({ code: "failed" });
    expect(err.message).toContain("malformed");
  });

  test("a client that goes away aborts the work", async () => {
    let aborted: unknown = null;
    let started!: () => void;
    const begun = new Promise<void>((r) => (started = r));
    const finished = new Promise<void>((resolve) => {
      work = async (report, signal) => {
        report({ type: "step", n: 1, title: "long" });
        started();
        await new Promise<void>((r) => signal.addEventListener("abort", () => r()));
        aborted = signal.reason;
        resolve();
        return null;
      };
    });
    const ctl = new AbortController();
    const res = await t.fetch("/v1/op", { method: "POST", signal: ctl.signal });
    const reader = res.body!.getReader();
    await reader.read();
    await begun;
    ctl.abort();
    await finished;
    expect(aborted).toBeInstanceOf(HutchError);
    expect((aborted as HutchError).message).toContain("went away");
  });

  test("shutdown aborts what is running, and the client hears why", async () => {
    const started = Promise.withResolvers<void>();
    work = async (report, signal) => {
      report({ type: "step", n: 1, title: "long" });
      started.resolve();
      await new Promise<void>((r) => signal.addEventListener("abort", () => r()));
      throw signal.reason;
    };
    const pending = runOp(daemon, "/v1/op", {}, Type.Unknown()).catch((e) => e);
    await started.promise;
    running.close();
    const err = (await pending) as HutchError;
    expect(err).toMatchObject({ code: "unavailable" });
    expect(err.message).toContain("shutting down");
  });

  test("a body that ends without a last line is a lost daemon", async () => {
    const cut = new Elysia().post(
      "/v1/cut",
      () => new Response('{"type":"step","n":1,"title":"x"}\n', { headers: { "content-type": "application/x-ndjson" } }),
    );
    const srv = Bun.serve({ unix: join(home, "cut.sock"), fetch: (req) => cut.handle(req) });
    try {
      const d = { home, transport: transport({ kind: "local", socket: join(home, "cut.sock") }), headers: {} } as unknown as DaemonClient;
      const err = (await runOp(d, "/v1/cut", {}, Type.Unknown()).catch((e) => e)) as HutchError;
      expect(err).toMatchObject({ code: "unavailable" });
      expect(err.message).toContain("went away during cut");
    } finally {
      srv.stop(true);
    }
  });
});
