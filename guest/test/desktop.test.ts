// desktop.*: a real Xvfb in the guest, a real xterm typed into by xdotool key
// events, screenshots read back as pixels.
import { describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { BrowserScreenshotResult, DesktopInfo, DesktopInputResult, DesktopWindowsResult } from "@hutch/shared";
import { decodePng } from "../../tests/fixtures/png.ts";
import { xdotoolArgs } from "../src/tools/desktop/index.ts";
import { call, collect, result, useGuest, type Guest, type Host } from "./harness.ts";

let host!: Host;
let guest!: Guest;
useGuest((g, h) => {
  host = h;
  guest = g;
});

async function ok<S extends Parameters<typeof result>[1]>(payload: unknown, schema: S) {
  const { c, error } = await call(host, payload);
  if (error) throw new Error(`${JSON.stringify(payload)}: ${error.code}: ${error.message}`);
  return { value: result(c, schema), bytes: Buffer.concat(c.out) };
}

describe("xdotoolArgs", () => {
  const cases: [Record<string, unknown>, string[]][] = [
    [{ action: "move", x: 1, y: 2 }, ["mousemove", "1", "2"]],
    [{ action: "click", x: 5, y: 6, button: 3 }, ["mousemove", "5", "6", "click", "3"]],
    [{ action: "click" }, ["click", "1"]],
    [{ action: "drag", x: 1, y: 2, toX: 3, toY: 4 }, ["mousemove", "1", "2", "mousedown", "1", "mousemove", "3", "4", "mouseup", "1"]],
    [{ action: "key", keys: ["ctrl+c", "Return"] }, ["key", "--delay", "30", "ctrl+c", "Return"]],
    [{ action: "type", text: "-rf /" }, ["type", "--delay", "20", "--", "-rf /"]],
  ];
  for (const [req, want] of cases)
    test(JSON.stringify(req), () => expect(xdotoolArgs({ tool: "desktop.input", ...req } as never)).toEqual(want));
  test("a move without coordinates is refused", () =>
    expect(() => xdotoolArgs({ tool: "desktop.input", action: "move" })).toThrow("needs x"));
});

describe("desktop", () => {
  test("before it starts, a screenshot says to start it", async () => {
    const { error } = await call(host, { tool: "desktop.screenshot" });
    expect(error?.code).toBe("not_ready");
    expect(error?.message).toContain("desktop.start");
  });

  test("an xterm typed into by key events; a second actor is refused while the first holds the input", { timeout: 30_000 }, async () => {
    const info = (await ok({ tool: "desktop.start" }, DesktopInfo)).value;
    expect(info).toMatchObject({ width: 1024, height: 768 });
    expect(info.display).toMatch(/^:\d+$/);
    const out = join(guest.workspace, "typed.txt");
    // The exec gets DISPLAY from the running desktop; it stays open while xterm runs.
    const xterm = collect(
      host.mux.open({
        tool: "exec",
        argv: ["xterm", "-T", "xterm", "-geometry", "80x10+0+0", "-e", "sh", "-c", `read line; echo "$line" > ${out}`],
      }),
    );
    await waitFor(async () => {
      const ws = (await ok({ tool: "desktop.windows" }, DesktopWindowsResult)).value;
      if (xterm.text(2)) throw new Error(`xterm: ${xterm.text(2)}`);
      return ws.find((w) => w.name === "xterm");
    });
    const win = (await ok({ tool: "desktop.windows" }, DesktopWindowsResult)).value.find((w) => w.name === "xterm");
    expect(win?.width).toBeGreaterThan(100);

    const first = await ok({ tool: "desktop.input", owner: "user/a", action: "click", x: 50, y: 50 }, DesktopInputResult);
    expect(first.value.owner).toBe("user/a");
    const other = await call(host, { tool: "desktop.input", owner: "user/b", action: "type", text: "intruder" });
    expect(other.error?.code).toBe("conflict");
    expect(other.error?.message).toContain("held by user/a");

    const { bytes } = await ok({ tool: "desktop.screenshot" }, BrowserScreenshotResult);
    const png = decodePng(bytes);
    expect([png.width, png.height]).toEqual([1024, 768]);
    // Xvfb's root is black; xterm's window is white with black text.
    expect(png.pixel(1000, 700)).toEqual([0, 0, 0]);
    expect(png.pixel(200, 100)).toEqual([255, 255, 255]);

    await ok({ tool: "desktop.input", owner: "user/a", action: "type", text: "hello desktop" }, DesktopInputResult);
    await ok({ tool: "desktop.input", owner: "user/a", action: "key", keys: ["Return"] }, DesktopInputResult);
    await waitFor(() => readFile(out, "utf8").catch(() => undefined));
    expect(await readFile(out, "utf8")).toBe("hello desktop\n");
    await xterm.closed;

    const stolen = await ok({ tool: "desktop.input", owner: "user/b", action: "move", x: 1, y: 1, steal: true }, DesktopInputResult);
    expect(stolen.value).toEqual({ owner: "user/b", stolenFrom: "user/a" });
    expect((await ok({ tool: "desktop.release", owner: "user/b" }, DesktopInputResult)).value.owner).toBeNull();
  });
});

async function waitFor<T>(fn: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error("timed out");
    await Bun.sleep(50);
  }
}
