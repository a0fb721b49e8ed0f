// mcp.serve: the real guest's MCP server for agents in the box, driven by
// the official MCP SDK's client (the conformance check) and by hand for what
// a client should never send. The browser is Debian's Chromium on a test page.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { BoxMcpTools, MCP_APPROVAL_TOOL, McpServeResult } from "@hutch/shared";
import { collect, result, useGuest, type Collected, type Host } from "./harness.ts";

const PAGES = join(import.meta.dir, "../../tests/fixtures/pages");
let host!: Host;
let serve!: Collected;
let mcp!: { port: number; token: string };
let url = "";
let page: ReturnType<typeof Bun.serve> | undefined;

useGuest(async (_g, h) => {
  host = h;
  serve = collect(host.mux.open({ tool: "mcp.serve", owner: "user:test/agent:claude" }));
  await serve.waitMsg("result");
  mcp = result(serve, McpServeResult);
  url = `http://127.0.0.1:${mcp.port}/mcp`;
});
beforeAll(() => {
  page = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const file = Bun.file(join(PAGES, new URL(req.url).pathname.slice(1)));
      return (await file.exists()) ? new Response(file) : new Response("not here", { status: 404 });
    },
  });
});
afterAll(() => page?.stop(true));

const post = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    headers: {
      authorization: `Bearer ${mcp.token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

describe("with the official SDK client", () => {
  let client!: Client;
  beforeAll(async () => {
    client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${mcp.token}` } } }),
    );
  });
  afterAll(() => client.close());

  test("tools/list names every browser and desktop tool, with the shared schemas", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(Object.keys(BoxMcpTools).sort());
    const snap = tools.find((t) => t.name === "browser_snapshot")!;
    expect(snap.description).toBe(BoxMcpTools.browser_snapshot.description);
    expect(Object.keys(snap.inputSchema.properties ?? {})).toEqual(expect.arrayContaining(["tab", "maxBytes", "delta", "more"]));
    expect(Object.keys(snap.inputSchema.properties ?? {})).not.toContain("box");
  });

  test("a snapshot of the last opened tab carries the page's refs, and clicking one acts", async () => {
    const opened = await client.callTool({ name: "browser_open", arguments: { url: `http://127.0.0.1:${page!.port}/form.html` } });
    expect(opened.isError).toBeFalsy();
    const snap = await client.callTool({ name: "browser_snapshot", arguments: {} });
    const text = (snap.content as { type: string; text: string }[])[0]!.text;
    expect(text).toMatch(/^tab_\d+ http:\/\/127\.0\.0\.1:\d+\/form\.html "Sign up"/);
    const line = text.split("\n").find((l) => l.includes("checkbox"))!;
    expect(line).toMatch(/\[ref=e\d+\]/);
    const ref = /\[ref=(e\d+)\]/.exec(line)![1]!;
    const clicked = await client.callTool({ name: "browser_click", arguments: { ref, element: "the checkbox" } });
    expect(clicked.isError).toBeFalsy();
    const after = await client.callTool({ name: "browser_snapshot", arguments: {} });
    expect((after.content as { text: string }[])[0]!.text).toContain(`checkbox "I agree" [checked] [ref=${ref}]`);
  });

  test("the client is told to the host stream once it has the tool list, by its own name", async () => {
    expect(serve.msgs.filter((m) => m.type === "mcp.client")).toEqual([{ type: "mcp.client", name: "test", version: "1.0.0" }]);
  });

  test("each call is told to the host stream: what was called, then how it ended", async () => {
    await client.callTool({ name: "browser_tabs", arguments: {} });
    // The stream's messages come over the guest's channel, the answer over HTTP: either may arrive first.
    const doneOf = () => serve.msgs.filter((m) => m.type === "mcp.done" && m.name === "browser_tabs");
    for (const deadline = Date.now() + 5000; doneOf().length === 0 && Date.now() < deadline; ) await Bun.sleep(5);
    const calls = serve.msgs.filter((m) => m.type === "mcp.call" && m.name === "browser_tabs");
    const done = doneOf();
    expect(calls).toHaveLength(1);
    expect(done[0]).toMatchObject({ id: calls[0]!.id, status: "ok" });
    expect(String(done[0]!.output)).toMatch(/^tab_\d+ /);
  });

  test("bad arguments and failing tools are tool errors, and the server keeps serving", async () => {
    const bad = await client.callTool({ name: "browser_click", arguments: { ref: "nope" } });
    expect(bad.isError).toBe(true);
    expect((bad.content as { text: string }[])[0]!.text).toContain("ref");
    const gone = await client.callTool({ name: "browser_snapshot", arguments: { tab: "tab_999" } });
    expect(gone.isError).toBe(true);
    expect((gone.content as { text: string }[])[0]!.text).toContain("no tab tab_999");
    const failed = () => serve.msgs.find((m) => m.type === "mcp.done" && m.status === "error" && String(m.output).includes("tab_999"));
    for (const deadline = Date.now() + 5000; !failed() && Date.now() < deadline; ) await Bun.sleep(5);
    expect(failed()).toBeDefined();
    await expect(client.callTool({ name: "no_such_tool", arguments: {} })).rejects.toThrow(/unknown tool/);
    expect((await client.listTools()).tools.length).toBe(Object.keys(BoxMcpTools).length);
  });
});

describe("what a client should never send", () => {
  test("no token, a wrong token, or a browser's Origin is refused before anything runs", async () => {
    const list = { jsonrpc: "2.0", id: 1, method: "tools/list" };
    expect((await post(list, { authorization: "" })).status).toBe(401);
    expect((await post(list, { authorization: `Bearer ${"x".repeat(mcp.token.length)}` })).status).toBe(401);
    expect((await post(list, { origin: "http://127.0.0.1:1234" })).status).toBe(403);
    expect((await fetch(url, { headers: { authorization: `Bearer ${mcp.token}` } })).status).toBe(405);
  });

  test("malformed JSON-RPC gets JSON-RPC errors", async () => {
    const parse = await post("{not json");
    expect(parse.status).toBe(400);
    expect(((await parse.json()) as { error: { code: number } }).error.code).toBe(-32700);
    const noVersion = (await (await post({ id: 1, method: "ping" })).json()) as { id: number; error: { code: number } };
    expect(noVersion).toMatchObject({ id: 1, error: { code: -32600 } });
    const unknown = (await (await post({ jsonrpc: "2.0", id: "a", method: "resources/list" })).json()) as { error: { code: number } };
    expect(unknown).toMatchObject({ id: "a", error: { code: -32601 } });
    const params = (await (await post({ jsonrpc: "2.0", id: 2, method: "tools/call", params: [] })).json()) as { error: { code: number } };
    expect(params).toMatchObject({ id: 2, error: { code: -32602 } });
    const init = (await (await post({ jsonrpc: "2.0", id: 3, method: "initialize", params: {} })).json()) as { error: { code: number } };
    expect(init).toMatchObject({ id: 3, error: { code: -32602 } });
  });

  test("notifications get 202 and no body; a revision it does not speak is answered with its own", async () => {
    const note = await post({ jsonrpc: "2.0", method: "notifications/initialized" });
    expect(note.status).toBe(202);
    expect(await note.text()).toBe("");
    const init = (await (
      await post({
        jsonrpc: "2.0",
        id: 9,
        method: "initialize",
        params: { protocolVersion: "1999-01-01", capabilities: {}, clientInfo: { name: "x", version: "1" } },
      })
    ).json()) as { result: { protocolVersion: string; serverInfo: { name: string } } };
    expect(init.result.protocolVersion).toBe("2025-06-18");
    expect(init.result.serverInfo.name).toBe("hutch");
  });
});

describe("the server's life", () => {
  test("port.list leaves the MCP listener out", async () => {
    const c = collect(host.mux.open({ tool: "port.list" }));
    await c.closed;
    const ports = (c.msgs.find((m) => m.type === "result")?.value ?? []) as { port: number }[];
    expect(ports.map((p) => p.port)).not.toContain(mcp.port);
  });

  test("with approvals: the permission prompt is listed, each ask goes to the host, and its answer is what the agent gets", async () => {
    const stream = host.mux.open({ tool: "mcp.serve", approvals: true });
    const asked = collect(stream);
    await asked.waitMsg("result");
    const { port, token } = result(asked, McpServeResult);
    const call = (id: number, method: string, params: unknown) =>
      fetch(`http://127.0.0.1:${port}/mcp`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id, method, params }),
      }).then((r) => r.json() as Promise<{ result: { tools?: { name: string }[]; content?: { text: string }[]; isError?: boolean } }>);
    const listed = await call(1, "tools/list", {});
    expect(listed.result.tools!.map((t) => t.name)).toContain(MCP_APPROVAL_TOOL);
    const input = { command: "rm -rf data", description: "x".repeat(500) };
    const answer = async (allow: boolean, message: string) => {
      const pending = call(2, "tools/call", { name: MCP_APPROVAL_TOOL, arguments: { tool_name: "Bash", input } });
      const askOf = () => asked.msgs.filter((m) => m.type === "mcp.approval").at(-1);
      for (const deadline = Date.now() + 5000; !askOf() && Date.now() < deadline; ) await Bun.sleep(5);
      const ask = askOf()!;
      // Whole, not cut as a logged call is: a person approves exactly what runs.
      expect(ask).toMatchObject({ tool: "Bash", input });
      stream.msg({ type: "mcp.approval.answer", id: ask.id, allow, message });
      const r = await pending;
      asked.msgs.length = 0;
      return JSON.parse(r.result.content![0]!.text) as unknown;
    };
    expect(await answer(true, "")).toEqual({ behavior: "allow", updatedInput: input });
    expect(await answer(false, "keep the data")).toEqual({ behavior: "deny", message: "keep the data" });
    // Bad arguments are a tool error; the server goes on.
    const bad = await call(3, "tools/call", { name: MCP_APPROVAL_TOOL, arguments: { input: {} } });
    expect(bad.result.isError).toBe(true);
    // A server without approvals neither lists nor takes it.
    const plain = await post({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: MCP_APPROVAL_TOOL, arguments: {} } });
    expect(JSON.stringify(await plain.json())).toContain("unknown tool");
    stream.close();
  });

  test("closing the host's stream stops the server", async () => {
    const stream = host.mux.open({ tool: "mcp.serve" });
    const other = collect(stream);
    await other.waitMsg("result");
    const { port, token } = result(other, McpServeResult);
    const ping = () =>
      fetch(`http://127.0.0.1:${port}/mcp`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
      });
    expect(((await (await ping()).json()) as { result: unknown }).result).toEqual({});
    stream.close();
    let refused = false;
    for (let i = 0; i < 100 && !refused; i++) {
      refused = await ping().then(
        () => false,
        () => true,
      );
      if (!refused) await Bun.sleep(50);
    }
    expect(refused).toBe(true);
  });
});
