// test: vm
// The E2B API on a VM box: a template that names one of the server's images
// makes a VM box from it, and pause sleeps the VM to disk with its memory,
// so connect resumes it with a background process still running and a
// command's stream still open (a process box sleeps with its files only,
// and its programs stop: tests/e2e/e2b.test.ts).
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
  test("template `default` is the server's image; pause sleeps the VM, keeps a running process and a command's stream, listed paused meanwhile", async () => {
    const made = await e2b.sdk("create-template", key, "default");
    const id = made.id as string;
    const boxes = JSON.parse((await e2b.srv.home.run(["box", "list", "--json"])).stdout) as { name: string; engine: string }[];
    expect(boxes.find((b) => b.name === `e2b-${id}`)?.engine).toBe("qemu");
    const r = await e2b.sdk("pause-keeps", key, id);
    expect(r.paused).toBe(true);
    expect(r.listed).toBe("paused");
    expect(r.running).toContain(r.pid);
    expect(r.streamed).toEqual([0, "one\ntwo-2\n"]);
    // Paused was asleep: its memory in a file, no QEMU, and woken by connect with the same connection.
    const log = e2b.srv.log();
    expect(log).toMatch(new RegExp(`box asleep .*box=e2b-${id} keeps=memory`));
    expect(log).toMatch(new RegExp(`box woke .*box=e2b-${id} .*streamsKept=true`));
  }, 300_000);
});
