import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { makeHome, sha256, waitFor, type Home } from "../helpers.ts";

let h: Home;
beforeAll(async () => {
  h = makeHome();
  const r = await h.run(["box", "create", "b", "--start"]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
});
afterAll(() => h.cleanup());

describe("hutch exec", () => {
  test("stdout, stderr and the exit code pass through separately", async () => {
    const r = await h.run(["exec", "b", "--", "sh", "-c", "echo out; echo err >&2; exit 7"]);
    expect(r.stdout).toBe("out\n");
    expect(r.stderr).toBe("err\n");
    expect(r.code).toBe(7);
  });

  test("a remote process killed with SIGTERM reports 143", async () => {
    const victim = h.spawn(["exec", "b", "--", "sh", "-c", "echo $$ > /tmp/victim.pid; exec sleep 300"]);
    const pid = await waitFor("the victim's pid", async () => {
      const r = await h.run(["exec", "b", "--", "cat", "/tmp/victim.pid"]);
      return r.code === 0 ? r.stdout.trim() : "";
    });
    const k = await h.run(["exec", "b", "--", "kill", "-TERM", pid]);
    expect(k.code).toBe(0);
    expect(await victim.exited).toBe(143);
  });

  test("SIGTERM to the local hutch exec is forwarded to the remote process", async () => {
    const p = h.spawn(["exec", "b", "--", "sh", "-c", "echo started; exec sleep 300"]);
    const reader = (p.stdout as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe("started\n");
    p.kill("SIGTERM");
    expect(await p.exited).toBe(143);
  });

  test("64 MiB of random bytes through cat come back identical", async () => {
    const data = new Uint8Array(randomBytes(64 * 1024 * 1024));
    const r = await h.run(["exec", "b", "--", "cat"], { stdin: data });
    expect(r.code).toBe(0);
    expect(r.out.length).toBe(data.length);
    expect(sha256(r.out)).toBe(sha256(data));
  });

  test("a reader that goes away early: exec stops (141) and so does the remote process", async () => {
    const p = Bun.spawn(
      ["bash", "-c", `head -c 64M /dev/zero | "$HUTCH" exec b -- cat | head -c 1000 | wc -c; echo "rc=\${PIPESTATUS[1]}"`],
      {
        env: { ...h.env, HUTCH: (await import("../helpers.ts")).HUTCH },
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const out = await new Response(p.stdout).text();
    expect(await p.exited).toBe(0);
    expect(out).toBe("1000\nrc=141\n");
    // The box's cat is killed too (the daemon passes the close on; it lands just after we exit).
    await waitFor(
      "the box's cat to be gone",
      async () => (await h.run(["exec", "b", "--", "sh", "-c", "ps -eo comm | grep -c '^cat$' || true"])).stdout.trim() === "0",
      5000,
    );
  });

  test("stdin arrives whole and its end arrives every time", async () => {
    const big = await h.run(["exec", "b", "--", "wc", "-c"], { stdin: new Uint8Array(100 * 1024 * 1024) });
    expect(big.stdout.trim()).toBe(String(100 * 1024 * 1024));
    for (let i = 0; i < 10; i++) {
      const r = await h.run(["exec", "b", "--", "cat"], { stdin: "x" });
      expect(r.stdout).toBe("x");
      expect(r.code).toBe(0);
    }
  });

  test("env, workdir and --json", async () => {
    const r = await h.run([
      "exec",
      "--json",
      "-e",
      "GREETING=hi there",
      "-w",
      "/tmp",
      "b",
      "--",
      "sh",
      "-c",
      'echo "$GREETING from $(pwd)"',
    ]);
    expect(r.code).toBe(0);
    const lines = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[0].type).toBe("started");
    expect(lines.find((l) => l.type === "stdout").text).toBe("hi there from /tmp\n");
    expect(lines.at(-1)).toEqual({ type: "exit", code: 0, signal: null });
  });

  test("the box is a sandbox: its own user, hostname, no network, read-only system", async () => {
    const r = await h.run(["exec", "b", "--", "sh", "-c", "id -un; hostname; touch /usr/x 2>&1 || echo ro; ls /etc/shadow 2>&1 || true"]);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toBe("hutch");
    expect(lines[1]).toBe("b");
    expect(lines).toContain("ro");
    expect(r.stdout).toContain("No such file");
    // Interfaces of the box's network namespace: loopback only.
    const net = await h.run(["exec", "b", "--", "sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"]);
    expect(net.stdout.trim().split("\n")).toEqual(["lo"]);
  });

  test("an unknown command fails with 127-style not found and a clear message", async () => {
    const r = await h.run(["exec", "b", "--", "no-such-command-xyz"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("no-such-command-xyz");
  });
});
