// `hutch mcp` driven by a client built from the official MCP SDK, over stdio,
// against a real daemon and a process box: tools listed, exec, files and the
// browser called, each call found in the box's session log with the MCP
// client as its actor. Bad calls are tool errors and the server keeps going.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { HUTCH, makeHome, ROOT, waitFor, type Home } from "../helpers.ts";

let h: Home;
let client: Client;
beforeAll(async () => {
  h = makeHome("hutch-mcp-");
  expect((await h.run(["box", "create", "m", "--start"])).code).toBe(0);
  expect((await h.run(["cp", join(ROOT, "tests/fixtures/pages"), "m:/workspace/pages"])).code).toBe(0);
  client = new Client({ name: "Test Client", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command: HUTCH, args: ["mcp"], env: h.env, stderr: "pipe" }));
});
afterAll(async () => {
  await client?.close();
  await h.cleanup();
});

async function call(name: string, args: Record<string, unknown>): Promise<{ text: string; isError: boolean; r: CallToolResult }> {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const text = r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
  return { text, isError: r.isError === true, r };
}

describe("hutch mcp", () => {
  test("lists the tools with their input schemas", async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ["box_list", "exec", "file_read", "file_write", "browser_snapshot", "browser_click", "browser_screenshot"])
      expect(names).toContain(n);
    const snap = tools.find((t) => t.name === "browser_snapshot");
    expect(snap?.inputSchema.required).toEqual(["box"]);
    expect(Object.keys(snap?.inputSchema.properties ?? {})).toEqual(expect.arrayContaining(["box", "tab", "delta", "maxBytes", "more"]));
  });

  test("exec, files and the browser, each call in the session log as the MCP client", async () => {
    const e = await call("exec", { box: "m", argv: ["sh", "-c", "echo out; echo err >&2; exit 3"] });
    expect(e.isError).toBe(true);
    expect(e.text).toContain("exit 3");
    expect(e.text).toContain("stdout:\nout");
    expect(e.text).toContain("stderr:\nerr");
    expect((await call("file_write", { box: "m", path: "/workspace/note.txt", content: "hello mcp\n" })).text).toContain("wrote 10 bytes");
    expect((await call("file_read", { box: "m", path: "/workspace/note.txt" })).text).toBe("hello mcp\n");

    const serve = "cd /workspace/pages && (setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &)";
    await call("exec", { box: "m", argv: ["sh", "-c", serve] });
    await waitFor("the server", async () => (await call("port_list", { box: "m" })).text.includes("8000"));
    expect((await call("browser_open", { box: "m", url: "http://127.0.0.1:8000/rerender.html" })).text).toContain("Counter");
    const snap = await call("browser_snapshot", { box: "m" });
    const ref = snap.text.match(/button "Increment" \[ref=(e\d+)\]/)?.[1];
    expect(ref).toBeDefined();
    expect((await call("browser_click", { box: "m", ref, element: "Increment button" })).isError).toBe(false);
    expect((await call("browser_snapshot", { box: "m" })).text).toContain('"Count: 1"');
    const stale = await call("browser_click", { box: "m", ref });
    expect(stale.isError).toBe(true);
    expect(stale.text).toContain("stale");
    const shot = await call("browser_screenshot", { box: "m" });
    const image = shot.r.content.find((c) => c.type === "image");
    expect(image?.type === "image" && image.mimeType).toBe("image/png");

    const sessions = JSON.parse((await h.run(["session", "list", "--json"])).stdout) as { id: string; boxName: string; state: string }[];
    const ses = sessions.find((s) => s.boxName === "m" && s.state === "open");
    expect(ses).toBeDefined();
    const log = (await h.run(["session", "log", ses?.id ?? "", "--json"])).stdout;
    const events = log
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { kind: string; actor: { kind: string; id: string }; data: { name: string; status?: string } });
    const called = events.filter((ev) => ev.kind === "mcp.tool.called").map((ev) => ev.data.name);
    expect(called).toEqual(
      expect.arrayContaining([
        "exec",
        "file_write",
        "file_read",
        "browser_open",
        "browser_snapshot",
        "browser_click",
        "browser_screenshot",
      ]),
    );
    const done = events.filter((ev) => ev.kind === "mcp.tool.completed");
    expect(done.find((ev) => ev.data.name === "file_read")?.data.status).toBe("ok");
    expect(done.filter((ev) => ev.data.name === "browser_click").map((ev) => ev.data.status)).toEqual(["ok", "error"]);
    for (const ev of events.filter((x) => x.kind.startsWith("mcp."))) {
      expect(ev.actor.kind).toBe("agent");
      expect(ev.actor.id).toEndWith("/agent:mcp.test-client");
    }
  });

  test("bad calls are clear tool errors and the server keeps working", async () => {
    const unknown = await call("no_such_tool", {});
    expect(unknown.isError).toBe(true);
    expect(unknown.text).toContain("no tool");
    const bad = await call("exec", { box: "m", argv: "ls" });
    expect(bad.isError).toBe(true);
    expect(bad.text).toContain("argv");
    const noBox = await call("file_read", { box: "nope", path: "/x" });
    expect(noBox.isError).toBe(true);
    expect(noBox.text).toContain("nope");
    const neverRef = await call("browser_click", { box: "m", ref: "e99999" });
    expect(neverRef.text).toContain("no element e99999");
    expect((await call("box_list", {})).text).toContain('"name": "m"');
  });

  test("a malformed MCP request is answered with an error, and the next one still works", async () => {
    const p = h.spawn(["mcp"]);
    const stdin = p.stdin as import("bun").FileSink;
    const lines: Record<string, unknown>[] = [];
    void (async () => {
      let buf = "";
      for await (const chunk of p.stdout as ReadableStream<Uint8Array>) {
        buf += new TextDecoder().decode(chunk);
        for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
          lines.push(JSON.parse(buf.slice(0, nl)));
          buf = buf.slice(nl + 1);
        }
      }
    })();
    const send = (m: unknown) => stdin.write(`${typeof m === "string" ? m : JSON.stringify(m)}\n`);
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
    });
    await waitFor("initialize answered", () => lines.find((l) => l.id === 1));
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send("{this is not json");
    send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: 42 } });
    send({ jsonrpc: "2.0", id: 3, method: "no/such/method" });
    send({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "box_list", arguments: {} } });
    const bad = await waitFor("the bad call answered", () => lines.find((l) => l.id === 2));
    expect(bad.error).toBeDefined();
    expect((await waitFor("the unknown method answered", () => lines.find((l) => l.id === 3))).error).toBeDefined();
    const good = (await waitFor("box_list answered", () => lines.find((l) => l.id === 4))) as { result: CallToolResult };
    expect(JSON.stringify(good.result.content)).toContain("m");
    stdin.end();
    expect(await p.exited).toBe(0);
  });
});
