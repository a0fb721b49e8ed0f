import { ENGINE_NAMES, HutchError } from "@hutch/shared/base";
import type { Box, BoxPolicy, EgressRecord } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { body, command, type GlobalArgs, type OptionSpec, parseLabels } from "./args.ts";
import { report, setExitCode } from "./exit.ts";
import { boxDetails, boxLine, print, printJson, table } from "./output.ts";

type Names = GlobalArgs & { names: string[] };

/** Runs one lifecycle verb over many boxes, keeps going past failures, reports them all. */
async function eachBox(a: Names, verb: string, act: (name: string, key: string) => Promise<unknown>): Promise<void> {
  if (a.names.length === 1) {
    const r = await act(a.names[0]!, crypto.randomUUID());
    if (a.json) printJson(r);
    else process.stdout.write(`${verb} ${a.names[0]}\n`);
    return;
  }
  const results: unknown[] = [];
  let worst = 0;
  for (const name of a.names) {
    try {
      const r = await act(name, crypto.randomUUID());
      results.push(r);
      if (!a.json) process.stdout.write(`${verb} ${name}\n`);
    } catch (err) {
      const code = report(err instanceof HutchError ? new HutchError(err.code, `${name}: ${err.message}`, err.hint, err.data) : err, false);
      results.push({ name, error: err instanceof HutchError ? err.toBody().error : { message: String(err) } });
      worst = Math.max(worst, code);
    }
  }
  if (a.json) printJson(results);
  setExitCode(worst);
}

/** "1G", "768M" or a number of MiB. */
export function parseMemory(s: string): number {
  const m = /^(\d+)([MG]?)i?B?$/i.exec(s.trim());
  if (!m) throw new HutchError("invalid", `--memory ${s}: expected a size like 1G or 768M`, "e.g. --memory 2G");
  return Number(m[1]) * (m[2]?.toUpperCase() === "G" ? 1024 : 1);
}

type LimitArgs = { cpus?: number; memory?: string; pids?: number; disk?: string; "sleep-after"?: string; "max-awake"?: string };

/** The limit flags `box create` and `box set` share (host/src/engine/process/README.md has the defaults). */
const LIMIT_OPTIONS: Record<string, OptionSpec> = {
  cpus: { type: "number", describe: "CPUs: a VM's virtual CPUs (default 2); a process box's CPU time cap (default: no cap)" },
  memory: { type: "string", describe: "memory, e.g. 4G or 768M (default: 1G for a VM, 4G for a process box)" },
  pids: { type: "number", describe: "process box: most processes and threads at once (default 4096)" },
  disk: { type: "string", describe: "disk size, e.g. 20G (default: 16G for a process box, the image's for a VM)" },
  "sleep-after": {
    type: "string",
    describe: "sleep by itself after this long idle (5s, 30m, 2h, or off); idle: no client attached, exec, turn or forwarded connection",
    defaultDescription: "30m for a VM box, off otherwise",
  },
  "max-awake": { type: "string", describe: "sleep after this long awake even if busy, never with a client attached (or off)" },
};

function limitsOf(a: LimitArgs): Record<string, number | string> {
  return {
    ...(a.cpus !== undefined ? { cpus: a.cpus } : {}),
    ...(a.memory ? { memoryMiB: parseMemory(a.memory) } : {}),
    ...(a.pids !== undefined ? { pids: a.pids } : {}),
    ...(a.disk ? { disk: a.disk } : {}),
    ...(a["sleep-after"] !== undefined ? { sleepAfter: a["sleep-after"] } : {}),
    ...(a["max-awake"] !== undefined ? { maxAwake: a["max-awake"] } : {}),
  };
}

type Create = GlobalArgs &
  LimitArgs & {
    name: string;
    engine?: string;
    start: boolean;
    from?: string;
    image?: string;
    "kernel-args"?: string;
    allow?: string[];
    secret?: string[];
    on?: string[];
    node?: string;
    restart?: "always" | "never";
    "checkpoint-every"?: string;
  };
type Policy = GlobalArgs & {
  name: string;
  allow?: string[];
  deny?: string[];
  secret?: string[];
  "no-secret"?: string[];
  unlisted?: "deny" | "ask";
  "approval-timeout"?: string;
};

/** --approval-timeout: 90s, 10m, 2h, in ms. */
function approvalTimeout(s: string): number {
  const m = /^(\d+)(s|m|h)$/.exec(s.trim());
  if (!m)
    throw new HutchError("invalid", `--approval-timeout ${s}: expected a duration like 90s, 10m or 2h`, "e.g. --approval-timeout 10m");
  return Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[m[2] as "s" | "m" | "h"];
}

/** A lifecycle verb over many boxes, one request each, with an idempotency key of its own. */
const lifecycle = (
  verb: string,
  aliases: string[],
  describe: string,
  done: string,
  method: "POST" | "DELETE",
  action: string,
  /** A progress line on stderr before each box, for verbs that take a while ({} is the box). */
  progress?: string,
) =>
  command<Names>({
    command: `${verb} <names..>`,
    aliases,
    describe,
    positionals: { names: { describe: "box names or ids" } },
    run: async (a) => {
      const d = await connectDaemon(a.home);
      await eachBox(a, done, (n, key) => {
        if (progress) process.stderr.write(`${progress.replace("{}", n)}\n`);
        return d.request(method, `/v1/boxes/${encodeURIComponent(n)}${action}`, undefined, { idempotencyKey: key });
      });
    },
  });

export const box = body<GlobalArgs>({
  demand: "name a box command",
  commands: [
    command<Create>({
      command: "create <name>",
      describe: "create a box (stopped unless --start)",
      positionals: { name: { describe: "lowercase letters, digits and dashes" } },
      options: {
        engine: {
          type: "string",
          choices: ENGINE_NAMES,
          defaultDescription: "process, or qemu with --image",
          describe: "process: a namespace sandbox; qemu: a VM with its own kernel",
        },
        start: { type: "boolean", default: false, describe: "start it once created" },
        from: { type: "string", describe: "fork: start with the files of this snapshot (snap_…); the box gets its own identity" },
        ...LIMIT_OPTIONS,
        image: { type: "string", describe: "VM: image name (default: default)" },
        "kernel-args": { type: "string", describe: "VM: extra kernel command line (debugging a boot)" },
        allow: {
          type: "string",
          array: true,
          describe: "egress: a host[:port] the box may CONNECT to (repeatable; *.domain for subdomains)",
        },
        secret: {
          type: "string",
          array: true,
          describe: "egress: a binding whose credential the broker injects (anthropic, openai, github, or one from config.json)",
        },
        on: {
          type: "string",
          array: true,
          describe: "fleet: run it on a server with this label (KEY=VALUE, repeatable; hutch serve --label)",
        },
        node: { type: "string", describe: "fleet: run it on this server (hutch cluster nodes lists them)" },
        restart: {
          type: "string",
          choices: ["always", "never"],
          describe: "fleet: always: when its server dies, make it again on another from its latest checkpoint (default never)",
        },
        "checkpoint-every": { type: "string", describe: "take a snapshot of it this often while it runs (30s, 10m, 1h): its checkpoint" },
      },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const place = { ...(a.on?.length ? { on: parseLabels(a.on, "--on") } : {}), ...(a.node ? { node: a.node } : {}) };
        const vm = {
          ...limitsOf(a),
          ...(a.image ? { image: a.image } : {}),
          ...(a["kernel-args"] ? { kernelArgs: a["kernel-args"] } : {}),
        };
        const egress = { ...(a.allow?.length ? { allow: a.allow } : {}), ...(a.secret?.length ? { secrets: a.secret } : {}) };
        const keep = {
          ...(a.restart ? { restart: a.restart } : {}),
          ...(a["checkpoint-every"] ? { checkpointEvery: a["checkpoint-every"] } : {}),
        };
        const box = await d.request<Box>(
          "POST",
          "/v1/boxes",
          {
            name: a.name,
            engine: a.engine ?? (a.image ? "qemu" : "process"),
            start: a.start,
            ...(a.from ? { from: a.from } : {}),
            ...vm,
            ...egress,
            ...place,
            ...keep,
          },
          { idempotencyKey: crypto.randomUUID() },
        );
        if (a.json) printJson(box);
        else process.stdout.write(`created ${box.name} (${box.id}), ${box.state}\n`);
      },
    }),
    command<GlobalArgs & LimitArgs & { name: string }>({
      command: "set <name>",
      describe: "change a stopped box's limits (applied when it next starts), or when it sleeps by itself (at once)",
      options: LIMIT_OPTIONS,
      examples: [["$0 box set web --memory 8G --disk 40G", "more room for a stopped box"]],
      run: async (a) => {
        const change = limitsOf(a);
        if (Object.keys(change).length === 0)
          throw new HutchError("invalid", "name a limit to change", "e.g. hutch box set NAME --memory 8G (see: hutch box set --help)");
        const d = await connectDaemon(a.home);
        const box = await d.request<Box>("PATCH", `/v1/boxes/${encodeURIComponent(a.name)}`, change);
        if (a.json) printJson(box);
        else
          process.stdout.write(
            Object.keys(change).every((k) => k === "sleepAfter" || k === "maxAwake")
              ? `${box.name}: sleep settings changed\n`
              : `${box.name}: limits changed; they apply when it next starts\n`,
          );
      },
    }),
    command<GlobalArgs & { name: string; to?: string }>({
      command: "move <name>",
      describe: "fleet: move a box to another server (a snapshot carries its files; admin)",
      options: { to: { type: "string", describe: "the server to move it to (default: the one placement picks)" } },
      examples: [["$0 box move web --to b", "web runs on server b afterwards"]],
      run: async (a) => {
        const { op } = await import("./op.ts");
        const { BoxMoveResult } = await import("@hutch/shared");
        const r = await op(a, `/v1/fleet/boxes/${encodeURIComponent(a.name)}/move`, a.to ? { to: a.to } : {}, BoxMoveResult);
        if (!a.json) process.stdout.write(`moved ${r.box} from ${r.from} to ${r.to} in ${(r.ms / 1000).toFixed(1)} s (epoch ${r.epoch})\n`);
      },
    }),
    lifecycle("start", [], "start boxes", "started", "POST", "/start"),
    lifecycle("stop", [], "stop boxes (graceful, then forced)", "stopped", "POST", "/stop"),
    lifecycle("pause", [], "freeze running VM boxes", "paused", "POST", "/pause"),
    lifecycle("resume", [], "thaw paused boxes", "resumed", "POST", "/resume"),
    lifecycle(
      "sleep",
      [],
      "put running boxes to sleep: their state to disk, no process left",
      "asleep",
      "POST",
      "/sleep",
      "putting {} to sleep…",
    ),
    lifecycle("wake", [], "wake asleep boxes with their programs running", "awake", "POST", "/wake", "waking {}…"),
    lifecycle("delete", ["rm"], "delete boxes and everything in them", "deleted", "DELETE", ""),
    command<GlobalArgs>({
      command: "list",
      aliases: ["ls"],
      describe: "list boxes",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const boxes = await d.request<Box[]>("GET", "/v1/boxes");
        if (a.json) return printJson(boxes);
        await print(
          boxes.length === 0
            ? "no boxes; create one: hutch box create NAME --start\n"
            : boxes.some((b) => b.server)
              ? // A fleet's server lists every server's boxes: which one runs each.
                table([
                  ["NAME", "STATE", "ENGINE", "ISOLATION", "SERVER", "ID"],
                  ...boxes.map((b) => boxLine(b).toSpliced(4, 0, b.server ?? "-")),
                ])
              : table([["NAME", "STATE", "ENGINE", "ISOLATION", "ID"], ...boxes.map(boxLine)]),
        );
      },
    }),
    command<GlobalArgs & { name: string }>({
      command: "info <name>",
      describe: "show one box",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const box = await d.request<Box>("GET", `/v1/boxes/${encodeURIComponent(a.name)}`);
        if (a.json) printJson(box);
        else await print(boxDetails(box));
      },
    }),
    command<Policy>({
      command: "policy <name>",
      describe: "show or change what a box may reach (applies at once, also while it runs)",
      options: {
        allow: { type: "string", array: true, describe: "add host[:port] to the allowlist" },
        deny: { type: "string", array: true, describe: "remove host[:port] from the allowlist" },
        secret: { type: "string", array: true, describe: "enable a binding" },
        "no-secret": { type: "string", array: true, describe: "disable a binding" },
        unlisted: {
          type: "string",
          choices: ["deny", "ask"],
          describe: "a host off the allowlist: refused (deny), or held until a person answers in hutch approvals (ask)",
        },
        "approval-timeout": { type: "string", describe: "how long this box's approvals wait for a person (default 10m)" },
      },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const path = `/v1/boxes/${encodeURIComponent(a.name)}/policy`;
        const change = {
          ...(a.allow ? { allow: a.allow } : {}),
          ...(a.deny ? { deny: a.deny } : {}),
          ...(a.secret ? { bindings: a.secret } : {}),
          ...(a["no-secret"] ? { unbind: a["no-secret"] } : {}),
          ...(a.unlisted ? { unlisted: a.unlisted } : {}),
          ...(a["approval-timeout"] ? { approvalTimeoutMs: approvalTimeout(a["approval-timeout"]) } : {}),
        };
        const policy = await d.request<BoxPolicy>(
          Object.keys(change).length > 0 ? "PATCH" : "GET",
          path,
          Object.keys(change).length > 0 ? change : undefined,
        );
        if (a.json) return printJson(policy);
        process.stdout.write(
          `allow:    ${policy.allow.join(" ") || (policy.unlisted === "ask" ? "(nothing listed)" : "(nothing: all egress is denied)")}\nbindings: ${policy.bindings.join(" ") || "(none)"}\nunlisted: ${policy.unlisted === "ask" ? "ask (held for hutch approvals)" : "deny"}\n${policy.approvalTimeoutMs ? `approvals wait: ${policy.approvalTimeoutMs / 1000} s\n` : ""}`,
        );
      },
    }),
    command<GlobalArgs & { name: string; all: boolean; limit: number }>({
      command: "egress <name>",
      describe: "recent egress the broker denied (--all: every decision)",
      options: {
        all: { type: "boolean", default: false, describe: "also allowed and injected requests" },
        limit: { type: "number", default: 50, describe: "how many, newest last (max 1000)" },
      },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const q = new URLSearchParams({ limit: String(a.limit), ...(a.all ? {} : { decision: "denied" }) });
        const records = await d.request<EgressRecord[]>("GET", `/v1/boxes/${encodeURIComponent(a.name)}/egress?${q}`);
        if (a.json) return printJson(records);
        if (records.length === 0) return void process.stdout.write(a.all ? "no egress yet\n" : "nothing denied recently\n");
        process.stdout.write(
          table([
            ["AT", "DECISION", "TARGET", "STATUS", "REASON"],
            ...records.map((r) => [
              r.at,
              r.decision,
              `${r.binding ? `${r.binding}:` : ""}${r.host || "?"}:${r.port}${r.path ? ` ${r.method ?? ""} ${r.path}` : ""}`,
              String(r.status ?? ""),
              r.reason ?? "",
            ]),
          ]),
        );
      },
    }),
    command<GlobalArgs & { name: string; with: string; read: boolean; drive: boolean; revoke: boolean }>({
      command: "share <name>",
      describe: "share a box with another user of this server: --read (watch, annotate) or --drive (also exec, attach, send)",
      options: {
        with: { type: "string", describe: "the user to share it with" },
        read: { type: "boolean", default: false, describe: "watch and annotate its sessions" },
        drive: { type: "boolean", default: false, describe: "also exec, attach, send, start and stop" },
        revoke: { type: "boolean", default: false, describe: "stop sharing it with --with USER" },
      },
      run: async (a) => {
        if (!a.with)
          throw new HutchError("invalid", "hutch box share needs --with USER", `e.g. hutch box share ${a.name} --with bob --read`);
        const path = `/v1/boxes/${encodeURIComponent(a.name)}/shares`;
        const d = await connectDaemon(a.home);
        if (a.revoke) {
          const r = await d.request("DELETE", `${path}/${encodeURIComponent(a.with)}`);
          if (a.json) return printJson(r);
          return void process.stdout.write(`${a.name} is no longer shared with ${a.with}\n`);
        }
        if (a.read === a.drive)
          throw new HutchError("invalid", "say one of --read or --drive", `e.g. hutch box share ${a.name} --with ${a.with} --read`);
        const r = await d.request("PUT", path, { user: a.with, mode: a.drive ? "drive" : "read" });
        if (a.json) return printJson(r);
        process.stdout.write(`${a.name} shared with ${a.with} to ${a.drive ? "drive" : "read"}\n`);
      },
    }),
  ],
});
