// The desktop of a process box, as a user drives it: Xvfb and xterm are the
// host's Debian packages seen read-only; input comes as key events, one actor
// at a time, the actor named by the daemon from each connection: while a
// session of the box has a driver, that driver.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { decodePng } from "../fixtures/png.ts";
import { makeHome, waitFor, type Home } from "../helpers.ts";

let h: Home;
beforeAll(async () => {
  h = makeHome("hutch-dt-");
  expect((await h.run(["box", "create", "d", "--start"])).code).toBe(0);
});
afterAll(async () => {
  await h.cleanup();
});

const AGENT = { HUTCH_CLIENT: "agent", HUTCH_CLIENT_NAME: "second" };

describe("hutch desktop in a process box", () => {
  test("an xterm typed into by key events, seen in a screenshot; a second actor is refused while the first holds the input", async () => {
    const started = await h.run(["desktop", "start", "d"]);
    expect(started.stdout).toMatch(/^DISPLAY=:\d+ 1024x768\n$/);
    const xterm = "setsid xterm -T xterm -geometry 80x10+0+0 -e sh -c 'read line; echo \"$line\" > /workspace/typed.txt' >/dev/null 2>&1 &";
    expect((await h.run(["exec", "d", "--", "sh", "-c", xterm])).code).toBe(0);
    await waitFor("the xterm window", async () => (await h.run(["desktop", "windows", "d"])).stdout.includes("xterm"));

    expect((await h.run(["desktop", "click", "d", "50", "50"])).code).toBe(0);
    const other = await h.run(["desktop", "type", "d", "intruder"], { env: AGENT });
    expect(other.code).toBe(1);
    expect(other.stderr).toContain("held by");

    const shot = await h.run(["desktop", "screenshot", "d"]);
    const png = decodePng(shot.out);
    expect([png.width, png.height]).toEqual([1024, 768]);
    expect(png.pixel(1000, 700)).toEqual([0, 0, 0]);
    expect(png.pixel(200, 100)).toEqual([255, 255, 255]);

    expect((await h.run(["desktop", "type", "d", "hello from keys"])).code).toBe(0);
    expect((await h.run(["desktop", "key", "d", "Return"])).code).toBe(0);
    const typed = await waitFor("the program's output", async () => {
      const r = await h.run(["exec", "d", "--", "cat", "/workspace/typed.txt"]);
      return r.code === 0 ? r.stdout : undefined;
    });
    expect(typed).toBe("hello from keys\n");

    const stolen = await h.run(["desktop", "move", "d", "1", "1", "--steal", "--json"], { env: AGENT });
    expect(stolen.code).toBe(0);
    expect(JSON.parse(stolen.stdout).owner).toEndWith("/agent:second");
    expect((await h.run(["desktop", "move", "d", "2", "2"])).code).toBe(1);
    expect((await h.run(["desktop", "release", "d"], { env: AGENT })).code).toBe(0);
    expect((await h.run(["desktop", "move", "d", "2", "2"])).code).toBe(0);
  });

  test("the session's driver is the one input owner: a second actor's input is refused while the driver holds the slot; a steal takes the slot, logged", async () => {
    const run = await h.run(["run", "d", "--detach", "--json"]);
    expect(run.code, run.stderr).toBe(0);
    const sid = (JSON.parse(run.stdout) as { id: string }).id;
    expect((await h.run(["session", "driver", "acquire", sid])).code).toBe(0);

    // The agent-kind client does not drive: its input is refused, and its next step named.
    const refused = await h.run(["desktop", "move", "d", "5", "5"], { env: AGENT });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`session ${sid} is driven by`);
    expect(refused.stderr).toContain(`hutch session driver steal ${sid}`);
    // Nor may it click in the box's browser (opening a tab is not input).
    expect((await h.run(["browser", "open", "d", "about:blank"], { env: AGENT })).code).toBe(0);
    const click = await h.run(["browser", "click", "d", "e1"], { env: AGENT });
    expect(click.code).toBe(1);
    expect(click.stderr).toContain("is driven by");
    // The driver may.
    expect((await h.run(["desktop", "move", "d", "6", "6"])).code).toBe(0);

    const stolen = await h.run(["desktop", "move", "d", "7", "7", "--steal", "--json"], { env: AGENT });
    expect(stolen.code, stolen.stderr).toBe(0);
    expect(JSON.parse(stolen.stdout).owner).toEndWith("/agent:second");
    const info = JSON.parse((await h.run(["session", "info", sid, "--json"])).stdout) as { driver?: { actor: { id: string } } };
    expect(info.driver?.actor.id).toEndWith("/agent:second");
    const log = (await h.run(["session", "log", sid, "--json"])).stdout;
    expect(log).toContain('"kind":"session.driver.stolen"');
    // Now the first actor is the one refused.
    const user = await h.run(["desktop", "move", "d", "8", "8"]);
    expect(user.code).toBe(1);
    expect(user.stderr).toContain("is driven by");
    expect((await h.run(["session", "close", sid])).code).toBe(0);
  });
});
