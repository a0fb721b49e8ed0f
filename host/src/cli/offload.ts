import { body, type GlobalArgs } from "./args.ts";
import { printJson } from "./output.ts";

type OffloadArgs = GlobalArgs & { box?: string; "dry-run": boolean; include?: string[]; "include-ignored"?: string[] };

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
    const progress = a.json ? undefined : (s: string) => process.stderr.write(`${s}\n`);
    const r = await run(
      d,
      { cwd: process.cwd(), box: a.box, dryRun: a["dry-run"], include: a.include, includeIgnored: a["include-ignored"] },
      progress,
    );
    if (a.json) return printJson(r);
    const lines: string[] = [];
    if (r.dryRun) for (const f of r.files) lines.push(`  ${f.path} (${f.bytes} bytes)`);
    if (r.dryRun) for (const f of r.ignored) lines.push(`  ${f.path} (${f.bytes} bytes, git-ignored, carried on request)`);
    if (r.upToDate) lines.push(`box ${r.box}:${r.guestDir} already holds the work tree as it is: nothing sent`);
    else if (r.updated)
      lines.push(
        `${r.resumed ? "finished updating" : "updated"} box ${r.box}:${r.guestDir} to ${r.files.length} files (${r.bytes} bytes) and ${r.branch} at ${r.base.slice(0, 12)}${r.resumed ? "" : `: sent ${r.sent.objects} objects (${r.sent.blobs} files' contents), ${r.sent.bytes} bytes`}`,
      );
    else
      lines.push(
        `${r.dryRun ? "would offload" : r.resumed ? "finished the offload of" : "offloaded"} ${r.files.length} files (${r.bytes} bytes) and ${r.branch} at ${r.base.slice(0, 12)} to box ${r.box}:${r.guestDir}`,
      );
    for (const h of r.heldBack)
      lines.push(`held back: ${h.path} (${h.rule}); to carry it: --include ${h.path}, or !${h.path} in .hutchignore`);
    if (r.ignored.length)
      lines.push(
        `and ${r.ignored.length} git-ignored files (${r.ignored.reduce((n, f) => n + f.bytes, 0)} bytes) matching ${r.includeIgnored.join(", ")}`,
      );
    for (const n of r.notes) lines.push(`note: ${n}`);
    if (!r.dryRun) lines.push(`work in it: hutch exec ${r.box} -w ${r.guestDir} -- sh; bring it back: hutch bring-back ${r.box}`);
    process.stdout.write(`${lines.join("\n")}\n`);
  },
});
