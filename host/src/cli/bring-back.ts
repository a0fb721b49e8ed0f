import { connectDaemon } from "../client/daemon.ts";
import { body, type GlobalArgs } from "./args.ts";
import { printJson } from "./output.ts";

type BringBackArgs = GlobalArgs & { box: string; into?: string; "dry-run": boolean };

const SAID = {
  nothing: "nothing to bring back",
  "fast-forward": "fast-forwarded",
  merge: "merged, uncommitted (HEAD unchanged)",
  branch: "kept apart on a branch",
} as const;

export const bringBack = body<BringBackArgs>({
  positionals: { box: { describe: "the box the work was offloaded to" } },
  options: {
    into: { type: "string", describe: "the repository to bring it into (default: the one around the current directory)" },
    "dry-run": {
      type: "boolean",
      default: false,
      describe: "fetch into the quarantine refs and say which case it would be; the work tree is not touched",
    },
  },
  examples: [["$0 bring-back work", "bring box work's commits and changes home"]],
  run: async (a) => {
    const { bringBack: run } = await import("../workspace/bring-back.ts");
    const d = await connectDaemon(a.home);
    const progress = a.json ? undefined : (s: string) => process.stderr.write(`${s}\n`);
    const r = await run(d, { box: a.box, cwd: process.cwd(), into: a.into, dryRun: a["dry-run"] }, progress);
    if (a.json) return printJson(r);
    const lines = [`${r.dryRun ? "would be: " : ""}${SAID[r.case]}${r.reason ? `: ${r.reason}` : ""}`];
    for (const c of r.commits) lines.push(`  commit ${c.sha.slice(0, 12)} ${c.subject}`);
    for (const f of r.files) lines.push(`  changed ${f}`);
    if (r.created) {
      lines.push(`the box's work is on branch ${r.created}; your work tree and index are untouched. Review and merge it:`);
      for (const c of r.commands ?? []) lines.push(`  ${c}`);
    }
    for (const c of r.conversations)
      lines.push(`conversation: the box's ${c.agent} conversation is home; continue it: cd ${c.cwd} && ${c.resume}`);
    for (const n of r.notes) lines.push(`note: ${n}`);
    if (r.case !== "nothing") lines.push(`the box's HEAD, index and work tree stay in ${r.quarantine}{head,index,work}`);
    process.stdout.write(`${lines.join("\n")}\n`);
  },
});
