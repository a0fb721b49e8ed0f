import type { PortForwardLine } from "@hutch/shared";
import { HutchError } from "@hutch/shared/base";
import { connectDaemon } from "../client/daemon.ts";
import { autoForward, forward, listPorts, type Forward } from "../client/ports.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { printJson, table } from "./output.ts";

type BoxArg = GlobalArgs & { box: string };

/** `[LOCAL:]REMOTE`: the port in the box, and the one on this machine (default the same). */
export function parseForwardSpec(spec: string): { local: number; remote: number } {
  const m = /^(?:(\d{1,5}):)?(\d{1,5})$/.exec(spec);
  const remote = Number(m?.[2]);
  const local = m?.[1] === undefined ? remote : Number(m[1]);
  if (!m || !(remote >= 1 && remote <= 65535) || !(local >= 0 && local <= 65535))
    throw new HutchError("invalid", `port spec ${JSON.stringify(spec)}: expected [LOCAL:]REMOTE, ports 1-65535 (LOCAL 0: any free port)`);
  return { local, remote };
}

function announce(a: GlobalArgs, box: string, f: Forward, type: "forwarded" | "removed"): void {
  const line: PortForwardLine = { type, local: f.local, remote: f.remote, url: `http://127.0.0.1:${f.local}/` };
  if (a.json) process.stdout.write(`${JSON.stringify(line)}\n`);
  else process.stderr.write(`${type === "forwarded" ? "forwarding" : "stopped"} 127.0.0.1:${f.local} -> ${box}:${f.remote}\n`);
}

/** Until Ctrl-C or SIGTERM. */
function untilStopped(): Promise<void> {
  return new Promise((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
}

export const port = body<GlobalArgs>({
  demand: "name a port command",
  commands: [
    command<BoxArg>({
      command: "list <box>",
      aliases: ["ls"],
      describe: "the TCP ports listening in a box",
      run: async (a) => {
        const ports = await listPorts(await connectDaemon(a.home), a.box);
        if (a.json) return printJson(ports);
        process.stdout.write(
          ports.length === 0
            ? "nothing listens\n"
            : table([
                ["PORT", "ADDRESS", "PROCESS"],
                ...ports.map((p) => [String(p.port), p.address, p.process ? `${p.process.name} (${p.process.pid})` : "-"]),
              ]),
        );
      },
    }),
    command<BoxArg & { spec?: string; auto: boolean }>({
      command: "forward <box> [spec]",
      describe: "forward [LOCAL:]REMOTE from this machine's loopback into the box, or --auto every port it listens on; until Ctrl-C",
      options: { auto: { type: "boolean", default: false, describe: "follow the box's listeners: forward new ones, drop ones that stop" } },
      examples: [
        ["hutch port forward web 8000", "127.0.0.1:8000 here reaches port 8000 in box web"],
        ["hutch port forward web --auto --json", "one NDJSON line per forward added or removed"],
      ],
      run: async (a) => {
        if (!a.spec && !a.auto)
          throw new HutchError("invalid", "name a port ([LOCAL:]REMOTE) or pass --auto", `hutch port forward ${a.box} 8000`);
        const d = await connectDaemon(a.home);
        const stops: (() => Promise<void>)[] = [];
        if (a.spec) {
          const { local, remote } = parseForwardSpec(a.spec);
          const f = await forward(d, a.box, remote, local).catch((err: Error) => {
            throw new HutchError(
              "conflict",
              `cannot listen on 127.0.0.1:${local}: ${err.message}`,
              `pick another: hutch port forward ${a.box} 0:${remote}`,
            );
          });
          announce(a, a.box, f, "forwarded");
          stops.push(f.stop);
        }
        if (a.auto)
          stops.push(
            autoForward(d, a.box, {
              added: (f) => announce(a, a.box, f, "forwarded"),
              removed: (f) => announce(a, a.box, f, "removed"),
              failed: (p, err) => process.stderr.write(`cannot forward ${a.box}:${p}: ${err.message}\n`),
            }),
          );
        await untilStopped();
        for (const stop of stops) await stop();
      },
    }),
  ],
});
