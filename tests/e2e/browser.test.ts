// The browser in a process box, driven as a user would: test pages served by
// python3 from inside the box, the box's Chromium (the host's Debian build,
// read-only), `hutch browser` verbs against dist/hutch.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { decodePng } from "../fixtures/png.ts";
import { browserCli, makeHome, refIn, ROOT, waitFor, type Home } from "../helpers.ts";

let h: Home;
const PAGE = "http://127.0.0.1:8000";
beforeAll(async () => {
  h = makeHome("hutch-br-");
  expect((await h.run(["box", "create", "b", "--start"])).code).toBe(0);
  expect((await h.run(["cp", join(ROOT, "tests/fixtures/pages"), "b:/workspace/pages"])).code).toBe(0);
  // Two origins: the second port serves the frames of xframe.html.
  const serve =
    "cd /workspace/pages && (setsid python3 -m http.server 8000 --bind 127.0.0.1 >/tmp/http.log 2>&1 &) && (setsid python3 -m http.server 8001 --bind 127.0.0.1 >/tmp/http2.log 2>&1 &)";
  expect((await h.run(["exec", "b", "--", "sh", "-c", serve])).code).toBe(0);
  await waitFor(
    "the box's http server",
    async () =>
      (await h.run(["exec", "b", "--", "python3", "-c", `import urllib.request; urllib.request.urlopen("${PAGE}/form.html")`])).code === 0,
  );
});
afterAll(async () => {
  await h.cleanup();
});

const ok = (args: string[]) => browserCli(h)(args);

describe("hutch browser in a process box", () => {
  test("navigate, snapshot, fill and submit by ref, see the result; a stale ref is refused", async () => {
    expect(await ok(["open", "b", `${PAGE}/form.html`])).toMatch(/^tab_\d+\t.*form\.html\tSign up\n$/);
    const s = await ok(["snapshot", "b"]);
    await ok(["type", "b", refIn(s, /textbox "Name"/), "Ada"]);
    await ok(["type", "b", refIn(s, /textbox "Email"/), "ada@example.com", "--submit"]);
    await ok(["wait", "b", "--text", "Thanks Ada"]);
    expect(await ok(["snapshot", "b"])).toContain('- paragraph: "Thanks Ada <ada@example.com> on free"');

    await ok(["navigate", "b", `${PAGE}/rerender.html`]);
    const before = refIn(await ok(["snapshot", "b"]), /button "Increment"/);
    await ok(["click", "b", before]);
    const stale = await h.run(["browser", "click", "b", before]);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toContain(`${before} is stale`);
    const delta = await ok(["snapshot", "b", "--delta"]);
    expect(delta).toContain('+ - paragraph: "Count: 1"');
    const never = await h.run(["browser", "click", "b", "e4242"]);
    expect(never.code).toBe(4);
  });

  test("an iframe from another origin (another port in the box) is in the snapshot, and its refs act in it", async () => {
    await ok(["navigate", "b", `${PAGE}/xframe.html?inner=${encodeURIComponent("http://127.0.0.1:8001/inner.html")}`]);
    const s = await waitFor("the frame's content", async () => {
      const text = await ok(["snapshot", "b"]);
      return text.includes("Inner button") ? text : undefined;
    });
    expect(s).not.toContain("not shown");
    expect(s).toMatch(/- iframe "Other origin" \[ref=e\d+\]:\n\s+- button "Inner button" \[ref=e\d+\]/);
    await ok(["click", "b", refIn(s, /button "Inner button"/)]);
    expect(await ok(["snapshot", "b"])).toContain('- paragraph: "inner clicked"');
  });

  test("a screenshot is a PNG of the viewport showing the page's colour", async () => {
    await ok(["navigate", "b", `${PAGE}/red.html`]);
    const r = await h.run(["browser", "screenshot", "b"]);
    expect(r.code).toBe(0);
    const png = decodePng(r.out);
    expect([png.width, png.height]).toEqual([1280, 800]);
    for (const [x, y] of [
      [1, 1],
      [640, 400],
      [1270, 790],
    ] as const)
      expect(png.pixel(x, y)).toEqual([255, 0, 0]);
  });

  test("a URL the broker does not allow is a clear error, and the browser keeps working", async () => {
    const r = await h.run(["browser", "navigate", "b", "https://example.com/"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("ERR_TUNNEL_CONNECTION_FAILED");
    expect(r.stderr).toContain("broker refused");
    await ok(["navigate", "b", `${PAGE}/form.html`]);
    expect(await ok(["snapshot", "b"])).toContain('button "Submit"');
    const tab = (await ok(["close", "b"])).split("\t")[0] ?? "";
    const gone = await h.run(["browser", "screenshot", "b", "--tab", tab]);
    expect(gone.code).toBe(4);
    expect(gone.stderr).toContain(`no tab ${tab}`);
  });
});
