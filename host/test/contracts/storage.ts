// What a contract suite is given: a way to reach one backend's storage, fresh
// for each test. open() is another handle on the same state: a second
// server's view, or the same server after a restart (close, then open).
// Every call on a store is awaited, so the suites run unchanged on a backend
// whose methods return promises.
import { expect } from "bun:test";

/** One handle on a storage, and how to let it go. */
export interface Handle<T> {
  store: T;
  close(): void | Promise<void>;
}

/** A fresh, empty storage for one test. */
export interface Storage<T> {
  open(): Handle<T> | Promise<Handle<T>>;
  /** Removes what the test stored (every handle is closed by then). */
  dispose(): void | Promise<void>;
}

export type MakeStorage<T> = () => Storage<T> | Promise<Storage<T>>;

/** What a test gets: a first handle's store, another handle on the same state, and a restart. */
export type StorageTest<T> = (first: T, more: () => Promise<Handle<T>>, reopen: () => Promise<T>) => Promise<void>;

/**
 * Runs `fn` with a fresh storage and a first handle on it; closes every
 * handle it opened and disposes of the storage, whatever happens. reopen()
 * closes every open handle, then opens a new one on what they left.
 */
export async function withStorage<T>(make: MakeStorage<T>, fn: StorageTest<T>): Promise<void> {
  const storage = await make();
  const handles: Handle<T>[] = [];
  const more = async (): Promise<Handle<T>> => {
    const h = await storage.open();
    let closed = false;
    const once: Handle<T> = {
      store: h.store,
      close: async () => {
        if (closed) return;
        closed = true;
        await h.close();
      },
    };
    handles.push(once);
    return once;
  };
  const reopen = async () => {
    for (const h of handles) await h.close();
    return (await more()).store;
  };
  try {
    const first = await more();
    await fn(first.store, more, reopen);
  } finally {
    for (const h of handles) await h.close();
    await storage.dispose();
  }
}

/** Expects fn to throw or reject (a backend over the network rejects) with a message matching `message`. */
export async function fails(fn: () => unknown, message?: RegExp): Promise<void> {
  const settled = Promise.resolve().then(fn);
  if (message) await expect(settled).rejects.toThrow(message);
  else await expect(settled).rejects.toThrow();
}
