// Port discovery against a fake /sys/class/virtio-ports tree, and the frame
// boundaries that reveal a fast reconnect (test/vm-check.ts boots the real port).
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeFrame, encodeJson } from "@hutch/shared";
import { FrameBoundaries } from "../src/transport/frames.ts";
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
