import { HutchError } from "@hutch/shared/base";
import {
  SnapshotCheckResult,
  SnapshotCreateResult,
  SnapshotPruneResult,
  SnapshotRestoreResult,
  type SnapshotBrowse,
  type SnapshotDiff,
  type SnapshotInfo,
} from "@hutch/shared";
import { connectDaemon, type DaemonClient } from "../client/daemon.ts";
import { op } from "./op.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { setExitCode } from "./exit.ts";
import { count, terminalText } from "@hutch/shared/text";
import { cell, printJson, table } from "./output.ts";

function size(n: number): string {
  if (n >= 1024 ** 3) return `${(n / 1024 ** 3).toFixed(1)} GiB`;
  if (n >= 1024 ** 2) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`;
}

const when = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace("T", " ");

const q = (d: DaemonClient, path: string) => d.request<unknown>("GET", path);

export const snapshot = body<GlobalArgs>({
  demand: "name a snapshot command",
  commands: [
    command<GlobalArgs & { box: string; label?: string }>({
      command: "create <box>",
      describe: "snapshot a box's /workspace and home (from its disk when stopped, through its guest when running)",
      options: { label: { type: "string", describe: "a line of text for the timeline" } },
      run: async (a) => {
        const r = await op(a, "/v1/snapshots", { box: a.box, ...(a.label ? { label: a.label } : {}) }, SnapshotCreateResult);
        for (const w of r.warnings) process.stderr.write(`hutch: ${cell(w)}\n`);
        if (!a.json)
          process.stdout.write(
            `${r.snapshot.id}  ${count(r.snapshot.files, "file")}, ${size(r.snapshot.bytes)}, ${size(r.snapshot.bytesAdded)} added\n`,
          );
      },
    }),
    command<GlobalArgs & { box?: string }>({
      command: "list [box]",
      aliases: ["ls"],
      describe: "the timeline: every snapshot (of one box), oldest first",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const all = (await q(d, `/v1/snapshots${a.box ? `?box=${encodeURIComponent(a.box)}` : ""}`)) as SnapshotInfo[];
        if (a.json) return printJson(all);
        if (all.length === 0) return void process.stdout.write(`no snapshots; take one: hutch snapshot create ${a.box ?? "BOX"}\n`);
        const rows = all.map((s) => [
          when(s.time),
          s.id,
          s.boxName ?? s.box,
          s.label ?? "",
          String(s.files),
          size(s.bytes),
          size(s.bytesAdded),
          String(s.filesChanged),
        ]);
        process.stdout.write(table([["TIME (UTC)", "ID", "BOX", "LABEL", "FILES", "SIZE", "ADDED", "CHANGED"], ...rows]));
      },
    }),
    command<GlobalArgs & { snap: string; path?: string }>({
      command: "browse <snap> [path]",
      describe: "list a directory of a snapshot (workspace/..., home/...)",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const r = (await q(
          d,
          `/v1/snapshots/${encodeURIComponent(a.snap)}/browse${a.path ? `?path=${encodeURIComponent(a.path)}` : ""}`,
        )) as SnapshotBrowse;
        if (a.json) return printJson(r);
        const rows = r.entries.map((e) => [
          `${e.type === "dir" ? "d" : e.type === "symlink" ? "l" : "-"}${(e.mode & 0o777).toString(8).padStart(3, "0")}`,
          e.size !== undefined ? size(e.size) : "",
          when(Number(BigInt(e.mtime) / 1_000_000n)),
          `${e.name}${e.type === "dir" ? "/" : ""}${e.target ? ` -> ${e.target}` : ""}`,
        ]);
        process.stdout.write(rows.length ? table([["MODE", "SIZE", "MODIFIED (UTC)", "NAME"], ...rows]) : "(empty)\n");
      },
    }),
    command<GlobalArgs & { a: string; b: string }>({
      command: "diff <a> <b>",
      describe: "what changed from snapshot A to B: paths, text hunks, binary sizes",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const r = (await q(d, `/v1/snapshots/diff?from=${encodeURIComponent(a.a)}&to=${encodeURIComponent(a.b)}`)) as SnapshotDiff;
        if (a.json) return printJson(r);
        const mark = { added: "A", removed: "D", modified: "M", metadata: "m", type: "T" } as const;
        for (const c of r.changes) {
          process.stdout.write(
            `${mark[c.change]} ${cell(c.path)}${c.type === "dir" ? "/" : ""}${c.binary ? `  (binary, ${size(c.binary.before)} -> ${size(c.binary.after)})` : ""}\n`,
          );
          // A hunk is the text of a file the box wrote.
          if (c.patch) process.stdout.write(terminalText(c.patch));
        }
        if (r.truncated) process.stdout.write("... (more changes; the list stops at 10,000)\n");
        if (r.changes.length === 0) process.stdout.write("no changes\n");
      },
    }),
    command<GlobalArgs & { box: string; snap: string; path?: string[]; "in-place": boolean }>({
      command: "restore <box> <snap>",
      describe: "restore a snapshot into a box: into ~/Restored/<time>/, or over its roots with --in-place",
      options: {
        path: { type: "string", array: true, describe: "restore only this path of the snapshot (repeatable), e.g. workspace/src" },
        "in-place": { type: "boolean", default: false, describe: "write over /workspace and the home (files the snapshot lacks are kept)" },
      },
      run: async (a) => {
        const r = await op(
          a,
          "/v1/snapshots/restore",
          { box: a.box, snapshot: a.snap, ...(a.path?.length ? { paths: a.path } : {}), ...(a["in-place"] ? { inPlace: true } : {}) },
          SnapshotRestoreResult,
        );
        if (!a.json) process.stdout.write(`restored ${count(r.files, "file")} (${size(r.bytes)}) into ${r.box}:${r.into.join(", ")}\n`);
      },
    }),
    command<
      GlobalArgs & {
        "keep-last"?: number;
        "keep-hourly"?: number;
        "keep-daily"?: number;
        "keep-weekly"?: number;
        "keep-monthly"?: number;
        "keep-yearly"?: number;
        "dry-run": boolean;
      }
    >({
      command: "prune",
      describe: "forget snapshots outside the policy and reclaim space (in two phases; never blocks a snapshot)",
      options: {
        "keep-last": { type: "number", describe: "keep the newest N of each box" },
        "keep-hourly": { type: "number", describe: "keep the newest of each of the last N hours" },
        "keep-daily": { type: "number", describe: "keep the newest of each of the last N days" },
        "keep-weekly": { type: "number", describe: "keep the newest of each of the last N weeks" },
        "keep-monthly": { type: "number", describe: "keep the newest of each of the last N months" },
        "keep-yearly": { type: "number", describe: "keep the newest of each of the last N years" },
        "dry-run": { type: "boolean", default: false, describe: "say what would go, change nothing" },
      },
      run: async (a) => {
        const keys = ["last", "hourly", "daily", "weekly", "monthly", "yearly"] as const;
        const policy: Record<string, number> = {};
        for (const k of keys) {
          const v = a[`keep-${k}`];
          if (v === undefined) continue;
          if (!Number.isInteger(v) || v < 0)
            throw new HutchError("invalid", `--keep-${k} ${v}: expected a whole number`, "e.g. --keep-last 10");
          policy[`keep${k[0]!.toUpperCase()}${k.slice(1)}`] = v;
        }
        const r = await op(a, "/v1/snapshots/prune", { ...policy, ...(a["dry-run"] ? { dryRun: true } : {}) }, SnapshotPruneResult);
        if (!a.json) {
          process.stdout.write(
            `${a["dry-run"] ? "would forget" : "forgot"} ${r.forgotten.length} snapshot(s)${r.forgotten.length ? `: ${r.forgotten.join(" ")}` : ""}\n`,
          );
          process.stdout.write(
            `marked ${r.marked.packs} pack(s) (${size(r.marked.bytes)}) for deletion after the grace period; deleted ${r.deleted.packs} (${size(r.deleted.bytes)})\n`,
          );
        }
      },
    }),
    command<GlobalArgs & { "read-data": boolean }>({
      command: "check",
      describe: "check that every snapshot is whole; --read-data also reads and authenticates every pack",
      options: { "read-data": { type: "boolean", default: false, describe: "read every pack (slow: reads the whole store)" } },
      run: async (a) => {
        const r = await op(a, "/v1/snapshots/check", { readData: a["read-data"] }, SnapshotCheckResult);
        if (!a.json) {
          for (const e of r.errors) process.stdout.write(`damaged: ${cell(e.object)}: ${cell(e.message)}\n`);
          for (const n of r.notes) process.stdout.write(`note: ${cell(n)}\n`);
          process.stdout.write(
            r.ok
              ? `ok: ${count(r.snapshots, "snapshot")}, ${count(r.trees, "tree")}, ${count(r.packs, "pack")}${a["read-data"] ? `, ${size(r.bytesRead)} read` : ""}\n`
              : `${r.errors.length} problem(s) found\n`,
          );
        }
        if (!r.ok) setExitCode(1);
      },
    }),
  ],
});
