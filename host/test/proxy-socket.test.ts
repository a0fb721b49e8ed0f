// The fleet's forwarded WebSocket (daemon/proxy-socket.ts): an upstream that
// is not serving yet (the box's new server a moment after a move) is tried
// again with a freshly signed target, and the client's frames sent meanwhile
// arrive in order; one that never serves closes the client's socket naming it.
import { afterAll, expect, test } from "bun:test";
import { proxySocket, type ProxySocketData } from "../src/daemon/proxy-socket.ts";

const servers: { stop(force: boolean): void }[] = [];
afterAll(() => {
  for (const s of servers) s.stop(true);
});

/** A proxy in front of `upstream()`'s URL; counts the targets it asked for. */
function proxy(upstream: () => string) {
  const asked: number[] = [];
  const srv = Bun.serve<ProxySocketData>({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req, s) {
      const data: ProxySocketData = {
        kind: "proxy",
        target: async () => {
          asked.push(Date.now());
          return { url: upstream(), cert: "", headers: { "x-attempt": String(asked.length) } };
        },
        queue: [],
      };
      return s.upgrade(req, { data }) ? undefined : new Response("no", { status: 400 });
    },
    websocket: proxySocket(),
  });
  servers.push(srv);
  return { url: `ws://127.0.0.1:${srv.port}/`, asked };
}

/** A port nothing listens on yet. */
function freePort(): number {
  const s = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = s.port!;
  s.stop(true);
  return port;
}

test("an upstream that starts serving a moment late gets the client's frames, in order", async () => {
  const port = freePort();
  const p = proxy(() => `ws://127.0.0.1:${port}/`);
  const ws = new WebSocket(p.url);
  const got: string[] = [];
  const closed = new Promise<void>((resolve) => {
    ws.onclose = () => resolve();
  });
  ws.onmessage = (e) => got.push(String(e.data));
  await new Promise<void>((resolve) => {
    ws.onopen = () => resolve();
  });
  for (const m of ["one", "two", "three"]) ws.send(m);
  await Bun.sleep(400);
  // Now the upstream serves: an echo that says which attempt reached it.
  const up = Bun.serve<{ attempt: string }>({
    port,
    hostname: "127.0.0.1",
    fetch: (req, s) => (s.upgrade(req, { data: { attempt: req.headers.get("x-attempt") ?? "" } }) ? undefined : new Response("no")),
    websocket: { message: (w, m) => void w.send(`${w.data.attempt}:${String(m)}`) },
  });
  servers.push(up);
  const until = Date.now() + 10_000;
  while (got.length < 3 && Date.now() < until) await Bun.sleep(20);
  expect(p.asked.length).toBeGreaterThan(1);
  const attempt = String(p.asked.length);
  expect(got).toEqual([`${attempt}:one`, `${attempt}:two`, `${attempt}:three`]);
  ws.send("four");
  while (got.length < 4 && Date.now() < until) await Bun.sleep(20);
  expect(got.at(-1)).toBe(`${attempt}:four`);
  ws.close();
  await closed;
});

test("an upstream that never serves closes the client's socket, naming the server that runs the box", async () => {
  const port = freePort();
  const p = proxy(() => `ws://127.0.0.1:${port}/`);
  const ws = new WebSocket(p.url);
  const t0 = Date.now();
  const close = await new Promise<CloseEvent>((resolve) => {
    ws.onclose = (e) => resolve(e);
  });
  expect(close.code).toBe(1011);
  expect(close.reason).toContain("the server that runs the box");
  expect(p.asked.length).toBeGreaterThan(1);
  expect(Date.now() - t0).toBeLessThan(15_000);
}, 20_000);

test("an upstream that refuses the upgrade (a 4xx) is not tried again", async () => {
  const up = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response('{"code":"not_found"}', { status: 404 }) });
  servers.push(up);
  const p = proxy(() => `ws://127.0.0.1:${up.port}/`);
  const ws = new WebSocket(p.url);
  const close = await new Promise<CloseEvent>((resolve) => {
    ws.onclose = (e) => resolve(e);
  });
  expect(close.code).toBe(1011);
  expect(close.reason).toContain("answered 404");
  expect(p.asked.length).toBe(1);
});
