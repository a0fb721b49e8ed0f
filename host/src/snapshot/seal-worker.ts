// The seal worker's entry (seal-thread.ts): a Sealer on a thread of its own.
// It holds the store's encryption key for the length of one save, in the same
// process that opened the store.
import { serveRing } from "./ring-thread.ts";
import type { SealDone, SealJob } from "./seal-thread.ts";
import { type SealedPack, Sealer, type SealerConfig } from "./sealer.ts";

let sealer: Sealer | undefined;

serveRing<SealerConfig, SealJob, SealDone, SealedPack[]>({
  init(config) {
    sealer = new Sealer(config);
  },
  jobs(jobs, bytes) {
    let stored = 0;
    const packs: SealedPack[] = [];
    for (const j of jobs) {
      const r = sealer!.add(j.type, j.id, bytes(j));
      stored += r.stored;
      if (r.filled) packs.push(r.filled);
    }
    return { stored, packs };
  },
  flush: () => sealer!.finishAll(),
  discard: () => sealer?.discard(),
});
