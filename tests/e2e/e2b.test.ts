// The E2B API: `hutch serve --e2b` on loopback, driven by the real `e2b` SDK
// in a program of its own (tests/fixtures/e2b/sdk.ts) that reads only
// E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL and trusts the server's
// certificate through NODE_EXTRA_CA_CERTS, as a user's program does. The key
// is a hutch token; every sandbox is a process box of its user.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HUTCH, waitFor } from "../helpers.ts";
import { tokenOf, type Server } from "../remote.ts";
import { startE2b, type E2bServer } from "../e2b.ts";

let e2b: E2bServer;
let srv: Server;
let url: string;
let cert: string;
let alice: string;
let aliceJoin: string;
let bob: string;
let id: string;
/** The server started again by the restart test (the home's cleanup stops it, as it stops any daemon of the home). */
let restarted: ReturnType<typeof Bun.spawn> | undefined;
const sdk = (scenario: string, key: string, sandbox?: string) => e2b.sdk(scenario, key, ...(sandbox ? [sandbox] : []));

/** A raw request to the E2B listener, trusting its certificate. */
function raw(path: string, init: RequestInit & { headers?: Record<string, string> } = {}): Promise<Response> {
  return fetch(`${url}${path}`, { ...init, tls: { ca: cert } } as RequestInit);
}

beforeAll(async () => {
  e2b = await startE2b();
  ({ srv, url } = e2b);
  cert = readFileSync(e2b.caPath, "utf8");
  aliceJoin = await srv.join("alice");
  alice = tokenOf(aliceJoin);
  bob = tokenOf(await srv.join("bob"));
  id = (await sdk("create", alice)).id as string;
}, 120_000);

afterAll(async () => {
  await srv?.stop();
  restarted?.kill("SIGTERM");
  await restarted?.exited;
});

describe("the e2b SDK against hutch", () => {
  test("the README's example runs unchanged, with the key `hutch token create` printed and the environment the README sets", async () => {
    const readme = readFileSync(join(import.meta.dir, "..", "..", "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Using the E2B SDK with hutch"));
    const example = /```ts\n([\s\S]*?)```/.exec(section)![1]!;
    expect(example).toContain('from "e2b"');
    // Beside the SDK program, so `e2b` resolves from the repository's own dependencies.
    const file = join(import.meta.dir, "..", "fixtures", "e2b", `readme-example-${process.pid}.ts`);
    writeFileSync(file, example);
    const boxes = async () =>
      (JSON.parse((await srv.home.run(["box", "list", "--json"])).stdout) as { name: string }[]).filter((b) => b.name.startsWith("e2b-"))
        .length;
    const before = await boxes();
    try {
      const proc = Bun.spawn([process.execPath, file], {
        env: { ...process.env, E2B_API_URL: url, E2B_SANDBOX_URL: url, E2B_API_KEY: aliceJoin, NODE_EXTRA_CA_CERTS: e2b.caPath },
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      expect(code, err).toBe(0);
      expect(out).toMatch(/^Linux \S+ /);
    } finally {
      rmSync(file, { force: true });
    }
    // Its sandbox was made, and killed by the example's last line.
    expect(await boxes()).toBe(before);
    expect(srv.log()).toMatch(/sandbox created/);
  }, 60_000);

  test("a sandbox is a box of the token's user, in hutch box list", async () => {
    expect(id).toMatch(/^[a-z0-9]{20}$/);
    const r = await srv.home.run(["box", "list", "--json"]);
    const boxes = JSON.parse(r.stdout) as { name: string; state: string }[];
    expect(boxes.find((b) => b.name === `e2b-${id}`)?.state).toBe("running");
    // The join string `hutch token create` prints works as the key too.
    const listed = await sdk("list", aliceJoin);
    expect(listed.ids).toEqual([id]);
    expect(listed.metadata).toEqual([{ purpose: "e2e" }]);
  });

  test("commands.run: echo, a failing command's exit code and stderr, env vars and cwd", async () => {
    const r = await sdk("run", alice, id);
    expect(r.ok).toEqual({ exitCode: 0, stdout: "hello from-create\n", stderr: "to-err\n" });
    expect(r.failed).toEqual({ exitCode: 3, stderr: "broken\n", stdout: "", error: "CommandExitError" });
    expect(r.cwd).toBe("/tmp\n");
    expect(r.quick).toBe(50);
  });

  test("a long command's output streams before it ends", async () => {
    const r = await sdk("stream", alice, id);
    expect(r.before).toBe("first\n");
    expect(r.after).toBe("first\nsecond\n");
  });

  test("a background process: listed, connected to again, fed stdin, killed", async () => {
    const r = await sdk("background", alice, id);
    expect(r.listed).toContain(r.pid);
    expect(r.seen).toBe("got:hello\n");
    expect(r.killed).toBe(true);
    expect(r.end).toEqual({ exitCode: -1, error: "signal: killed" });
    expect(r.after).not.toContain(r.pid);
  });

  test("pty: a terminal that is resized, answers typed input and is killed", async () => {
    expect(await sdk("pty", alice, id)).toEqual({ size: true, answered: true, end: -1 });
  });

  test("user root on a process box is refused, saying why and what to use", async () => {
    const r = await sdk("as-root", alice, id);
    expect(r.error).toBe("InvalidArgumentError");
    expect(r.message).toContain("a process box has no root");
  });

  test("an unknown template is refused as not found, naming what hutch maps", async () => {
    const r = await sdk("unknown-template", alice);
    expect(r.error).toBe("SandboxError");
    expect(r.message).toStartWith('404: template "no-such-template" not found');
    expect(r.message).toContain('"base"');
  });

  test("files: text and 10 MiB of bytes byte-exact, list, stat, make dir, rename, remove", async () => {
    const r = await sdk("files", alice, id);
    expect(r.text).toBe("text here ✓");
    expect(r.bigSame).toBe(true);
    expect(r.listed).toEqual([
      { name: "a.txt", dir: false, size: 13 },
      { name: "big.bin", dir: false, size: 10 * 1024 * 1024 },
    ]);
    expect(r.info).toEqual({ name: "a.txt", size: 13, path: "/workspace/dir/a.txt" });
    expect([r.madeDir, r.madeAgain]).toEqual([true, false]);
    expect(r.renamed).toBe("/workspace/dir/sub/b.txt");
    expect(r.existsOld).toBe(false);
    expect(r.renamedText).toBe("text here ✓");
    expect(r.existsRemoved).toBe(false);
    expect(r.missing).toMatchObject({ error: "FileNotFoundError" });
  });

  test("watchDir sees a file a command creates", async () => {
    const r = await sdk("watch", alice, id);
    expect(r.events).toContainEqual({ name: "new.txt", type: "create" });
  });

  test("getHost: a server in the sandbox, by E2b-Sandbox-Port and by host name; a closed port is 502", async () => {
    const r = await sdk("port", alice, id);
    expect(r.host).toBe(`8000-${id}.e2b.app`);
    expect(r.body).toBe("served from the box");
    expect(r.byHost).toBe("served from the box");
    expect(r.closed).toBe(502);
  });

  test("pause: listed paused, connect resumes it with its files (a process box stops and starts)", async () => {
    const r = await sdk("pause", alice, id);
    expect(r).toEqual({ paused: true, listed: "paused", listedAfter: "running", kept: "kept", ran: "alive\n" });
  });

  test("another user's key sees none of it: list empty, each call not found", async () => {
    expect((await sdk("list", bob)).ids).toEqual([]);
    const r = await sdk("not-mine", bob, id);
    expect(r.connect).toMatchObject({ error: "SandboxNotFoundError" });
    expect(r.info).toMatchObject({ error: "SandboxNotFoundError" });
    expect(r.timeout).toMatchObject({ error: "SandboxNotFoundError" });
    expect(r.kill).toEqual({ value: false });
    expect((await sdk("list", alice)).ids).toEqual([id]);
  });

  test("bad input: a wrong key is 401, an unknown sandbox 404, malformed Connect a protocol error; the server goes on", async () => {
    const forged = `${alice.slice(0, -1)}${alice.endsWith("A") ? "B" : "A"}`;
    expect(await sdk("bad-key", forged)).toMatchObject({ error: "AuthenticationError" });
    expect(await sdk("not-mine", alice, "zzzzzzzzzzzzzzzzzzzz")).toMatchObject({ connect: { error: "SandboxNotFoundError" } });
    const info = (await (await raw(`/sandboxes/${id}`, { headers: { "x-api-key": alice } })).json()) as { envdAccessToken: string };
    const envd = { "e2b-sandbox-id": id, "e2b-sandbox-port": "49983", "x-access-token": info.envdAccessToken };
    // A unary call whose body is not JSON.
    const bad = await raw("/process.Process/List", {
      method: "POST",
      headers: { ...envd, "content-type": "application/json" },
      body: "{nope",
    });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: "invalid_argument" });
    // A stream whose envelope lies about its length: the end of stream carries the error.
    const env = new Uint8Array([0, 0, 0, 0, 99, 123, 125]);
    const st = await raw("/process.Process/Start", {
      method: "POST",
      headers: { ...envd, "content-type": "application/connect+json" },
      body: env,
    });
    const bytes = new Uint8Array(await st.arrayBuffer());
    expect(bytes[0]).toBe(2);
    expect(JSON.parse(new TextDecoder().decode(bytes.subarray(5)))).toMatchObject({ error: { code: "invalid_argument" } });
    // No access token: envd refuses.
    const anon = await raw("/process.Process/List", {
      method: "POST",
      headers: { ...envd, "x-access-token": "x", "content-type": "application/json" },
      body: "{}",
    });
    expect(anon.status).toBe(401);
    // A reader that goes away in the middle of a 10 MiB file.
    const partial = await raw(`/files?path=${encodeURIComponent("/workspace/dir/big.bin")}`, { headers: envd });
    expect(partial.status).toBe(200);
    const reader = partial.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    await reader.cancel();
    expect(((await sdk("run", alice, id)).ok as { exitCode: number }).exitCode).toBe(0);
  });

  test("timeout expiry kills the sandbox and deletes its box", async () => {
    const short = (await sdk("create-short", alice)).id as string;
    await waitFor(
      "the short sandbox to end",
      async () => {
        const r = await srv.home.run(["box", "list", "--json"]);
        return !r.stdout.includes(`e2b-${short}`);
      },
      30_000,
    );
    expect((await sdk("list", alice)).ids).not.toContain(short);
  });

  test("a daemon restart keeps the sandbox: its files, and a new access token through connect", async () => {
    const port = Number(new URL(url).port);
    srv.proc.kill("SIGTERM");
    await srv.proc.exited;
    const logPath = join(srv.home.home, "restart.log");
    const fd = openSync(logPath, "a", 0o600);
    restarted = Bun.spawn([HUTCH, "serve", "--listen", `127.0.0.1:${srv.port}`, "--e2b", `127.0.0.1:${port}`], {
      env: srv.home.env,
      stdin: "ignore",
      stdout: fd,
      stderr: fd,
    });
    await waitFor("the restarted server", () => readFileSync(logPath, "utf8").includes("daemon ready"), 60_000);
    expect(readFileSync(logPath, "utf8")).toContain("sandboxes taken back after a restart");
    expect(await sdk("after-restart", alice, id)).toEqual({ kept: "kept", ran: "alive\n", state: "running" });
    expect((await sdk("list", bob)).ids).toEqual([]);
  });

  test("kill deletes the box; the sandbox is then not found", async () => {
    expect(await sdk("kill", alice, id)).toMatchObject({ error: "SandboxNotFoundError" });
    const r = await srv.home.run(["box", "list", "--json"]);
    expect(r.stdout.includes(`e2b-${id}`)).toBe(false);
  });
});
