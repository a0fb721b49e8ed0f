// The seal worker's entry: a Sealer on a thread of its own, fed through a
// shared ring (seal-thread.ts). It holds the store's encryption key for the
// length of one save, in the same process that opened the store.
import type { FromSealer, ToSealer } from "./seal-wire.ts";
import { Sealer } from "./sealer.ts";

declare const self: Worker;

let sealer: Sealer | undefined;
let ring: SharedArrayBuffer | undefined;
let flags: Int32Array | undefined;
let sealedTo: BigInt64Array | undefined;
const post = (m: FromSealer) => self.postMessage(m);

self.onmessage = (e: MessageEvent<ToSealer>) => {
  const m = e.data;
  try {
    if (m.t === "init") {
      sealer = new Sealer(m.config);
      ring = m.ring;
      flags = new Int32Array(m.control, 0, 2);
      sealedTo = new BigInt64Array(m.control, 8, 1);
      Atomics.store(flags, 0, 1);
      post({ t: "ready" });
    } else if (m.t === "seal") {
      let stored = 0;
      const packs = [];
      for (const j of m.jobs) {
        const r = sealer!.add(j.type, j.id, j.bytes ?? new Uint8Array(ring!, j.off, j.len));
        stored += r.stored;
        if (r.filled) packs.push(r.filled);
      }
      // Hand the batch's ring space back, then wake a saving thread that waits for it.
      Atomics.store(sealedTo!, 0, BigInt(m.end));
      Atomics.add(flags!, 1, 1);
      Atomics.notify(flags!, 1);
      post({ t: "sealed", end: m.end, stored, packs });
    } else if (m.t === "flush") {
      post({ t: "flushed", packs: sealer!.finishAll() });
    } else {
      sealer?.discard();
      post({ t: "discarded" });
    }
  } catch (err) {
    sealer?.discard();
    post({ t: "failed", error: (err as Error)?.message ?? String(err) });
  }
};
