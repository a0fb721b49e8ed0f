// The CLI: the verb table, and the one place where parsing, help, completion
// and errors meet. A verb's file declares its flags and calls into client/
// (`hutch daemon` starts the daemon in-process); it is loaded only when that
// verb runs, or its help or completions are asked for, so `hutch --version`
// evaluates this file and ./args.ts and little else.
import { HUTCH_VERSION } from "@hutch/shared/base";
import { configureLog } from "../log.ts";
import { completionScript, completions, helpText, parse, type Command } from "./args.ts";
import { exitCode, report } from "./exit.ts";

/** The whole command tree; verbs load their bodies when needed. */
export const ROOT: Command = {
  command: "hutch",
  describe: "hutch: run coding agents in isolated boxes\n\nUsage: hutch <command> [options]",
  demand: "name a command",
  options: {
    json: { type: "boolean", default: false, describe: "print one JSON document (NDJSON for streams) on stdout" },
    // Its default is read once a verb runs (../env.ts): --version and --help need no environment.
    home: { type: "string", describe: "state directory ($HUTCH_HOME)", defaultDescription: "$HUTCH_HOME or ~/.local/share/hutch" },
    remote: {
      type: "string",
      describe: "talk to this remote (hutch remote list) instead of the local daemon; local: the local one",
      defaultDescription: "$HUTCH_REMOTE or the default remote",
    },
    "log-level": { type: "string", choices: ["debug", "info", "warn", "error"], describe: "log verbosity (stderr)" },
    "log-format": { type: "string", choices: ["text", "json"], describe: "log line format" },
  },
  commands: [
    {
      command: "run [box]",
      describe:
        "start a session: a shell or a coding agent in a box (a new box when none is named); attach, or with --prompt run one headless turn",
      load: () => import("./run.ts").then((m) => m.run),
    },
    {
      command: "session <command>",
      describe: "durable session logs: list, read, watch, drive, annotate, attach",
      load: () => import("./session.ts").then((m) => m.session),
    },
    {
      command: "agent <command>",
      describe:
        "agent CLIs: list what the daemon has installed, install the pinned versions (npm, on the daemon's host, shared read-only with boxes)",
      load: () => import("./agent.ts").then((m) => m.agent),
    },
    {
      command: "box <command>",
      describe: "create, start, stop, delete and inspect boxes",
      load: () => import("./box.ts").then((m) => m.box),
    },
    {
      command: "exec <box> [cmd..]",
      describe: "run a command in a box; stdin, stdout, stderr and the exit code pass through (put the command after --)",
      load: () => import("./exec.ts").then((m) => m.exec),
    },
    {
      command: "cp <src> <dst>",
      describe: "copy files or directories into or out of a box (BOX:/path names the box side)",
      load: () => import("./cp.ts").then((m) => m.cp),
    },
    {
      command: "offload",
      describe: "hand this git work tree (commits, staged, unstaged and untracked work, minus secrets) to a box",
      load: () => import("./offload.ts").then((m) => m.offload),
    },
    {
      command: "bring-back <box>",
      describe: "bring a box's commits and uncommitted work home: fast-forward, an uncommitted merge, or a branch",
      load: () => import("./bring-back.ts").then((m) => m.bringBack),
    },
    {
      command: "dispatch [args..]",
      describe:
        "give one task to k agents in forked boxes, grade each with a check it cannot edit, keep the winner (status ID, list, cancel ID)",
      load: () => import("./dispatch.ts").then((m) => m.dispatch),
    },
    {
      command: "schedule <command>",
      describe: "headless agent turns in a box on a cron expression or once at a time: add, list, info, rm, pause, resume, run",
      load: () => import("./schedule.ts").then((m) => m.schedule),
    },
    {
      command: "pty <command>",
      describe: "terminals owned by a box: list, attach, kill",
      load: () => import("./pty.ts").then((m) => m.pty),
    },
    {
      command: "doctor",
      describe: "find out what the daemon's host can run, by trying it, and how to fix each gap",
      load: () => import("./doctor.ts").then((m) => m.doctor),
    },
    {
      command: "serve",
      describe: "run the daemon and serve it on TLS TCP to remote CLIs and IDEs (tokens: hutch user add, hutch token create)",
      load: () => import("./serve.ts").then((m) => m.serve),
    },
    {
      command: "service <command>",
      describe: "install or remove the systemd unit that runs hutch serve at boot",
      load: () => import("./service.ts").then((m) => m.service),
    },
    {
      command: "cluster <command>",
      describe: "a fleet of servers on one NATS JetStream cluster: init (its snapshot store and key), nodes (the live servers)",
      load: () => import("./cluster.ts").then((m) => m.cluster),
    },
    {
      command: "fleet <command>",
      describe: "the fleet this server belongs to: events (boxes and servers, from a seq, following)",
      load: () => import("./fleet.ts").then((m) => m.fleet),
    },
    {
      command: "node <command>",
      describe: "the fleet's servers: list, cordon, uncordon, drain (admin)",
      load: () => import("./node.ts").then((m) => m.node),
    },
    {
      command: "pool <command>",
      describe: "warm pools: sleeping, booted boxes of an image each server keeps ready for box create (set, list, clear)",
      load: () => import("./pool.ts").then((m) => m.pool),
    },
    {
      command: "user <command>",
      describe: "server mode's users: add, list (on the server, or with an admin token)",
      load: () => import("./user.ts").then((m) => m.user),
    },
    {
      command: "token <command>",
      describe: "server mode's tokens: create (prints a join string), list, revoke",
      load: () => import("./token.ts").then((m) => m.token),
    },
    {
      command: "remote <command>",
      describe: "servers this client talks to: add (join), list, rm, default, pin",
      load: () => import("./remote.ts").then((m) => m.remote),
    },
    {
      command: "daemon",
      describe: "run the daemon in the foreground (other verbs start it when needed)",
      load: () => import("./daemon.ts").then((m) => m.daemon),
    },
    {
      command: "image <command>",
      describe: "build, list, import and remove the VM images QEMU boxes boot",
      load: () => import("./image.ts").then((m) => m.image),
    },
    {
      command: "snapshot <command>",
      describe: "encrypted, deduplicated snapshots of boxes: create, list (the timeline), browse, diff, restore, prune, check",
      load: () => import("./snapshot.ts").then((m) => m.snapshot),
    },
    {
      command: "port <command>",
      describe: "ports in a box: list what listens, forward [LOCAL:]REMOTE to this machine's loopback, or --auto",
      load: () => import("./port.ts").then((m) => m.port),
    },
    {
      command: "browser <command>",
      describe: "the box's Chromium: open, snapshot (ref-tagged), click, type, press, wait, screenshot",
      load: () => import("./browser.ts").then((m) => m.browserVerb),
    },
    {
      command: "desktop <command>",
      describe: "the box's X desktop: start, screenshot, windows, move, click, drag, key, type, release",
      load: () => import("./desktop.ts").then((m) => m.desktopVerb),
    },
    {
      command: "secret <command>",
      describe: "credentials the broker injects for boxes (sealed at rest; boxes never see them)",
      load: () => import("./secret.ts").then((m) => m.secret),
    },
    {
      command: "approvals",
      describe: "what boxes asked a person to approve (credentialed requests, unlisted hosts); --watch to follow",
      load: () => import("./approvals.ts").then((m) => m.approvals),
    },
    {
      command: "approve <id>",
      describe: "allow what an approval asked, once (--always: again without asking)",
      load: () => import("./approvals.ts").then((m) => m.approve),
    },
    {
      command: "deny <id>",
      describe: "refuse what an approval asked; the box is told the --reason",
      load: () => import("./approvals.ts").then((m) => m.deny),
    },
    {
      command: "mcp",
      describe: "an MCP server on stdin/stdout: box lifecycle, exec, files, ports and the browser as tools for any agent",
      load: () => import("./mcp.ts").then((m) => m.mcp),
    },
    {
      command: "acp",
      describe: "an Agent Client Protocol agent on stdin/stdout: editors (Zed, JetBrains, Neovim) run agent sessions in boxes",
      load: () => import("./acp.ts").then((m) => m.acp),
    },
    {
      command: "ide",
      describe: "the IDE bridge: JSON-RPC with LSP framing on stdin/stdout (the VS Code extension starts it)",
      load: () => import("./ide.ts").then((m) => m.ide),
    },
    {
      command: "completion",
      describe: "print a shell completion script (bash/zsh): hutch completion >> ~/.bashrc",
      run: () => void process.stdout.write(completionScript("hutch")),
    },
  ],
};

export async function runCli(argv: string[]): Promise<number> {
  // Before parsing, so a usage error comes in the shape asked for; what follows `--` is the box's.
  let json = (argv.includes("--") ? argv.slice(0, argv.indexOf("--")) : argv).includes("--json");
  try {
    // The completion script's question: the words typed so far, answered with one candidate a line.
    if (argv[0] === "__complete") {
      for (const c of await completions(ROOT, argv.slice(1))) process.stdout.write(`${c}\n`);
      return 0;
    }
    const p = await parse(ROOT, argv);
    json = p.args.json === true;
    if (p.version) {
      // console.log, not process.stdout: building that stream costs a program this small ~8 ms (client/tty.ts).
      console.log(HUTCH_VERSION);
      return 0;
    }
    if (p.help) {
      process.stdout.write(helpText(p.path, Math.min(100, process.stdout.columns || 100)));
      return 0;
    }
    const { env } = await import("../env.ts");
    p.args.home ??= env.home();
    // Read where the daemon is chosen (client/remotes.ts), and inherited by what a verb starts (attach, the IDE bridge).
    if (typeof p.args.remote === "string") env.setRemote(p.args.remote);
    configureLog({
      level: (p.args["log-level"] as string | undefined) ?? env.logLevel(),
      format: (p.args["log-format"] as string | undefined) ?? env.logFormat(),
    });
    await p.path.at(-1)!.run!(p.args);
    return exitCode();
  } catch (err) {
    return report(err, json);
  }
}
