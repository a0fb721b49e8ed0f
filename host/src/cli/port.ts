import type { PortForwardLine } from "@hutch/shared";
import { HutchError } from "@hutch/shared/base";
import { connectDaemon } from "../client/daemon.ts";
import { AUTO_FORWARD_MAX, autoForward, forward, listPorts, type Forward } from "../client/ports.ts";
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
  else process.stderr.write(`${type === "forwarded" ? "forwarding" : "stopped"} ${box}:${f.remote} -> 127.0.0.1:${f.local}\n`);
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
    command<BoxArg & { spec?: string; auto: boolean; "same-port": boolean; "max-forwards": number }>({
      command: "forward <box> [spec]",
      describe: "forward [LOCAL:]REMOTE from this machine's loopback into the box, or --auto every port it listens on; until Ctrl-C",
      options: {
        auto: {
          type: "boolean",
          default: false,
          describe: "follow the box's listeners: forward new ones (each from a free port here), drop ones that stop",
        },
        "same-port": {
          type: "boolean",
          default: false,
          describe: "with --auto: listen on the box's own port number here when nothing here holds it (else a free port)",
        },
        "max-forwards": {
          type: "number",
          default: AUTO_FORWARD_MAX,
          describe: "with --auto: the most ports forwarded at once; listeners past it wait for a slot",
        },
      },
      examples: [
        ["hutch port forward web 8000", "127.0.0.1:8000 here reaches port 8000 in box web"],
        ["hutch port forward web --auto --json", "one NDJSON line per forward added or removed, each from a free port here"],
        ["hutch port forward web --auto --same-port", "5432 in the box on 127.0.0.1:5432 here, when nothing here holds it"],
      ],
      run: async (a) => {
        if (!a.spec && !a.auto)
          throw new HutchError("invalid", "name a port ([LOCAL:]REMOTE) or pass --auto", `hutch port forward ${a.box} 8000`);
        if (a["same-port"] && !a.auto)
          throw new HutchError(
            "invalid",
            "--same-port is for --auto; a named port is already the one used here",
            `hutch port forward ${a.box} ${a.spec}`,
          );
        const max = a["max-forwards"];
        if (!(Number.isInteger(max) && max >= 1 && max <= 4096))
          throw new HutchError(
            "invalid",
            `--max-forwards ${max}: expected a whole number from 1 to 4096`,
            `hutch port forward ${a.box} --auto --max-forwards 64`,
          );
        const d = await connectDaemon(a.home);
        const stops: (() => Promise<void>)[] = [];
        if (a.spec) {
          const { local, remote } = parseForwardSpec(a.spec);
          const f = await forward(d, a.box, remote, local).catch((err: HutchError) => {
            throw new HutchError(err.code, err.message, `pick another: hutch port forward ${a.box} 0:${remote}`, err.data);
          });
          announce(a, a.box, f, "forwarded");
          stops.push(f.stop);
        }
        if (a.auto)
          stops.push(
            autoForward(
              d,
              a.box,
              {
                added: (f) => announce(a, a.box, f, "forwarded"),
                removed: (f) => announce(a, a.box, f, "removed"),
                samePortRefused: (p, why) =>
                  process.stderr.write(`not forwarding ${a.box}:${p} from the same port: ${why}; using a free port\n`),
                failed: (p, err) => process.stderr.write(`cannot forward ${a.box}:${p}: ${err.message}\n`),
                capped: (n, waiting) =>
                  process.stderr.write(
                    `reached the cap of ${n} forwards for ${a.box}; not forwarding ${waiting.length} more (${waiting.slice(0, 8).join(", ")}${waiting.length > 8 ? ", …" : ""}) until one stops; raise it with --max-forwards\n`,
                  ),
              },
              { samePort: a["same-port"], max },
            ),
          );
        await untilStopped();
        for (const stop of stops) await stop();
      },
    }),
  ],
});
