// The warm pools' sizes (PoolSizes, store/types.ts): what the server's own
// table and a fleet's bucket must both do. A second handle is another server
// of the same fleet (or the same home's file), which may see a change a
// moment later: it is read until it does.
import { describe, expect, test } from "bun:test";
import type { PoolSpec } from "@hutch/shared";
import type { PoolSizes } from "../../src/store/types.ts";
import { type MakeStorage, withStorage } from "./storage.ts";

const vm: PoolSpec = { image: "default", engine: "qemu", warm: 2 };
const proc: PoolSpec = { image: "default", engine: "process", warm: 1 };

async function until(what: string, ok: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}

export function describePoolSizesContract(name: string, make: MakeStorage<PoolSizes>): void {
  describe(`PoolSizes contract: ${name}`, () => {
    test("set stores a pool per engine and image, a second set replaces it, clear removes it once", () =>
      withStorage(make, async (sizes) => {
        expect(sizes.list()).toEqual([]);
        await sizes.set(vm);
        await sizes.set(proc);
        await sizes.set({ ...vm, warm: 3, memoryMiB: 768 });
        expect(sizes.list()).toEqual([proc, { ...vm, warm: 3, memoryMiB: 768 }]);
        expect(await sizes.clear("qemu", "default")).toBe(true);
        expect(await sizes.clear("qemu", "default")).toBe(false);
        expect(sizes.list()).toEqual([proc]);
      }));

    test("another handle sees a set and a clear", () =>
      withStorage(make, async (sizes, more) => {
        const other = (await more()).store;
        await sizes.set(vm);
        await until("the other handle to see the pool", () => other.list().length === 1);
        expect(other.list()).toEqual([vm]);
        await sizes.clear("qemu", "default");
        await until("the other handle to see it go", () => other.list().length === 0);
      }));

    test("pools outlive a restart", () =>
      withStorage(make, async (sizes, _more, reopen) => {
        await sizes.set(vm);
        const after = await reopen();
        expect(after.list()).toEqual([vm]);
      }));

    test("a set or a clear through this handle tells its listeners", () =>
      withStorage(make, async (sizes) => {
        let told = 0;
        sizes.onChange(() => told++);
        await sizes.set(vm);
        expect(told).toBeGreaterThanOrEqual(1);
        const before = told;
        await sizes.clear("qemu", "default");
        expect(told).toBeGreaterThan(before);
      }));
  });
}
