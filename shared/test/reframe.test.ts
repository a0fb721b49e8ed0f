import { describe, expect, test } from "bun:test";
import { FrameDecoder, HEADER_BYTES, Mux, encodeFrame, encodeHeader, reframe, type MuxStream } from "../src/index.ts";

describe("codec: headers apart from payloads", () => {
  test("encodeHeader + payload is byte for byte encodeFrame", () => {
    const payload = crypto.getRandomValues(new Uint8Array(1000));
    const joined: Uint8Array = new Uint8Array(HEADER_BYTES + payload.length);
    joined.set(encodeHeader("data", 0x01020304, 2, 0xfffffffe, payload.length));
    joined.set(payload, HEADER_BYTES);
    expect(joined).toEqual(encodeFrame("data", 0x01020304, 2, 0xfffffffe, payload));
  });

  test("reframe rewrites a decoded frame's header in place, leaving the payload where it was", () => {
    const payload = crypto.getRandomValues(new Uint8Array(300));
    const wire = new Uint8Array([...encodeFrame("hello", 0, 0, 0, new Uint8Array(0)), ...encodeFrame("data", 7, 1, 1, payload)]);
    const [, frame] = new FrameDecoder().push(wire);
    const out = reframe("data", 3, 2, 41, frame!.payload)!;
    expect(out.buffer).toBe(wire.buffer);
    expect(out.byteOffset).toBe(frame!.payload.byteOffset - HEADER_BYTES);
    expect(out).toEqual(encodeFrame("data", 3, 2, 41, payload));
  });

  test("reframe refuses a payload with no room in front", () => {
    expect(reframe("data", 1, 0, 0, new Uint8Array(10))).toBeNull();
    expect(() => reframe("data", 1, 0, 0, new Uint8Array(HEADER_BYTES + 300 * 1024).subarray(HEADER_BYTES))).toThrow(/exceeds/);
  });

  test("a frame split across chunks still decodes with its header in front (a copy of it)", () => {
    const payload = crypto.getRandomValues(new Uint8Array(5000));
    const wire = encodeFrame("data", 9, 1, 0, payload);
    const dec = new FrameDecoder();
    expect(dec.push(wire.subarray(0, 3))).toEqual([]);
    expect(dec.push(wire.subarray(3, 2000))).toEqual([]);
    const [frame] = dec.push(wire.subarray(2000));
    expect(frame!.payload).toEqual(payload);
    expect(reframe("data", 9, 1, 0, frame!.payload)).toEqual(wire);
  });
});

/** Two muxes joined back to back; `wire` sees every frame written by the host side. */
function pair(window: number, hostParts = false) {
  const wire: { whole?: Uint8Array; parts?: [Uint8Array, Uint8Array] }[] = [];
  const opened: MuxStream[] = [];
  let hostMux!: Mux, guestMux!: Mux;
  hostMux = new Mux(
    {
      write: (b) => {
        wire.push({ whole: b.slice() });
        queueMicrotask(() => guestMux.feed(b));
      },
      ...(hostParts
        ? {
            writeParts: (h: Uint8Array, p: Uint8Array) => {
              wire.push({ parts: [h, p] });
              const joined = new Uint8Array([...h, ...p]);
              queueMicrotask(() => guestMux.feed(joined));
            },
          }
        : {}),
      close() {},
    },
    { role: "host", window },
  );
  guestMux = new Mux(
    { write: (b) => queueMicrotask(() => hostMux.feed(b.slice())), close() {} },
    {
      role: "guest",
      window,
      onOpen: (s) => opened.push(s),
    },
  );
  hostMux.sendHello({ protocol: 1 });
  guestMux.sendHello({ protocol: 1 });
  return { hostMux, guestMux, opened, wire };
}
const tick = () => new Promise((r) => setTimeout(r, 5));

describe("mux: forward, split writes, batched credit", () => {
  test("forward sends a payload as one frame, in place, and waits for credit for all of it", async () => {
    const { hostMux, opened, wire } = pair(1000);
    const s = hostMux.open({ tool: "x" });
    await tick();
    const g = opened[0]!;
    g.autoCredit = false;
    const got: Uint8Array[] = [];
    g.handlers.data = (_c, b) => got.push(b.slice());
    const buf = new Uint8Array(HEADER_BYTES + 600);
    buf.fill(7, HEADER_BYTES);
    expect(await s.forward(0, buf.subarray(HEADER_BYTES))).toBe(true);
    expect(wire.at(-1)!.whole!.length).toBe(HEADER_BYTES + 600);
    let second = false;
    const p = s.forward(0, new Uint8Array(HEADER_BYTES + 600).subarray(HEADER_BYTES)).then((ok) => (second = ok));
    await tick();
    // 400 bytes of credit left: not enough for 600, and forward does not split.
    expect(second).toBe(false);
    expect(got.map((b) => b.length)).toEqual([600]);
    expect(got[0]!.every((x) => x === 7)).toBe(true);
    g.consumed(600);
    await p;
    await tick();
    expect(got.map((b) => b.length)).toEqual([600, 600]);
  });

  test("forward of a payload with no room in front falls back to a copy", async () => {
    const { hostMux, opened } = pair(1000);
    const s = hostMux.open({ tool: "x" });
    await tick();
    const got: number[] = [];
    opened[0]!.handlers.data = (_c, b) => got.push(...b);
    expect(await s.forward(0, new Uint8Array([1, 2, 3]))).toBe(true);
    await tick();
    expect(got).toEqual([1, 2, 3]);
  });

  test("big payloads go to writeParts, small ones are joined", async () => {
    const { hostMux, opened, wire } = pair(1 << 20, true);
    const s = hostMux.open({ tool: "x" });
    await tick();
    let n = 0;
    opened[0]!.handlers.data = (_c, b) => (n += b.length);
    await s.write(0, new Uint8Array(100));
    await s.write(0, new Uint8Array(64 * 1024));
    await tick();
    expect(n).toBe(100 + 64 * 1024);
    const data = wire.slice(-2);
    expect(data[0]!.whole?.length).toBe(HEADER_BYTES + 100);
    expect(data[1]!.parts?.map((p) => p.length)).toEqual([HEADER_BYTES, 64 * 1024]);
  });

  test("credit goes back in quarter-window batches, and a writer never stalls on one", async () => {
    const { hostMux, opened } = pair(4000);
    const s = hostMux.open({ tool: "x" });
    await tick();
    const g = opened[0]!;
    g.autoCredit = false;
    g.handlers.data = (_c, b) => g.consumed(b.length);
    await s.write(0, new Uint8Array(900));
    await tick();
    // 900 < 1000 consumed: nothing granted yet.
    expect(s.window).toBe(3100);
    await s.write(0, new Uint8Array(200));
    await tick();
    expect(s.window).toBe(4000);
    // Many small writes through a small window finish: batching never deadlocks.
    for (let i = 0; i < 50; i++) await s.write(0, new Uint8Array(333));
    await tick();
    expect(s.window).toBeGreaterThan(4000 - 1000);
  });

  test("a sender with less than a quarter window left gets each grant at once (a slow reader still shows it is alive)", async () => {
    const { hostMux, opened } = pair(4000);
    const s = hostMux.open({ tool: "x" });
    await tick();
    const g = opened[0]!;
    g.autoCredit = false;
    await s.write(0, new Uint8Array(4000));
    await tick();
    expect(s.window).toBe(0);
    // 100 bytes read: far below a batch, but the sender has nothing left, so it hears of them now.
    g.consumed(100);
    await tick();
    expect(s.window).toBe(100);
    g.consumed(100);
    await tick();
    expect(s.window).toBe(200);
  });

  test("roundTrip resolves at its pong, after everything sent before it was read; a lost channel rejects it", async () => {
    const { hostMux, opened } = pair(4000);
    const s = hostMux.open({ tool: "x" });
    const got: number[] = [];
    await tick();
    opened[0]!.handlers.data = (_c, b) => got.push(b.length);
    await s.write(0, new Uint8Array(10));
    await s.write(0, new Uint8Array(20));
    await hostMux.roundTrip();
    expect(got).toEqual([10, 20]);
    const never = hostMux.roundTrip();
    hostMux.lost("gone");
    await expect(never).rejects.toThrow("gone");
  });
});
