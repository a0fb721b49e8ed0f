import { API_LIMITS, HutchError } from "@hutch/shared/base";
import type { Session, SessionEvent, SessionForkResult } from "@hutch/shared";
import { connectDaemon, type DaemonClient } from "../client/daemon.ts";
import { attachSession } from "../client/exec.ts";
import { body, command, type GlobalArgs, type PositionalSpec } from "./args.ts";
import { setExitCode } from "./exit.ts";
import { cell, outputWriter, printJson, table } from "./output.ts";
import { count, terminalJson } from "@hutch/shared/text";

type IdArgs = GlobalArgs & { id: string };
const id: Record<string, PositionalSpec> = { id: { describe: "session id (ses_…)" } };
const path = (sid: string, rest = "") => `/v1/sessions/${encodeURIComponent(sid)}${rest}`;

function sessionLine(s: Session): string[] {
  return [s.id, s.state, s.boxName, s.agent, s.label ?? "", s.driver ? s.driver.actor.id : "-", String(s.lastSeq)];
}

function sessionDetails(s: Session): string {
  const rows: [string, string][] = [
    ["id", s.id],
    ["state", s.state],
    ["box", `${s.boxName} (${s.box})`],
    ["agent", s.agent],
    ["label", s.label ?? ""],
    [
      "driver",
      s.driver
        ? `${s.driver.actor.id} (${s.driver.actor.kind})${s.driver.expiresAt ? `, lease until ${s.driver.expiresAt}` : ""}`
        : "nobody",
    ],
    ["events", String(s.lastSeq)],
    ["created", s.createdAt],
  ];
  return `${rows
    .filter(([, v]) => v)
    .map(([k, v]) => `${(`${k}:`).padEnd(9)}${cell(v)}`)
    .join("\n")}\n`;
}

/** Parses 30s, 5m, 1500ms, or plain milliseconds. */
export function parseDuration(s: string): number {
  const m = /^(\d+)(ms|s|m|h)?$/.exec(s.trim());
  if (!m) throw new HutchError("invalid", `--lease ${s}: expected a duration like 30s, 5m or 1500ms`, "e.g. --lease 30s");
  const n = Number(m[1]);
  return n * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? "ms") as "ms" | "s" | "m" | "h"];
}

// The modules that read events check each against its schema, which loads the
// schema library: they are imported by the verbs that read events, so `session
// list`, `info`, `send` and the driver verbs start without it (~5 ms of a ~12 ms
// request: scripts/bench/README.md, cli.ts).
const renderer = () => import("../client/render.ts").then((m) => m.renderEvent);

async function follow(d: DaemonClient, sid: string, from: number, print: (e: SessionEvent) => Promise<void> | void): Promise<void> {
  const { subscribe } = await import("../client/subscribe.ts");
  const sub = subscribe(d, sid, from, { event: print });
  const stop = () => sub.close();
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  await sub.done;
}

const driverVerb = (verb: "acquire" | "release" | "steal" | "heartbeat") => async (a: IdArgs & { lease?: string }) => {
  const d = await connectDaemon(a.home);
  const body = verb === "acquire" || verb === "steal" ? (a.lease ? { leaseMs: parseDuration(a.lease) } : {}) : undefined;
  const s = await d.request<Session>("POST", path(a.id, `/driver/${verb}`), body);
  if (a.json) return printJson(s);
  process.stdout.write(s.driver ? `${cell(a.id)} is driven by ${cell(s.driver.actor.id)}\n` : `${cell(a.id)} has no driver\n`);
};

const lease = { type: "string", describe: "lapse without heartbeats, e.g. 30s" } as const;

export const session = body<GlobalArgs>({
  demand: "name a session command",
  commands: [
    command<GlobalArgs & { box?: string; state?: string }>({
      command: "list",
      aliases: ["ls"],
      describe: "list sessions",
      options: { box: { type: "string" }, state: { type: "string", choices: ["open", "closed"] } },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const q = new URLSearchParams({ ...(a.box ? { box: a.box } : {}), ...(a.state ? { state: a.state } : {}) });
        const list = await d.request<Session[]>("GET", `/v1/sessions${q.size ? `?${q}` : ""}`);
        if (a.json) return printJson(list);
        process.stdout.write(
          list.length === 0
            ? "no sessions; start one: hutch run\n"
            : table([["ID", "STATE", "BOX", "AGENT", "LABEL", "DRIVER", "EVENTS"], ...list.map(sessionLine)]),
        );
      },
    }),
    command<IdArgs>({
      command: "info <id>",
      describe: "show one session",
      positionals: id,
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const s = await d.request<Session>("GET", path(a.id));
        if (a.json) printJson(s);
        else process.stdout.write(sessionDetails(s));
      },
    }),
    command<IdArgs & { from: number; follow: boolean }>({
      command: "log <id>",
      describe: "print the log (use --follow to keep going)",
      positionals: id,
      options: { from: { type: "number", default: 1 }, follow: { alias: "f", type: "boolean", default: false } },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const renderEvent = a.json ? undefined : await renderer();
        const write = outputWriter();
        const print = async (e: SessionEvent) => write(`${renderEvent ? await renderEvent(d, e) : terminalJson(e)}\n`);
        if (a.follow)
          return follow(d, a.id, a.from, async (e) => {
            await print(e);
          });
        let from = a.from;
        for (;;) {
          const page = await d.request<{ events: SessionEvent[]; next: number; last: number }>(
            "GET",
            path(a.id, `/events?from=${from}&limit=${API_LIMITS.eventsPage}`),
          );
          for (const e of page.events) if (!(await print(e))) return;
          if (page.events.length === 0 || page.next > page.last) break;
          from = page.next;
        }
      },
    }),
    command<IdArgs & { from: number }>({
      command: "watch <id>",
      describe: "follow the session as it happens, rendered for people",
      positionals: id,
      options: { from: { type: "number", default: 1 } },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const renderEvent = await renderer();
        await follow(d, a.id, a.from, async (e) => void process.stdout.write(`${await renderEvent(d, e)}\n`));
      },
    }),
    command<IdArgs & { from: number }>({
      command: "subscribe <id>",
      describe: "replay from a seq, then stream live events as NDJSON",
      positionals: id,
      options: { from: { type: "number", default: 1, describe: "first seq to print" } },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const out = Bun.stdout.writer();
        await follow(d, a.id, a.from, async (e) => {
          out.write(`${terminalJson(e)}\n`);
          await out.flush();
        });
      },
    }),
    command<IdArgs & { text: string; newline: boolean }>({
      command: "send <id> <text>",
      describe: "type text into the session's terminal (driver only; Enter added unless --no-newline)",
      positionals: id,
      options: { newline: { type: "boolean", default: true } },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const r = await d.request<{ seq: number }>(
          "POST",
          path(a.id, "/input"),
          { text: a.text + (a.newline ? "\n" : "") },
          { idempotencyKey: crypto.randomUUID() },
        );
        if (a.json) printJson(r);
      },
    }),
    command<IdArgs & { text: string; anchor?: string; seq?: number }>({
      command: "annotate <id> <text>",
      describe: "add a note to the log, optionally anchored to PATH[:LINE] and/or an event seq",
      positionals: id,
      options: { anchor: { type: "string", describe: "PATH[:LINE]" }, seq: { type: "number" } },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        let anchor: { path: string; line?: number; seq?: number } | undefined;
        if (a.anchor) {
          const m = /^(.+?)(?::(\d+))?$/.exec(a.anchor)!;
          anchor = { path: m[1]!, ...(m[2] ? { line: Number(m[2]) } : {}) };
        }
        if (a.seq !== undefined) {
          if (!anchor) throw new HutchError("invalid", "--seq anchors need a path too", "add --anchor PATH[:LINE]");
          anchor.seq = a.seq;
        }
        const r = await d.request<{ seq: number }>(
          "POST",
          path(a.id, "/annotations"),
          { text: a.text, ...(anchor ? { anchor } : {}) },
          { idempotencyKey: crypto.randomUUID() },
        );
        if (a.json) printJson(r);
        else process.stdout.write(`annotated ${a.id} at #${r.seq}\n`);
      },
    }),
    command<IdArgs & { steal: boolean }>({
      command: "attach <id>",
      describe: "attach this terminal (takes the driver slot; Ctrl-A d detaches)",
      positionals: id,
      options: { steal: { type: "boolean", default: false, describe: "take the slot from whoever drives" } },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        setExitCode(await attachSession(d, a.id, { steal: a.steal, json: a.json }));
      },
    }),
    command<GlobalArgs>({
      command: "driver <command>",
      describe: "the driver slot: acquire, release, steal, heartbeat",
      demand: "name a driver command",
      commands: [
        command({
          command: "acquire <id>",
          describe: "take the slot when free",
          positionals: id,
          options: { lease },
          run: driverVerb("acquire"),
        }),
        command({ command: "release <id>", describe: "give the slot up", positionals: id, run: driverVerb("release") }),
        command({
          command: "steal <id>",
          describe: "take the slot from its driver (logged)",
          positionals: id,
          options: { lease: { type: "string" } },
          run: driverVerb("steal"),
        }),
        command({ command: "heartbeat <id>", describe: "keep a lease alive", positionals: id, run: driverVerb("heartbeat") }),
      ],
    }),
    command<GlobalArgs & { ref: string; idle: boolean }>({
      command: "wait <ref>",
      describe: "wait until the agent's turn settles (done, needs input, or failed); exits 0 when it ended well",
      positionals: { ref: { describe: "session id, or a box (its newest open session)" } },
      options: {
        idle: { type: "boolean", default: true, describe: "wait for the agent to be idle or need input (the only condition so far)" },
      },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const { resolveSession, waitTurn } = await import("../client/turn.ts");
        const r = await waitTurn(d, await resolveSession(d, a.ref));
        if (a.json) printJson(r);
        else
          process.stdout.write(
            `${r.session}: ${r.state ?? "no agent state"}${r.reason ? ` (${cell(r.reason)})` : ""}${r.exit ? `, exited ${r.exit.signal ? `by signal ${r.exit.signal}` : `with code ${r.exit.code}`}` : ""}\n`,
          );
        setExitCode(r.ok ? 0 : 1);
      },
    }),
    command<IdArgs>({
      command: "transcript <id>",
      describe: "print the conversation: prompts, messages, tool calls and results, usage",
      positionals: id,
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const { CONVERSATION_KINDS, renderTranscript } = await import("../client/transcript.ts");
        const events: SessionEvent[] = [];
        for (let from = 1; ; ) {
          const page = await d.request<{ events: SessionEvent[]; next: number; last: number }>(
            "GET",
            path(a.id, `/events?from=${from}&limit=${API_LIMITS.eventsPage}`),
          );
          events.push(...page.events.filter((e) => CONVERSATION_KINDS.has(e.kind)));
          if (page.events.length === 0 || page.next > page.last) break;
          from = page.next;
        }
        if (a.json) printJson(events);
        else process.stdout.write(renderTranscript(events));
      },
    }),
    command<IdArgs & { at?: number; name?: string; label?: string }>({
      command: "fork <id>",
      describe: "a new box and session from the session's checkpoint at or before --at",
      positionals: id,
      options: {
        at: { type: "number", describe: "a seq in the session's log: the newest checkpoint at or before it is used" },
        name: { type: "string", describe: "the new box's name (default: the old one's, with -fork-N)" },
        label: { type: "string", describe: "the new session's label" },
      },
      examples: [["$0 session fork ses_01h... --at 120", "go back to the checkpoint before event 120, in a new box"]],
      run: async (a) => {
        if (a.at === undefined || !Number.isInteger(a.at) || a.at < 1)
          throw new HutchError(
            "invalid",
            "say where to fork from: --at SEQ (a seq in the session's log)",
            "see the log: hutch session log ID",
          );
        const d = await connectDaemon(a.home);
        const body = { at: a.at, ...(a.name ? { name: a.name } : {}), ...(a.label ? { label: a.label } : {}) };
        const f = await d.request<SessionForkResult>("POST", path(a.id, "/fork"), body, { idempotencyKey: crypto.randomUUID() });
        if (a.json) return printJson(f);
        process.stdout.write(`forked ${a.id} at seq ${f.checkpoint} (${f.snapshot}): box ${f.box.name}, session ${f.session.id}\n`);
      },
    }),
    command<IdArgs & { box?: string }>({
      command: "move <id>",
      describe: "continue a local session on --remote R: its box's /workspace and its log move there; the local box is stopped",
      positionals: id,
      options: { box: { type: "string", describe: "the box's name on the remote (default: the same name)" } },
      examples: [["$0 session move ses_01h... --remote big", "hand the session and its work to remote big"]],
      run: async (a) => {
        const { selectedRemote } = await import("../client/remotes.ts");
        const r = selectedRemote();
        if (!r)
          throw new HutchError(
            "invalid",
            "say where the session goes: --remote R (not the local daemon)",
            "list remotes: hutch remote list",
          );
        const { moveSession } = await import("../workspace/move.ts");
        const local = await connectDaemon(a.home, { local: true });
        const remote = await connectDaemon(a.home);
        const progress = a.json ? undefined : (s: string) => process.stderr.write(`${s}\n`);
        const m = await moveSession(local, remote, { session: a.id, remoteName: r.name, ...(a.box ? { box: a.box } : {}) }, progress);
        if (a.json) return printJson(m);
        process.stdout.write(
          `moved ${m.from.session} to ${m.to.remote}: session ${m.to.session} on box ${m.to.box} (${count(m.entries.length, "entry", "entries")} of /workspace, ${count(m.events, "event")}); box ${m.from.box} here is stopped\n` +
            `follow it there: hutch --remote ${m.to.remote} session log ${m.to.session}\n`,
        );
      },
    }),
    command<IdArgs>({
      command: "close <id>",
      describe: "close the session (its log stays)",
      positionals: id,
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const s = await d.request<Session>("POST", path(a.id, "/close"), {});
        if (a.json) printJson(s);
        else process.stdout.write(`closed ${a.id}\n`);
      },
    }),
  ],
});
