// A client's stdin sent right behind its open, while the daemon is still
// opening the stream (the box waking): it reaches the box, in order, and its
// eof too. Through a fleet's proxy the open, the stdin and the eof arrive in
// one read, before the daemon has the box's channel; they were lost.
import { afterAll, expect, test } from "bun:test";
import { Chan, HUTCH_VERSION, Mux, PROTOCOL_VERSION } from "@hutch/shared";
import type { BoxService } from "../src/box/service.ts";
import { streamSocket, type StreamSocketData } from "../src/daemon/stream/index.ts";

/** A box's channel: a guest-role Mux whose exec is `cat`, joined in memory to the host-role Mux the daemon opens streams on. */
function catBox(): Mux {
  let guest: Mux | undefined;
  const host = new Mux({ write: (b) => queueMicrotask(() => guest!.feed(b.slice())), close: () => undefined }, { role: "host" });
  guest = new Mux(
    { write: (b) => queueMicrotask(() => host.feed(b.slice())), close: () => undefined },
    {
      role: "guest",
      onOpen(stream) {
        const got: Uint8Array[] = [];
        stream.handlers = {
          data: (_chan, bytes) => got.push(bytes.slice()),
          eof: () => {
            void stream.write(Chan.stdout, Buffer.concat(got)).then(() => {
              stream.eof(Chan.stdout);
              stream.msg({ type: "exit", code: 0, signal: null });
              stream.close();
            });
          },
        };
      },
    },
  );
  host.sendHello({ protocol: PROTOCOL_VERSION, client: "test", version: HUTCH_VERSION });
  guest.sendHello({ protocol: PROTOCOL_VERSION, agent: "test", version: HUTCH_VERSION });
  return host;
}

const channel = { mux: catBox() };
const boxes = {
  // A box that takes a while to wake: the stream is opened only after it.
  awake: async () => {
    await Bun.sleep(150);
    return { box: { id: "box1", name: "w" }, channel };
  },
  find: () => ({ id: "box1", name: "w" }),
} as unknown as BoxService;

const server = Bun.serve<StreamSocketData>({
  port: 0,
  hostname: "127.0.0.1",
  fetch(req, srv) {
    return srv.upgrade(req, { data: { ref: "w" } }) ? undefined : new Response("no", { status: 400 });
  },
  websocket: streamSocket(boxes),
});
afterAll(() => server.stop(true));

test("stdin and its eof sent right behind the open reach the box while it wakes", async () => {
  const ws = new WebSocket(`ws://127.0.0.1:${server.port}/v1/boxes/w/stream`);
  ws.binaryType = "arraybuffer";
  const out: Uint8Array[] = [];
  const done = new Promise<string>((resolve, reject) => {
    const mux = new Mux(
      { write: (b) => ws.send(b), close: () => ws.close() },
      {
        role: "host",
        onHello() {
          const s = mux.open({ tool: "exec", argv: ["cat"] });
          s.handlers = {
            data: (_c, b) => out.push(b.slice()),
            close: (err) => (err ? reject(new Error(err.message)) : resolve(Buffer.concat(out).toString())),
          };
          // Open, stdin and eof go out together, before the daemon has the box.
          void s.write(Chan.stdin, new TextEncoder().encode("through b\n"));
          s.eof(Chan.stdin);
        },
      },
    );
    ws.onopen = () => mux.sendHello({ protocol: PROTOCOL_VERSION, client: "test", version: HUTCH_VERSION });
    ws.onmessage = (e) => mux.feed(new Uint8Array(e.data as ArrayBuffer));
    ws.onclose = () => mux.lost("closed");
  });
  expect(await done).toBe("through b\n");
  ws.close();
});
