import { connectDaemon } from "../client/daemon.ts";
import { body, type GlobalArgs } from "./args.ts";
import type { BringBackOutput } from "@hutch/shared";
import { cell, jsonSteps, printJson } from "./output.ts";
import { count } from "@hutch/shared/text";

type BringBackArgs = GlobalArgs & { box: string; into?: string; "dry-run": boolean; session?: string };

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
    session: {
      type: "string",
      describe: "a local session (ses_…) whose log gets the events of the box's sessions, each attributed (with --remote: the remote's)",
    },
  },
  examples: [
    ["$0 bring-back work", "bring box work's commits and changes home"],
    ["$0 bring-back work --remote big --session ses_…", "and append the remote sessions' events to a local session's log"],
  ],
  run: async (a) => {
    const { bringBack: run } = await import("../workspace/bring-back.ts");
    const d = await connectDaemon(a.home);
    const progress = a.json ? jsonSteps() : (s: string) => process.stderr.write(`${s}\n`);
    const log = a.session ? await import("../workspace/session-log.ts") : null;
    const local = log ? await connectDaemon(a.home, { local: true }) : null;
    if (log && local && a.session) await log.checkTarget(local, a.session, a.box);
    const r = await run(d, { box: a.box, cwd: process.cwd(), into: a.into, dryRun: a["dry-run"] }, progress);
    const { selectedRemote } = await import("../client/remotes.ts");
    const sessionLog =
      log && local && a.session && !r.dryRun
        ? await log.importSessionLogs(
            d,
            local,
            { box: a.box, remoteName: selectedRemote()?.name ?? "local", session: a.session, case: r.case },
            progress,
          )
        : undefined;
    if (a.json) return printJson((sessionLog ? { ...r, sessionLog } : r) satisfies BringBackOutput);
    // Commit subjects, file names and notes were written in the box: escaped, one line each.
    const lines = [`${r.dryRun ? "would be: " : ""}${SAID[r.case]}${r.reason ? `: ${cell(r.reason)}` : ""}`];
    for (const c of r.commits) lines.push(`  commit ${cell(c.sha.slice(0, 12))} ${cell(c.subject)}`);
    for (const f of r.files) lines.push(`  changed ${cell(f)}`);
    if (r.created) {
      lines.push(`the box's work is on branch ${r.created}; your work tree and index are untouched. Review and merge it:`);
      for (const c of r.commands ?? []) lines.push(`  ${cell(c)}`);
    }
    for (const c of r.conversations)
      lines.push(`conversation: the box's ${cell(c.agent)} conversation is home; continue it: cd ${cell(c.cwd)} && ${cell(c.resume)}`);
    for (const n of r.notes) lines.push(`note: ${cell(n)}`);
    if (r.case !== "nothing") lines.push(`the box's HEAD, index and work tree stay in ${r.quarantine}{head,index,work}`);
    if (sessionLog)
      lines.push(
        `appended ${count(sessionLog.events, "event")} of ${count(sessionLog.from.length, "session")} on ${sessionLog.remote} to ${sessionLog.session}: hutch session log ${sessionLog.session}`,
      );
    process.stdout.write(`${lines.join("\n")}\n`);
  },
});
