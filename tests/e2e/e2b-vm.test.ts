// test: vm
// The E2B API on a VM box: a template that names one of the server's images
// makes a VM box from it, and pause freezes the VM with its processes, so
// connect resumes it with a background process still running (a process
// box sleeps instead, and its programs stop: tests/e2e/e2b.test.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { installTestImage } from "../helpers.ts";
import { tokenOf } from "../remote.ts";
import { startE2b, type E2bServer } from "../e2b.ts";

let e2b: E2bServer;
let key: string;

beforeAll(async () => {
  e2b = await startE2b("hutch-e2bvm-");
  await installTestImage(e2b.srv.home);
  key = tokenOf(await e2b.srv.join("alice"));
}, 600_000);

afterAll(async () => {
  await e2b?.srv.stop();
});

describe("a VM sandbox", () => {
  test("template `default` is the server's image; pause keeps a running process, listed paused meanwhile", async () => {
    const made = await e2b.sdk("create-template", key, "default");
    const id = made.id as string;
    const boxes = JSON.parse((await e2b.srv.home.run(["box", "list", "--json"])).stdout) as { name: string; engine: string }[];
    expect(boxes.find((b) => b.name === `e2b-${id}`)?.engine).toBe("qemu");
    const r = await e2b.sdk("pause-keeps", key, id);
    expect(r.paused).toBe(true);
    expect(r.listed).toBe("paused");
    expect(r.running).toContain(r.pid);
  }, 300_000);
});
