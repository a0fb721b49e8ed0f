import { body, type GlobalArgs } from "./args.ts";
import type { OffloadOutput } from "@hutch/shared";
import { jsonSteps, printJson } from "./output.ts";
import { count } from "@hutch/shared/text";

type OffloadArgs = GlobalArgs & { box?: string; "dry-run": boolean; include?: string[]; "include-ignored"?: string[]; note?: string };

export const offload = body<OffloadArgs>({
  options: {
    box: { type: "string", describe: "the box to offload into (default: named after the repository; created when missing)" },
    "dry-run": { type: "boolean", default: false, describe: "print what would go and what is held back; change nothing" },
    include: { type: "string", array: true, describe: "carry a held-back path anyway (repeatable)" },
    "include-ignored": {
      type: "string",
      array: true,
      describe: "carry git-ignored files matching GLOB (gitignore style; repeatable; also git config hutch.includeIgnored)",
    },
    note: {
      type: "string",
      describe:
        "a hand-over note for the box's agent: the first input of a conversation that starts there (with the branch, recent commits and diffstat)",
    },
  },
  examples: [
    ["$0 offload --dry-run", "what would go, and what is held back"],
    ["$0 offload --box work", "hand the work tree to box work"],
    ["$0 offload --include-ignored node_modules/.cache --include-ignored build/", "carry some ignored output too"],
  ],
  run: async (a) => {
    const { offload: run } = await import("../workspace/offload.ts");
    const { connectDaemon } = await import("../client/daemon.ts");
    const d = a["dry-run"] ? null : await connectDaemon(a.home);
    const progress = a.json ? jsonSteps() : (s: string) => process.stderr.write(`${s}\n`);
    const r = await run(
      d,
      {
        cwd: process.cwd(),
        box: a.box,
        dryRun: a["dry-run"],
        include: a.include,
        includeIgnored: a["include-ignored"],
        note: a.note,
      },
      progress,
    );
    if (a.json) return printJson(r satisfies OffloadOutput);
    const lines: string[] = [];
    if (r.dryRun) for (const f of r.files) lines.push(`  ${f.path} (${count(f.bytes, "byte")})`);
    if (r.dryRun) for (const f of r.ignored) lines.push(`  ${f.path} (${count(f.bytes, "byte")}, git-ignored, carried on request)`);
    if (r.upToDate) lines.push(`box ${r.box}:${r.guestDir} already holds the work tree as it is: nothing sent`);
    else if (r.updated)
      lines.push(
        `${r.resumed ? "finished updating" : "updated"} box ${r.box}:${r.guestDir} to ${count(r.files.length, "file")} (${count(r.bytes, "byte")}) and ${r.branch} at ${r.base.slice(0, 12)}${r.resumed ? "" : `: sent ${count(r.sent.objects, "object")} (${r.sent.blobs} ${r.sent.blobs === 1 ? "file's contents" : "files' contents"}), ${count(r.sent.bytes, "byte")}`}`,
      );
    else
      lines.push(
        `${r.dryRun ? "would offload" : r.resumed ? "finished the offload of" : "offloaded"} ${count(r.files.length, "file")} (${count(r.bytes, "byte")}) and ${r.branch} at ${r.base.slice(0, 12)} to box ${r.box}:${r.guestDir}`,
      );
    for (const h of r.heldBack)
      lines.push(`held back: ${h.path} (${h.rule}); to carry it: --include ${h.path}, or !${h.path} in .hutchignore`);
    if (r.ignored.length)
      lines.push(
        `and ${count(r.ignored.length, "git-ignored file")} (${count(
          r.ignored.reduce((n, f) => n + f.bytes, 0),
          "byte",
        )}) matching ${r.includeIgnored.join(", ")}`,
      );
    for (const n of r.notes) lines.push(`note: ${n}`);
    for (const c of r.conversations ?? [])
      lines.push(`conversation: ${c.agent} ${c.id} carried to ${c.cwd}; hutch run ${r.box} --agent ${c.agent} --prompt … continues it`);
    if (!r.dryRun && !r.resumed)
      lines.push(`an agent with no conversation carried starts with the hand-over note (--note, the branch, recent commits, diffstat)`);
    if (!r.dryRun) lines.push(`work in it: hutch exec ${r.box} -w ${r.guestDir} -- sh; bring it back: hutch bring-back ${r.box}`);
    process.stdout.write(`${lines.join("\n")}\n`);
  },
});
