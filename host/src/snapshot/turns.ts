// The store's long operations run on the daemon's thread beside everything
// else it serves: terminals, session logs, the broker every box's traffic goes
// through. Their loops are synchronous between awaits that mostly resolve at
// once (microtasks, which never let the event loop run), so before this a
// `check --read-data` of 200 MiB held every other request for 0.8 s and a
// restore for 0.7 s. A loop calls `await turn()` once per step; once a slice
// of work has run, it yields to the event loop (setImmediate: after pending
// I/O) and a new slice begins. One slice per thread, whatever runs on it.

/** How long the store's work runs before others get a turn. */
export const SLICE_MS = 10;

let sliceStart = performance.now();

/** Yields to the event loop now (a loop that must hear from elsewhere, as ring-thread.ts does); a new slice begins. */
export function yieldNow(): Promise<void> {
  return new Promise((resolve) =>
    setImmediate(() => {
      sliceStart = performance.now();
      resolve();
    }),
  );
}

/** Resolves at once within the slice; after it, once the event loop has run what was waiting. */
export function turn(): Promise<void> | undefined {
  return performance.now() - sliceStart < SLICE_MS ? undefined : yieldNow();
}
