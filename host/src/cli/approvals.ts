// `hutch approvals`, `hutch approve ID`, `hutch deny ID`: answering what a
// box asked a person (host/src/approval). Through the daemon's API, so
// --remote answers a remote daemon's.
import type { Approval, ApprovalWatchLine } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { body, type GlobalArgs } from "./args.ts";
import { printJson, table } from "./output.ts";

type ListArgs = GlobalArgs & { watch: boolean; box?: string; session?: string };
type DecideArgs = GlobalArgs & { id: string; always: boolean; reason?: string };

const WATCH_EVERY_MS = 1000;

const line = (l: ApprovalWatchLine) => process.stdout.write(`${JSON.stringify(l)}\n`);

const rows = (list: Approval[]) =>
  table([
    ["ID", "BOX", "KIND", "EXPIRES", "SUMMARY"],
    ...list.map((a) => [a.id, a.boxName, a.kind, a.expiresAt.slice(11, 19), a.summary.replace(/[\x00-\x1f\x7f]/g, " ")]),
  ]);

export const approvals = body<ListArgs>({
  options: {
    watch: { type: "boolean", default: false, describe: "keep listing: print each approval as it is asked and as it leaves the list" },
    box: { type: "string", describe: "only this box's" },
    session: { type: "string", describe: "only this session's" },
  },
  examples: [
    ["$0 approvals", "what waits for you"],
    ["$0 approvals --watch --json", "one line per change, as NDJSON"],
  ],
  run: async (a) => {
    const d = await connectDaemon(a.home);
    const q = new URLSearchParams({ ...(a.box ? { box: a.box } : {}), ...(a.session ? { session: a.session } : {}) }).toString();
    const fetchList = () => d.request<Approval[]>("GET", `/v1/approvals${q ? `?${q}` : ""}`);
    if (!a.watch) {
      const list = await fetchList();
      if (a.json) return printJson(list);
      process.stdout.write(list.length ? rows(list) : "no approvals waiting\n");
      return;
    }
    let seen = new Map<string, Approval>();
    for (;;) {
      const list = await fetchList();
      const now = new Map(list.map((x) => [x.id, x]));
      for (const x of list) {
        if (seen.has(x.id)) continue;
        if (a.json) line({ type: "pending", approval: x });
        else
          process.stdout.write(`${x.id} ${x.boxName} ${x.kind}: ${x.summary.replace(/[\x00-\x1f\x7f]/g, " ")} (hutch approve ${x.id})\n`);
      }
      for (const [id] of seen) {
        if (now.has(id)) continue;
        const done = await d.request<Approval>("GET", `/v1/approvals/${id}`).catch(() => null);
        if (a.json) line({ type: "done", id, ...(done ? { approval: done } : {}) });
        else process.stdout.write(`${id} ${done ? `${done.state}${done.decidedBy ? ` by ${done.decidedBy.id}` : ""}` : "gone"}\n`);
      }
      seen = now;
      await Bun.sleep(WATCH_EVERY_MS);
    }
  },
});

function decide(allow: boolean) {
  return body<DecideArgs>({
    positionals: { id: { describe: "the approval (hutch approvals lists them)" } },
    options: {
      always: {
        type: "boolean",
        default: false,
        describe: allow
          ? "also allow the same again (egress: add the host to the box's policy)"
          : "also refuse the same again without asking",
      },
      reason: { type: "string", describe: "why, for the log (and the box's refusal)" },
    },
    run: async (a) => {
      const d = await connectDaemon(a.home);
      const decision = `${allow ? "allow" : "reject"}_${a.always ? "always" : "once"}`;
      const done = await d.request<Approval>("POST", `/v1/approvals/${encodeURIComponent(a.id)}`, {
        decision,
        ...(a.reason ? { reason: a.reason } : {}),
      });
      if (a.json) return printJson(done);
      process.stdout.write(`${done.id} ${done.state.replace("_", " ")}: ${done.summary.replace(/[\x00-\x1f\x7f]/g, " ")}\n`);
    },
  });
}

export const approve = decide(true);
export const deny = decide(false);
