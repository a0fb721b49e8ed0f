import { describe, expect, test } from "bun:test";
import { DEFAULT_WINDOW } from "@hutch/shared";
import { alive, call, collect, type Guest, type Host, useGuest } from "./harness.ts";

let g: Guest;
let h: Host;
useGuest(async (guest, host) => {
  g = guest;
  h = host;
});

describe("exec", () => {
  test("streams stdout and stderr, then started/exit with the code", async () => {
    const { c, error } = await call(h, { tool: "exec", argv: ["sh", "-c", "echo out; echo err >&2; exit 7"] });
    expect(error).toBeUndefined();
    expect(c.text(1)).toBe("out\n");
    expect(c.text(2)).toBe("err\n");
    expect(c.eofs.sort()).toEqual([1, 2]);
    expect(c.msgs[0]).toMatchObject({ type: "started", pid: expect.any(Number) });
    expect(c.msgs.at(-1)).toEqual({ type: "exit", code: 7, signal: null });
  });

  test("runs in the default cwd with the request's env on top of the base env", async () => {
    const { c } = await call(h, { tool: "exec", argv: ["sh", "-c", 'pwd; echo "$FOO $HOME"'], env: { FOO: "bar" } });
    expect(c.text()).toBe(`${g.workspace}\nbar ${g.home}\n`);
  });

  test("a signal message ends the process and exit names the signal", async () => {
    const s = h.mux.open({ tool: "exec", argv: ["sleep", "30"] });
    const c = collect(s);
    await c.waitMsg("started");
    s.msg({ type: "signal", signal: "TERM" });
    expect(await c.closed).toBeUndefined();
    expect(c.msgs.at(-1)).toEqual({ type: "exit", code: null, signal: "TERM" });
  });

  test("8 MiB through stdin comes back byte-identical", async () => {
    const data = new Uint8Array(8 * 1024 * 1024);
    for (let off = 0; off < data.length; off += 65536) data.set(crypto.getRandomValues(new Uint8Array(65536)), off);
    const s = h.mux.open({ tool: "exec", argv: ["cat"] });
    const c = collect(s);
    expect(await s.write(0, data)).toBe(true);
    s.eof(0);
    expect(await c.closed).toBeUndefined();
    const got = Buffer.concat(c.out);
    expect(got.length).toBe(data.length);
    expect(new Bun.CryptoHasher("sha256").update(got).digest("hex")).toBe(new Bun.CryptoHasher("sha256").update(data).digest("hex"));
    expect(c.msgs.at(-1)).toEqual({ type: "exit", code: 0, signal: null });
  });

  test("a host that stops granting credit stops the reader: the process blocks, not the guest's memory", async () => {
    const s = h.mux.open({ tool: "exec", argv: ["sh", "-c", `head -c ${3 * DEFAULT_WINDOW} /dev/zero; echo done >&2`] });
    s.autoCredit = false;
    const c = collect(s);
    await c.waitMsg("started");
    const received = () => c.out.reduce((n, b) => n + b.length, 0);
    // One window arrives (however long a loaded machine takes to send it)...
    for (const until = Date.now() + 30_000; received() < DEFAULT_WINDOW && Date.now() < until; ) await Bun.sleep(20);
    expect(received()).toBe(DEFAULT_WINDOW);
    // ...and nothing more while no credit is granted: the process is blocked, not finished.
    await Bun.sleep(500);
    expect(received()).toBe(DEFAULT_WINDOW);
    expect(c.text(2)).toBe("");
    s.close();
  });

  test("stdin is credited only as the process reads it", async () => {
    const s = h.mux.open({ tool: "exec", argv: ["sh", "-c", "sleep 0.5; wc -c"] });
    const c = collect(s);
    let done = false;
    const size = 3 * DEFAULT_WINDOW;
    const writing = s.write(0, new Uint8Array(size)).then(() => (done = true));
    await Bun.sleep(300);
    // The process has read nothing yet: at most one window plus the pipe buffer was accepted.
    expect(done).toBe(false);
    expect(s.window).toBe(0);
    await writing;
    s.eof(0);
    expect(await c.closed).toBeUndefined();
    expect(c.text().trim()).toBe(String(size));
  });

  test("closing the stream kills the process", async () => {
    const s = h.mux.open({ tool: "exec", argv: ["sleep", "30"] });
    const c = collect(s);
    const { pid } = (await c.waitMsg("started")) as { pid: number };
    expect(alive(pid)).toBe(true);
    s.close();
    const until = Date.now() + 3000;
    while (alive(pid) && Date.now() < until) await Bun.sleep(20);
    expect(alive(pid)).toBe(false);
  });

  test("a missing command closes with not_found", async () => {
    const { error } = await call(h, { tool: "exec", argv: ["no-such-command-hutch"] });
    expect(error).toEqual({ code: "not_found", message: "no-such-command-hutch: command not found" });
  });

  test("payloads are validated per tool and name the field", async () => {
    expect((await call(h, { tool: "exec", argv: 5 })).error).toEqual({ code: "invalid", message: "argv: Expected array" });
    expect((await call(h, { tool: "exec", argv: [] })).error?.code).toBe("invalid");
    expect((await call(h, { tool: "exec", argv: ["ls"], extra: 1 })).error?.code).toBe("invalid");
    expect((await call(h, { tool: "frobnicate" })).error).toEqual({ code: "unsupported", message: 'unknown tool "frobnicate"' });
  });
});
