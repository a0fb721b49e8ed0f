// Ports of a process box reached from the host: a dev server started in the
// box (python3 -m http.server), forwarded by a spec and by --auto.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeHome, waitFor, type Home } from "../helpers.ts";

let h: Home;
beforeAll(async () => {
  h = makeHome("hutch-pt-");
  expect((await h.run(["box", "create", "p", "--start"])).code).toBe(0);
  await h.run(["exec", "p", "--", "sh", "-c", "echo hello-from-box > /workspace/index.txt"]);
});
afterAll(async () => {
  await h.cleanup();
});

async function serve(port: number): Promise<void> {
  const cmd = `cd /workspace && (setsid python3 -m http.server ${port} --bind 127.0.0.1 >/dev/null 2>&1 & echo $! > /tmp/http-${port}.pid)`;
  expect((await h.run(["exec", "p", "--", "sh", "-c", cmd])).code).toBe(0);
  await waitFor(`port ${port} listening`, async () =>
    JSON.parse((await h.run(["port", "list", "p", "--json"])).stdout).some((p: { port: number }) => p.port === port),
  );
}

async function fetchText(url: string): Promise<string | undefined> {
  return fetch(url)
    .then((r) => r.text())
    .catch(() => undefined);
}

/** Reads NDJSON lines from a running `hutch port forward --json`. */
function lines(proc: ReturnType<Home["spawn"]>): { next(pred: (l: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> } {
  const seen: Record<string, unknown>[] = [];
  let buf = "";
  void (async () => {
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
      buf += new TextDecoder().decode(chunk);
      let nl = buf.indexOf("\n");
      while (nl >= 0) {
        seen.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
        nl = buf.indexOf("\n");
      }
    }
  })();
  return { next: (pred) => waitFor("a forward line", () => seen.find(pred), 15000) };
}

describe("hutch port", () => {
  test("list shows the dev server, forward LOCAL:REMOTE reaches it from the host", async () => {
    await serve(8000);
    const list = JSON.parse((await h.run(["port", "list", "p", "--json"])).stdout);
    expect(list).toContainEqual({
      port: 8000,
      address: "127.0.0.1",
      family: "ipv4",
      process: { pid: expect.any(Number), name: "python3" },
    });
    const fwd = h.spawn(["port", "forward", "p", "0:8000", "--json"]);
    const out = lines(fwd);
    const added = await out.next((l) => l.type === "forwarded");
    expect(added.remote).toBe(8000);
    expect(await fetchText(`http://127.0.0.1:${added.local}/index.txt`)).toBe("hello-from-box\n");
    fwd.kill("SIGTERM");
    await fwd.exited;
    expect(await fetchText(`http://127.0.0.1:${added.local}/index.txt`)).toBeUndefined();
  });

  test("--auto forwards a new listener and drops it when the server stops", async () => {
    const fwd = h.spawn(["port", "forward", "p", "--auto", "--json"]);
    const out = lines(fwd);
    await serve(8123);
    const added = await out.next((l) => l.type === "forwarded" && l.remote === 8123);
    expect(await fetchText(`http://127.0.0.1:${added.local}/index.txt`)).toBe("hello-from-box\n");
    expect((await h.run(["exec", "p", "--", "sh", "-c", "kill $(cat /tmp/http-8123.pid)"])).code).toBe(0);
    await out.next((l) => l.type === "removed" && l.remote === 8123);
    expect(await fetchText(`http://127.0.0.1:${added.local}/index.txt`)).toBeUndefined();
    fwd.kill("SIGTERM");
    await fwd.exited;
  });

  test("a bad spec is a usage error", async () => {
    const r = await h.run(["port", "forward", "p", "99999"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("[LOCAL:]REMOTE");
  });
});
