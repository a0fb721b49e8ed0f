// `hutch fleet`: what the fleet a server belongs to did, through that server
// (its local socket, or a remote with an admin token): `fleet events`.
import { HutchError } from "@hutch/shared/base";
import type { FleetEvent } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { body, command, type GlobalArgs } from "./args.ts";

type EventsArgs = GlobalArgs & { from: number; follow: boolean };

function line(e: FleetEvent): string {
  const what = e.box ? `${e.box.name} (${e.box.id}) ${e.box.state}` : "";
  return `${e.seq}  ${e.at}  ${e.kind.padEnd(12)} ${e.node}${what ? `  ${what}` : ""}\n`;
}

export const fleet = body<GlobalArgs>({
  demand: "name a fleet command",
  commands: [
    command<EventsArgs>({
      command: "events",
      describe: "the fleet's events: boxes made, changing state and deleted on each server; servers joining and leaving",
      options: {
        from: { type: "number", default: 0, describe: "start at this event's seq (the first column; 0: the oldest kept, a week)" },
        follow: { alias: "f", type: "boolean", default: false, describe: "keep printing new events as they happen" },
      },
      examples: [["$0 fleet events --from 120 --follow", "resume after event 119 and follow"]],
      run: async (a) => {
        if (!Number.isInteger(a.from) || a.from < 0)
          throw new HutchError("invalid", `--from ${a.from}: a seq, 0 or more`, "e.g. --from 120");
        const d = await connectDaemon(a.home);
        const res = await d.transport.fetch(`/v1/fleet/events?from=${a.from}&follow=${a.follow}`, { headers: d.headers });
        if (res.status === 404)
          throw new HutchError(
            "not_found",
            "this server is not one of a fleet",
            "start servers with hutch serve --cluster URLS --node NAME",
          );
        if (!res.ok) throw HutchError.fromBody(await res.json().catch(() => undefined), res.status);
        const dec = new TextDecoder();
        let rest = "";
        for await (const chunk of res.body as ReadableStream<Uint8Array>) {
          rest += dec.decode(chunk, { stream: true });
          for (let nl = rest.indexOf("\n"); nl >= 0; nl = rest.indexOf("\n")) {
            const e = JSON.parse(rest.slice(0, nl)) as FleetEvent;
            rest = rest.slice(nl + 1);
            // NDJSON: one event a line, as session log --json.
            if (a.json) process.stdout.write(`${JSON.stringify(e)}\n`);
            else process.stdout.write(line(e));
          }
        }
      },
    }),
  ],
});
