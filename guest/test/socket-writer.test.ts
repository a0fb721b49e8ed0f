import { describe, expect, test } from "bun:test";
import { SocketWriter } from "../src/socket-writer.ts";

/** A socket that takes at most `room` bytes until drained. */
function fakeSocket(room: number) {
  const out: number[] = [];
  let left = room;
  return {
    out,
    refill(n: number) {
      left = n;
    },
    write(b: unknown): number {
      const bytes = b as Uint8Array;
      const n = Math.min(left, bytes.length);
      out.push(...bytes.subarray(0, n));
      left -= n;
      return n;
    },
    end(): number {
      return 0;
    },
  };
}

describe("SocketWriter.writeParts", () => {
  test("keeps order across partial writes and copies the payload tail it could not write", () => {
    const sock = fakeSocket(20);
    const w = new SocketWriter(sock);
    const payload = new Uint8Array(50).map((_, i) => i);
    w.writeParts(new Uint8Array([200, 201, 202]), payload);
    w.write(new Uint8Array([250]));
    // The caller may reuse its payload buffer once writeParts returns.
    payload.fill(0);
    expect(w.queued).toBe(3 + 50 + 1 - 20);
    sock.refill(1000);
    w.drain();
    expect(sock.out).toEqual([200, 201, 202, ...Array.from({ length: 50 }, (_, i) => i), 250]);
  });

  test("a header that does not fit queues the whole payload, copied", () => {
    const sock = fakeSocket(1);
    const w = new SocketWriter(sock);
    const payload = new Uint8Array([1, 2, 3]);
    w.writeParts(new Uint8Array([9, 8]), payload);
    payload.fill(0);
    sock.refill(100);
    w.drain();
    expect(sock.out).toEqual([9, 8, 1, 2, 3]);
  });
});
