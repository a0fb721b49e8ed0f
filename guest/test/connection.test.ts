import { afterEach, describe, expect, test } from "bun:test";
import { encodeFrame, encodeJson } from "@hutch/shared";
import { alive, call, collect, connect, startGuest, type Guest } from "./harness.ts";

let g: Guest | undefined;
afterEach(async () => {
  await g?.stop();
  g = undefined;
});

describe("connections", () => {
  test("a garbage byte stream closes that connection; another connection is still served", async () => {
    g = await startGuest();
    let closed!: () => void;
    const gone = new Promise<void>((r) => (closed = r));
    const raw = await Bun.connect({ unix: g.socket, socket: { data() {}, close: () => closed() } });
    raw.write(new TextEncoder().encode("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    await gone;

    const h = await connect(g.socket);
    expect(await h.hello).toMatchObject({
      protocol: 1,
      agent: "hutch-guest",
      capabilities: ["exec", "pty", "fs", "tar", "net", "ports", "browser", "desktop", "mcp", "chunks", "identity"],
    });
    const { c } = await call(h, { tool: "exec", argv: ["echo", "still here"] });
    expect(c.text()).toBe("still here\n");
    h.close();
  });

  test("a host hello with another protocol version is refused, and frames behind it are not run", async () => {
    g = await startGuest();
    const marker = `${g.workspace}/should-not-exist`;
    let closed!: () => void;
    const gone = new Promise<void>((r) => (closed = r));
    const raw = await Bun.connect({ unix: g.socket, socket: { data() {}, close: () => closed() } });
    // The hello and an open in one write: the open must not run.
    const hello = encodeFrame("hello", 0, 0, 0, encodeJson({ protocol: 2, client: "hutch", version: "9" }));
    const open = encodeFrame("open", 1, 0, 1, encodeJson({ tool: "exec", argv: ["touch", marker] }));
    raw.write(new Uint8Array([...hello, ...open]));
    await gone;
    // A command run to its end on a fresh connection: whatever the refused one had started would be done by now.
    const h = await connect(g.socket);
    await h.hello;
    const done = collect(h.mux.open({ tool: "exec", argv: ["sh", "-c", `test -e '${marker}' && echo ran || echo not-run`] }));
    await done.closed;
    expect(new TextDecoder().decode(Buffer.concat(done.out))).toBe("not-run\n");
    h.close();
    expect(await Bun.file(marker).exists()).toBe(false);
  });

  test("an identity message gives the processes started after it the new HUTCH_BOX_ID; a malformed one changes nothing", async () => {
    const was = "box_0000000000aaaaaaaaaa";
    const now = "box_0000000000bbbbbbbbbb";
    g = await startGuest(undefined, { HUTCH_BOX_ID: was });
    const h = await connect(g.socket);
    await h.hello;
    const boxId = async () => (await call(h, { tool: "exec", argv: ["sh", "-c", "echo $HUTCH_BOX_ID"] })).c.text().trim();
    expect(await boxId()).toBe(was);
    h.mux.control({ type: "identity", name: "web", id: "not-an-id" });
    expect(await boxId()).toBe(was);
    // No wait between the message and the exec: control frames are handled in order with the opens behind them.
    h.mux.control({ type: "identity", name: "web", id: now });
    expect(await boxId()).toBe(now);
    h.close();
  });

  test("losing the connection kills its exec processes", async () => {
    g = await startGuest();
    const h = await connect(g.socket);
    await h.hello;
    const c = collect(h.mux.open({ tool: "exec", argv: ["sleep", "30"] }));
    const { pid } = (await c.waitMsg("started")) as { pid: number };
    expect(alive(pid)).toBe(true);
    h.close();
    const until = Date.now() + 3000;
    while (alive(pid) && Date.now() < until) await Bun.sleep(20);
    expect(alive(pid)).toBe(false);
  });

  test("shutdown TERMs every process, KILLs the ones left after graceMs, and exits 0", async () => {
    g = await startGuest();
    const h = await connect(g.socket);
    await h.hello;
    const polite = collect(h.mux.open({ tool: "exec", argv: ["sleep", "30"] }));
    const stubborn = collect(h.mux.open({ tool: "exec", argv: ["sh", "-c", "trap '' TERM; echo ready; sleep 30 & wait; sleep 30"] }));
    const pty = collect(h.mux.open({ tool: "pty.open", argv: ["sleep", "30"], cols: 80, rows: 24 }));
    const pids = await Promise.all([polite, stubborn, pty].map(async (c) => ((await c.waitMsg("started")) as { pid: number }).pid));
    await stubborn.waitFor(/ready/);
    const t0 = Date.now();
    h.mux.control({ type: "shutdown", graceMs: 500 });
    expect(await g.proc.exited).toBe(0);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(450);
    for (const pid of pids) expect(alive(pid)).toBe(false);
    const log = await g.stderr();
    expect(log).toContain("msg=stopped terminated=3 killed=1");
  });

  test("SIGTERM to the guest stops it the same way", async () => {
    g = await startGuest(undefined, { HUTCH_GUEST_GRACE_MS: "200" });
    const h = await connect(g.socket);
    await h.hello;
    const c = collect(h.mux.open({ tool: "exec", argv: ["sleep", "30"] }));
    const { pid } = (await c.waitMsg("started")) as { pid: number };
    g.proc.kill("SIGTERM");
    expect(await g.proc.exited).toBe(0);
    expect(alive(pid)).toBe(false);
    expect(await Bun.file(g.socket).exists()).toBe(false);
  });
});
