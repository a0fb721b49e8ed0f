// Port discovery against a fake /sys/class/virtio-ports tree, and the frame
// boundaries that reveal a fast reconnect (test/vm-check.ts boots the real port).
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeFrame, encodeJson } from "@hutch/shared";
import { FrameBoundaries } from "../src/transport/frames.ts";
import { PortSessions } from "../src/transport/port-sessions.ts";
import { findPort, waitForPort } from "../src/transport/vport.ts";

const root = mkdtempSync(join(tmpdir(), "hutch-vport-test-"));
const classDir = join(root, "sys/class/virtio-ports");
const devDir = join(root, "dev");
const dirs = { classDir, devDir };
mkdirSync(devDir, { recursive: true });
afterAll(() => rmSync(root, { recursive: true, force: true }));

function port(dir: string, name?: string): void {
  mkdirSync(join(classDir, dir), { recursive: true });
  if (name !== undefined) writeFileSync(join(classDir, dir, "name"), `${name}\n`);
}

test("no class directory: no port", () => {
  expect(findPort("hutch.agent", { classDir: join(root, "nope"), devDir })).toBeUndefined();
});

test("finds the port by name among others, including one not yet named", () => {
  port("vport0p0", "org.qemu.guest_agent.0");
  port("vport0p1");
  port("vport1p1", "hutch.agent");
  expect(findPort("hutch.agent", dirs)).toBe(join(devDir, "vport1p1"));
  expect(findPort("other", dirs)).toBeUndefined();
});

test("waits for the device node, then gives up with a message naming the port", async () => {
  const waiting = waitForPort("hutch.agent", 2000, dirs);
  await Bun.sleep(100);
  writeFileSync(join(devDir, "vport1p1"), "");
  expect(await waiting).toBe(join(devDir, "vport1p1"));
  await expect(waitForPort("missing.port", 100, dirs)).rejects.toThrow(/no virtio-serial port named missing.port/);
});

describe("a reconnect the guest never saw as end of file", () => {
  const hello = (seq: number) => encodeFrame("hello", 0, 0, seq, encodeJson({ protocol: 1, client: "hutch", version: "0" }));
  const data = (seq: number, n: number) => encodeFrame("data", 1, 0, seq, new Uint8Array(n).fill(7));
  const cat = (...parts: Uint8Array[]) => Buffer.concat(parts);

  test("a first hello is no split; later frames are none either", () => {
    const f = new FrameBoundaries();
    expect(f.scan(cat(hello(0), data(1, 100), data(2, 70_000)))).toBeUndefined();
  });

  test("a second hello with seq 0 splits, at any chunking", () => {
    const old = cat(hello(0), data(1, 300), data(2, 5));
    const fresh = cat(hello(0), data(1, 9));
    const all = cat(old, fresh);
    for (const size of [1, 2, 5, 9, 13, 14, 100, all.length]) {
      const f = new FrameBoundaries();
      const oldSeen: Uint8Array[] = [];
      let got: Uint8Array | undefined;
      for (let i = 0; i < all.length && !got; i += size) {
        const chunk = all.subarray(i, i + size);
        const split = f.scan(chunk);
        if (split) {
          oldSeen.push(split.old);
          got = cat(split.fresh, all.subarray(i + size));
        } else oldSeen.push(chunk);
      }
      expect(got && Buffer.from(got).equals(fresh)).toBe(true);
      // The old connection got its own bytes, at most a partial header more (it is discarded anyway).
      expect(Buffer.concat(oldSeen).subarray(0, old.length).equals(old)).toBe(true);
    }
  });

  test("a hello with another seq is the old connection's protocol error, not a new connection", () => {
    const f = new FrameBoundaries();
    expect(f.scan(cat(hello(0), data(1, 3), hello(2)))).toBeUndefined();
  });

  test("broken framing stops tracking until reset", () => {
    const f = new FrameBoundaries();
    const garbage = new Uint8Array(9); // length 0
    expect(f.scan(cat(hello(0), garbage, hello(0)))).toBeUndefined();
    f.reset();
    expect(f.scan(cat(hello(0), hello(0)))).toBeDefined();
  });
});

describe("an end of file parks the connection, and the next frame decides", () => {
  const hello = () => encodeFrame("hello", 0, 0, 0, encodeJson({ protocol: 1, client: "hutch", version: "0" }));
  const data = (seq: number, n: number) => encodeFrame("data", 1, 0, seq, new Uint8Array(n).fill(7));
  const cat = (...parts: Uint8Array[]) => Buffer.concat(parts);

  interface Fake {
    n: number;
    fed: Buffer[];
    alive: boolean;
    parked: boolean;
    ended?: string;
  }
  function setup() {
    const made: Fake[] = [];
    const s = new PortSessions(
      () => {
        const f: Fake = { n: made.length, fed: [], alive: true, parked: false };
        made.push(f);
        return {
          get alive() {
            return f.alive;
          },
          feed: (b) => f.fed.push(Buffer.from(b)),
          park: () => {
            f.parked = true;
          },
          resume: () => {
            f.parked = false;
          },
          end: (reason) => {
            f.ended = reason;
          },
        };
      },
      { info: () => {} },
    );
    return { s, made };
  }

  test("an end of file read after the next host's hello (an earlier host's) leaves that connection running", () => {
    const { s, made } = setup();
    s.data(cat(hello(), data(1, 10)));
    // The new host's hello, then the stale end of file, then its next frames.
    s.data(hello());
    expect(made.length).toBe(2);
    s.endOfFile("host disconnected");
    expect(made[1]!.parked).toBe(true);
    expect(made[1]!.ended).toBeUndefined();
    s.hostBack();
    expect(made[1]!.parked).toBe(false);
    s.data(data(1, 5));
    expect(made.length).toBe(2);
    expect(made[1]!.ended).toBeUndefined();
    expect(Buffer.concat(made[1]!.fed).equals(cat(hello(), data(1, 5)))).toBe(true);
  });

  test("a real reconnect: the next host's hello ends the parked connection, at any chunking", () => {
    const fresh = cat(hello(), data(1, 9));
    for (const size of [1, 3, 9, 10, fresh.length]) {
      const { s, made } = setup();
      s.data(cat(hello(), data(1, 300)));
      s.endOfFile("host disconnected");
      s.hostBack();
      for (let i = 0; i < fresh.length; i += size) s.data(fresh.subarray(i, i + size));
      expect(made.length).toBe(2);
      expect(made[0]!.ended).toBe("host reconnected");
      expect(Buffer.concat(made[1]!.fed).equals(fresh)).toBe(true);
    }
  });

  test("a host gone part way through a frame: the next host's hello is found where the frame was cut off", () => {
    const { s, made } = setup();
    const cut = data(1, 100).subarray(0, 40);
    s.data(cat(hello(), cut));
    s.endOfFile("host disconnected");
    s.data(cat(hello(), data(1, 3)));
    expect(made.length).toBe(2);
    expect(made[0]!.ended).toBe("host reconnected");
    expect(Buffer.concat(made[1]!.fed).equals(cat(hello(), data(1, 3)))).toBe(true);
  });

  test("a stale end of file part way through a frame: the rest of the frame goes to the same connection", () => {
    const { s, made } = setup();
    const frame = data(1, 100);
    s.data(cat(hello(), frame.subarray(0, 40)));
    s.endOfFile("host disconnected");
    s.data(frame.subarray(40));
    s.data(data(2, 4));
    expect(made.length).toBe(1);
    expect(Buffer.concat(made[0]!.fed).equals(cat(hello(), frame, data(2, 4)))).toBe(true);
  });

  test("a connection that failed, or framing that broke, ends at the end of file", () => {
    const { s, made } = setup();
    s.data(hello());
    made[0]!.alive = false;
    s.endOfFile("host disconnected");
    expect(made[0]!.ended).toBe("host disconnected");
    s.data(new Uint8Array(9)); // length 0: framing lost
    s.endOfFile("host disconnected");
    expect(made[1]!.ended).toBe("host disconnected");
    s.data(hello());
    expect(made.length).toBe(3);
  });
});
