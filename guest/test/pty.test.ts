import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { DEFAULT_WINDOW, PtyKillResult, PtyListResult } from "@hutch/shared";
import { call, collect, connect, result, startGuest, type Guest, type Host } from "./harness.ts";

let g: Guest;
let h: Host;
beforeAll(async () => {
  g = await startGuest(undefined, { HUTCH_GUEST_PTY_STALL_MS: "1000" });
  h = await connect(g.socket);
  await h.hello;
});
afterAll(async () => {
  h.close();
  await g.stop();
});

const enc = new TextEncoder();
const BURST = DEFAULT_WINDOW + 4 * 1024 * 1024;

describe("pty", () => {
  test("open, resize, detach, attach shows the earlier screen, then live output and exit", async () => {
    const s = h.mux.open({ tool: "pty.open", argv: ["sh"], cols: 80, rows: 24, env: { PS1: "$ " } });
    const c = collect(s);
    const started = (await c.waitMsg("started")) as { pid: number; pty: string };
    expect(started.pty).toMatch(/^pty_[0-9a-z]{20}$/);
    s.write(0, enc.encode("stty size\r"));
    await c.waitFor(/24 80/);
    s.msg({ type: "resize", cols: 100, rows: 30 });
    s.write(0, enc.encode("stty size; echo marker-$((6*7))\r"));
    await c.waitFor(/30 100[\s\S]*marker-42/);

    // Detach: the terminal keeps running.
    s.close();
    const listed = (await call(h, { tool: "pty.list" })).c;
    expect(result(listed, PtyListResult)).toEqual([
      expect.objectContaining({ id: started.pty, pid: started.pid, cols: 100, rows: 30, argv: ["sh"], attached: 0 }),
    ]);

    // A second connection attaches and gets the screen first.
    const h2 = await connect(g.socket);
    await h2.hello;
    const a = h2.mux.open({ tool: "pty.attach", id: started.pty });
    const ac = collect(a);
    expect(await ac.waitMsg("started")).toEqual({ type: "started", pid: started.pid, pty: started.pty });
    await ac.waitFor(/marker-42/);
    expect(ac.text()).toContain("30 100");

    a.write(0, enc.encode("echo live-$((2+3)); exit 3\r"));
    await ac.waitFor(/live-5/);
    expect(await ac.closed).toBeUndefined();
    expect(ac.msgs.at(-1)).toEqual({ type: "exit", code: 3, signal: null });
    expect(result((await call(h, { tool: "pty.list" })).c, PtyListResult)).toEqual([]);
    h2.close();
  });

  test("two attached streams both get the output", async () => {
    const s = h.mux.open({ tool: "pty.open", argv: ["sh"], cols: 80, rows: 24 });
    const c = collect(s);
    const { pty } = (await c.waitMsg("started")) as { pty: string };
    const a = h.mux.open({ tool: "pty.attach", id: pty, cols: 90, rows: 20 });
    const ac = collect(a);
    await ac.waitMsg("started");
    s.write(0, enc.encode("stty size; echo both-$((1+1))\r"));
    await c.waitFor(/20 90[\s\S]*both-2/);
    await ac.waitFor(/20 90[\s\S]*both-2/);
    const killed = await call(h, { tool: "pty.kill", id: pty, signal: "KILL" });
    expect(result(killed.c, PtyKillResult)).toMatchObject({ id: pty, signal: "KILL" });
    expect(await c.closed).toBeUndefined();
    expect(await ac.closed).toBeUndefined();
    expect(c.msgs.at(-1)).toEqual({ type: "exit", code: null, signal: "KILL" });
    expect(ac.msgs.at(-1)).toEqual({ type: "exit", code: null, signal: "KILL" });
  });

  test("a consumer that stops granting credit is dropped; a burst does not drop a live one, it resyncs", async () => {
    const s = h.mux.open({ tool: "pty.open", argv: ["sh"], cols: 80, rows: 24 });
    const c = collect(s);
    const { pty } = (await c.waitMsg("started")) as { pty: string };
    const stuck = h.mux.open({ tool: "pty.attach", id: pty });
    stuck.autoCredit = false;
    const sc = collect(stuck);
    await sc.waitMsg("started");
    // More output than one window plus the 1 MiB queue allowance.
    s.write(0, enc.encode(`head -c ${BURST} /dev/zero | tr '\\0' x; echo; echo after-$((4*4))\r`));
    await c.waitFor(/after-16/, 30000);
    // The guest started with HUTCH_GUEST_PTY_STALL_MS=1000.
    expect(await sc.closed).toEqual({ code: "failed", message: expect.stringContaining("granted no credit for 1000 ms") });
    const received = sc.out.reduce((n, b) => n + b.length, 0);
    expect(received).toBeLessThanOrEqual(DEFAULT_WINDOW);

    // A consumer that is slow but alive (it grants a little credit, often: well within the stall time however long
    // the burst takes on a loaded machine) falls behind, then gets the screen and stays attached.
    const slow = h.mux.open({ tool: "pty.attach", id: pty });
    slow.autoCredit = false;
    const lc = collect(slow);
    await lc.waitMsg("started");
    const alive = setInterval(() => slow.consumed(16 * 1024), 100);
    try {
      s.write(0, enc.encode(`head -c ${BURST} /dev/zero | tr '\\0' y; echo; echo again-$((5*5))\r`));
      // The guest hands each chunk of output to every attachment at once: with again-25 here, slow's share is already queued or dropped.
      await c.waitFor(/again-25/, 30000);
    } finally {
      clearInterval(alive);
    }
    slow.consumed(64 * 1024 * 1024);
    // However long the queued part of the burst takes to arrive on a loaded machine: what counts is that it resyncs, below.
    await lc.waitFor(/again-25/, 60000);
    expect(slow.closed).toBe(false);
    const total = lc.out.reduce((n, b) => n + b.length, 0);
    // It skipped most of the burst instead of receiving all of it.
    expect(total).toBeLessThan(BURST);
    expect(result((await call(h, { tool: "pty.list" })).c, PtyListResult)).toEqual([expect.objectContaining({ id: pty, attached: 2 })]);

    s.write(0, enc.encode("exit\r"));
    expect(await c.closed).toBeUndefined();
    expect(await lc.closed).toBeUndefined();
    expect(c.msgs.at(-1)).toEqual({ type: "exit", code: 0, signal: null });
  }, 90000);

  test("attach and kill of an unknown pty say not_found", async () => {
    expect((await call(h, { tool: "pty.attach", id: "pty_nothere" })).error?.code).toBe("not_found");
    expect((await call(h, { tool: "pty.kill", id: "pty_nothere" })).error?.code).toBe("not_found");
  });
});
