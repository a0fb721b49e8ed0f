import { describe, expect, test } from "bun:test";
import { Mux, type MuxStream, encodeFrame, FrameDecoder, MAX_PAYLOAD, HEADER_BYTES, type ProtocolError } from "../src/index.ts";

function pair(window = 1024) {
  const errors: { side: string; err: ProtocolError }[] = [];
  const opened: { stream: MuxStream; payload: unknown }[] = [];
  let hostMux!: Mux, guestMux!: Mux;
  hostMux = new Mux(
    { write: (b) => queueMicrotask(() => guestMux.feed(b)), close() {} },
    {
      role: "host",
      window,
      onError: (err) => errors.push({ side: "host", err }),
    },
  );
  guestMux = new Mux(
    { write: (b) => queueMicrotask(() => hostMux.feed(b)), close() {} },
    {
      role: "guest",
      window,
      onError: (err) => errors.push({ side: "guest", err }),
      onOpen: (stream, payload) => opened.push({ stream, payload }),
    },
  );
  hostMux.sendHello({ protocol: 1 });
  guestMux.sendHello({ protocol: 1 });
  return { hostMux, guestMux, errors, opened };
}
const tick = () => new Promise((r) => setTimeout(r, 5));

describe("frame decoder", () => {
  test("reassembles frames split at every byte", () => {
    const a = encodeFrame("data", 3, 1, 0, new Uint8Array([1, 2, 3]));
    const b = encodeFrame("eof", 3, 1, 1, new Uint8Array(0));
    const all = new Uint8Array([...a, ...b]);
    const dec = new FrameDecoder();
    const out = [];
    for (const byte of all) out.push(...dec.push(new Uint8Array([byte])));
    expect(out.map((f) => [f.type, f.stream, f.chan, f.seq, [...f.payload]])).toEqual([
      ["data", 3, 1, 0, [1, 2, 3]],
      ["eof", 3, 1, 1, []],
    ]);
  });
  test("rejects a length over the cap before buffering it", () => {
    const hdr = new Uint8Array(HEADER_BYTES);
    new DataView(hdr.buffer).setUint32(0, MAX_PAYLOAD + HEADER_BYTES);
    expect(() => new FrameDecoder().push(hdr.subarray(0, 4))).toThrow(/outside/);
  });
  test("rejects a gap in seq and an unknown type", () => {
    const dec = new FrameDecoder();
    dec.push(encodeFrame("ping", 0, 0, 0, new Uint8Array(0)));
    expect(() => dec.push(encodeFrame("ping", 0, 0, 2, new Uint8Array(0)))).toThrow(/seq 2 where 1/);
    const bad = encodeFrame("ping", 0, 0, 0, new Uint8Array(0));
    bad[8] = 77;
    expect(() => new FrameDecoder().push(bad)).toThrow(/unknown frame type 77/);
  });
});

describe("mux", () => {
  test("credit bounds what a writer may send until the reader consumes", async () => {
    const { hostMux, opened } = pair(1000);
    const s = hostMux.open({ tool: "x" });
    await tick();
    const g = opened[0]!.stream;
    g.autoCredit = false;
    const got: number[] = [];
    g.handlers.data = (_c, b) => got.push(b.length);
    let done = false;
    s.write(0, new Uint8Array(2500)).then(() => (done = true));
    await tick();
    expect(got.reduce((a, b) => a + b, 0)).toBe(1000);
    expect(done).toBe(false);
    g.consumed(1000);
    await tick();
    g.consumed(1000);
    await tick();
    expect(got.reduce((a, b) => a + b, 0)).toBe(2500);
    expect(done).toBe(true);
  });
  test("data past the credit is a protocol error", async () => {
    const { hostMux, errors } = pair(10);
    const s = hostMux.open({ tool: "x" });
    // bypass the window: send a raw data frame of 11 bytes
    hostMux.send("data", s.id, 0, new Uint8Array(11));
    await tick();
    expect(errors.map((e) => `${e.side}: ${e.err.message}`)).toEqual([`guest: stream 1: peer sent past its credit`]);
  });
  /** Opens a stream from the host, closes it from the guest with `error`; what the host's close handler got. */
  async function closedFromGuest(error: unknown) {
    const { hostMux, opened } = pair();
    const s = hostMux.open({ tool: "x" });
    let closedWith: unknown = "not yet";
    s.handlers.close = (e) => (closedWith = e);
    await tick();
    opened[0]!.stream.close(error as never);
    await tick();
    return { hostMux, closedWith };
  }
  test("close carries an error and both ends forget the stream", async () => {
    const { hostMux, closedWith } = await closedFromGuest({ code: "denied", message: "nope" });
    expect(closedWith).toEqual({ code: "denied", message: "nope" });
    expect(hostMux.openStreams).toBe(0);
  });
  test("a close's hint is a field of its own: the message is never split to find it", async () => {
    const error = {
      code: "conflict",
      message: "session s is driven by a; only the driver sends input",
      hint: "take it over: hutch session driver steal s",
    };
    expect((await closedFromGuest(error)).closedWith).toEqual(error);
  });
  test("a close whose hint is not text is a protocol violation", async () => {
    expect((await closedFromGuest({ code: "failed", message: "m", hint: 7 })).hostMux.alive).toBe(false);
  });
  test("a frame before hello is refused", () => {
    const errors: string[] = [];
    const m = new Mux({ write() {}, close() {} }, { role: "guest", onError: (e) => errors.push(e.message) });
    m.feed(encodeFrame("open", 1, 0, 0, new TextEncoder().encode("{}")));
    expect(errors).toEqual(["expected hello, got open"]);
    expect(m.alive).toBe(false);
  });
});
