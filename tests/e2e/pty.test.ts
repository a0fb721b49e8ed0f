// A terminal owned by the box: resize, type, see output; disconnect, reattach,
// and the screen comes back with the command still running.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeHome, onTerminal as term, waitFor, type Home } from "../helpers.ts";

let h: Home;
beforeAll(async () => {
  h = makeHome();
  expect((await h.run(["box", "create", "t", "--start"])).code).toBe(0);
});
afterAll(() => h.cleanup());

const onTerminal = (args: string[], cols?: number, rows?: number) => term(h, args, cols, rows);

describe("hutch exec --tty", () => {
  test("resize, type, disconnect, reattach: screen back, command still running", async () => {
    const a = onTerminal(["exec", "--tty", "t", "--", "sh"]);
    await a.until("$ ");
    a.proc.terminal!.resize(100, 30);
    // The new size travels by SIGWINCH to the client, beside the keys: ask again until the box's terminal has it.
    await waitFor("the box's terminal to take the new size", () => {
      a.type("stty size\n");
      return a.text().includes("30 100");
    });
    a.type("i=0; while true; do i=$((i+1)); echo tick-$i; sleep 0.3; done\n");
    await a.until("tick-3");
    // Disconnect the hard way: the client dies, the terminal in the box does not.
    a.proc.kill("SIGKILL");
    await a.proc.exited;

    const list = await h.run(["pty", "list", "t", "--json"]);
    expect(list.code).toBe(0);
    const ptys = JSON.parse(list.stdout) as { id: string; argv: string[]; cols: number; rows: number }[];
    expect(ptys.length).toBe(1);
    expect(ptys[0]!.argv).toEqual(["sh"]);
    const id = ptys[0]!.id;

    const seenBefore = Math.max(...[...a.text().matchAll(/tick-(\d+)/g)].map((m) => Number(m[1])));
    const b = onTerminal(["pty", "attach", "t", id], 100, 30);
    // The screen comes back: the earlier command and its output are on it.
    await b.until("stty size");
    await b.until("30 100");
    // And the loop kept running while nobody watched: later ticks arrive.
    await b.until(new RegExp(`tick-(${seenBefore + 5}|${seenBefore + 6}|${seenBefore + 7})`));

    // Ctrl-A d detaches without stopping anything.
    b.type("\x01d");
    expect(await b.proc.exited).toBe(0);
    expect(b.text()).toContain(`reattach: hutch pty attach t ${id}`);
    const still = JSON.parse((await h.run(["pty", "list", "t", "--json"])).stdout) as { id: string }[];
    expect(still.map((p) => p.id)).toEqual([id]);

    // Ctrl-C interrupts the loop (the terminal delivers it), exit ends the shell and the attach.
    const c = onTerminal(["pty", "attach", "t", id]);
    await c.until("tick-");
    c.type("\x03");
    // The shell's prompt back before typing on: keys typed while the terminal handles an interrupt are its to drop (POSIX flushes input on INTR).
    await c.until(/\$ $/);
    c.type("echo done-$((40+2))\n");
    await c.until("done-42");
    c.type("exit 5\n");
    expect(await c.proc.exited).toBe(5);
    expect(JSON.parse((await h.run(["pty", "list", "t", "--json"])).stdout)).toEqual([]);
  });

  test("attaching to a terminal that does not exist: exit 4", async () => {
    const r = await h.run(["pty", "attach", "t", "pty_doesnotexist000000"]);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain("pty_doesnotexist000000");
  });
});
