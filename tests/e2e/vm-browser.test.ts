// The browser in a QEMU box booted from the desktop image profile (tcg on
// this project's machines): the same pages, served from inside the VM, the
// same verbs as in a process box. Slow by nature (Chromium's first page load
// under tcg is ~30 s); the image is built once into the test cache.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { decodePng } from "../fixtures/png.ts";
import { browserCli, makeHome, refIn, ROOT, testImage, waitFor, type Home } from "../helpers.ts";

let h: Home;
const PAGE = "http://127.0.0.1:8000";
beforeAll(async () => {
  h = makeHome("hutch-vb-");
  mkdirSync(join(h.home, "images"), { recursive: true });
  cpSync(await testImage("desktop"), join(h.home, "images", "desktop"), { recursive: true });
  const made = await h.run(["box", "create", "v", "--engine", "qemu", "--image", "desktop", "--start"]);
  expect(made.stderr).toBe("");
  expect(made.code).toBe(0);
  expect((await h.run(["cp", join(ROOT, "tests/fixtures/pages"), "v:/workspace/pages"])).code).toBe(0);
  const serve = "cd /workspace/pages && (setsid python3 -m http.server 8000 --bind 127.0.0.1 >/tmp/http.log 2>&1 &)";
  expect((await h.run(["exec", "v", "--", "sh", "-c", serve])).code).toBe(0);
  await waitFor(
    "the box's http server",
    async () => (await h.run(["exec", "v", "--", "curl", "-sf", `${PAGE}/form.html`])).code === 0,
    60_000,
  );
}, 900_000);
afterAll(async () => {
  if (process.env.HUTCH_TEST_KEEP)
    console.error(
      await Bun.file(join(h.home, "daemon.log"))
        .text()
        .catch(() => ""),
    );
  await h.cleanup();
});

const ok = (args: string[]) => browserCli(h)(args);

describe("hutch browser in a QEMU box (desktop image)", () => {
  test("navigate, snapshot, fill and submit by ref, a stale ref refused, a screenshot of the page's colour", async () => {
    expect(await ok(["open", "v", `${PAGE}/form.html`])).toContain("Sign up");
    const s = await ok(["snapshot", "v"]);
    await ok(["type", "v", refIn(s, /textbox "Name"/), "Ada"]);
    await ok(["type", "v", refIn(s, /textbox "Email"/), "ada@example.com", "--submit"]);
    await ok(["wait", "v", "--text", "Thanks Ada", "--timeout", "60000"]);
    expect(await ok(["snapshot", "v"])).toContain('- paragraph: "Thanks Ada <ada@example.com> on free"');

    await ok(["navigate", "v", `${PAGE}/rerender.html`]);
    const before = refIn(await ok(["snapshot", "v"]), /button "Increment"/);
    await ok(["click", "v", before]);
    const stale = await h.run(["browser", "click", "v", before]);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toContain(`${before} is stale`);

    await ok(["navigate", "v", `${PAGE}/red.html`]);
    const png = decodePng((await h.run(["browser", "screenshot", "v"])).out);
    expect([png.width, png.height]).toEqual([1280, 800]);
    expect(png.pixel(640, 400)).toEqual([255, 0, 0]);
  }, 600_000);
});
