// The async form of the synchronous registry (the SQLite tables), so both
// backends answer to RegistryAsync and run one contract suite. Every call is
// the sync call on the same object, resolved; a throw becomes a rejection.
import type { Async, Registry, RegistryAsync } from "./types.ts";

/** Every method of `target` as an async function calling it: Async<T> without listing the methods twice. */
function promised<T extends object>(target: T): Async<T> {
  return new Proxy(target, {
    get(t, key) {
      const v: unknown = Reflect.get(t, key);
      return typeof v === "function" ? async (...args: unknown[]) => v.apply(t, args) : v;
    },
  }) as unknown as Async<T>;
}

export function asyncRegistry(r: Registry): RegistryAsync {
  return { boxes: promised(r.boxes), auth: promised(r.auth), broker: promised(r.broker), schedules: promised(r.schedules) };
}
