// A child process for the snapshot tests that need two processes or a
// SIGKILL: runs the library in a loop against a store given as JSON.
//
//   bun snapshot-worker.ts save-loop  '<spec>' <until-ms>   saves until then, mutating the tree in between
//   bun snapshot-worker.ts prune-loop '<spec>' <until-ms>   prunes (keepLast 3) until then
//
// spec: a StoreLocation plus { src, log }. save-loop appends one NDJSON line
// per finished snapshot to `log` ({id, files: {path: sha256}}) and prints
// {saved, refused}; prune-loop prints {runs, deleted}.
import { appendFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { openStore, prune, snapshotTree, StoreError, type StoreLocation } from "../src/snapshot/index.ts";
import { bytes, text } from "./snapshot-helpers.ts";

const [op, specText, untilText] = process.argv.slice(2);
const spec = JSON.parse(specText!) as StoreLocation & { src: string; log: string };
const until = Number(untilText ?? Number.POSITIVE_INFINITY);

function digests(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out[relative(root, p)] = new Bun.CryptoHasher("sha256").update(readFileSync(p)).digest("hex");
    }
  };
  walk(root);
  return out;
}

function mutate(root: string, round: number): void {
  writeFileSync(join(root, `round-${round}.txt`), text(2000 + (round % 7) * 500, round));
  writeFileSync(join(root, `blob-${round % 5}.bin`), bytes(300_000 + round * 1000, round));
  rmSync(join(root, `round-${round - 4}.txt`), { force: true });
}

const store = await openStore(spec);
let round = 0;
if (op === "save-loop" || op === "save-forever") {
  let saved = 0;
  let refused = 0;
  while (Date.now() < until) {
    mutate(spec.src, ++round);
    const files = op === "save-loop" ? digests(spec.src) : {};
    try {
      const r = await snapshotTree(store, spec.src, { source: "worker" });
      saved++;
      if (op === "save-loop") appendFileSync(spec.log, `${JSON.stringify({ id: r.id, files })}\n`);
    } catch (err) {
      if (!(err instanceof StoreError && err.message.includes("longer than"))) throw err;
      refused++;
    }
  }
  console.log(JSON.stringify({ saved, refused }));
} else if (op === "prune-loop" || op === "prune-forever") {
  let runs = 0;
  let deleted = 0;
  while (Date.now() < until) {
    try {
      const r = await prune(store, { policy: { keepLast: 3 } });
      runs++;
      deleted += r.deleted.packs;
    } catch (err) {
      if (!(err instanceof StoreError && err.code === "conflict")) throw err;
    }
    await Bun.sleep(op === "prune-loop" ? 300 : 0);
  }
  console.log(JSON.stringify({ runs, deleted }));
} else {
  throw new Error(`unknown op ${op}`);
}
store.close();
