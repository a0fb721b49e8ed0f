// One store operation in a process of its own, as restic runs one:
//
//   snapshot-op save HOME TREE | restore HOME SNAP DEST | list HOME
//
// scripts/bench/snapshot.ts compiles this as hutch's binary is compiled
// (scripts/compile.ts: minified, bytecode, the store's worker entries) and
// measures that: the store's code as the daemon runs it, not Bun
// transpiling its TypeScript (from source, a no-change save peaked 3-4 MB
// higher and ran ~0.1 s longer).
import { openStore, restoreTree, snapshotTree, storeLocation } from "../../host/src/snapshot/index.ts";

const [op, home, a, b] = process.argv.slice(2);
const store = await openStore(storeLocation(home!), { create: true });
if (op === "save") {
  const r = await snapshotTree(store, a!);
  process.stdout.write(`${JSON.stringify({ id: r.id, stats: r.stats })}\n`);
} else if (op === "restore") {
  const r = await restoreTree(store, a!, b!, { symlinks: "any" });
  process.stdout.write(`${JSON.stringify(r)}\n`);
} else if (op === "list") {
  const all = await store.listSnapshots();
  process.stdout.write(`${JSON.stringify({ snapshots: all.length })}\n`);
} else {
  process.stderr.write(`snapshot-op: unknown operation ${op}; use save, restore or list\n`);
  process.exit(2);
}
store.close();
process.exit(0);
