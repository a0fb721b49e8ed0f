// `hutch node`: the fleet's servers through the server this client talks to
// (its local socket, or a remote with an admin token): list, cordon,
// uncordon, drain.
import { HutchError } from "@hutch/shared/base";
import { type FleetNodeRow, NodeDrainResult } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { op } from "./op.ts";
import { printJson, table } from "./output.ts";

type NodeArgs = GlobalArgs & { name: string };

const notFleet = (err: unknown) => {
  if (err instanceof HutchError && err.code === "not_found" && /\/v1\/fleet/.test(err.message))
    throw new HutchError("not_found", "this server is not one of a fleet", "start servers with hutch serve --cluster URLS --node NAME");
  throw err;
};

function rows(list: FleetNodeRow[]): string {
  return table([
    ["NAME", "STATUS", "BOXES", "CPUS", "MEMORY", "LABELS", "LISTEN"],
    ...list.map((r) => [
      `${r.node.name}${r.leader ? " *" : ""}`,
      r.cordoned ? "cordoned" : "ready",
      String(r.boxes),
      String(r.node.cpus ?? "-"),
      r.node.memoryMiB !== undefined ? `${Math.round(r.node.memoryMiB / 1024)}G` : "-",
      Object.entries(r.node.labels ?? {})
        .map(([k, v]) => `${k}=${v}`)
        .join(",") || "-",
      r.node.listen,
    ]),
  ]);
}

const cordon = (verb: "cordon" | "uncordon", describe: string) =>
  command<NodeArgs>({
    command: `${verb} <name>`,
    describe,
    run: async (a) => {
      const d = await connectDaemon(a.home);
      const r = await d.request<FleetNodeRow | null>("POST", `/v1/fleet/nodes/${encodeURIComponent(a.name)}/${verb}`).catch(notFleet);
      if (a.json) return printJson(r);
      process.stdout.write(`${a.name} ${verb === "cordon" ? "cordoned: it takes no new boxes" : "uncordoned: it takes boxes again"}\n`);
    },
  });

export const node = body<GlobalArgs>({
  demand: "name a node command",
  commands: [
    command<GlobalArgs>({
      command: "list",
      aliases: ["ls"],
      describe: "the fleet's live servers: cordoned or ready, their boxes, what they have (* leads the reconcile loop)",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const list = await d.request<FleetNodeRow[]>("GET", "/v1/fleet/nodes").catch(notFleet);
        if (a.json) return printJson(list);
        process.stdout.write(rows(list));
      },
    }),
    cordon("cordon", "stop placing new boxes on a server (its boxes keep running)"),
    cordon("uncordon", "let a cordoned server take new boxes again"),
    command<NodeArgs>({
      command: "drain <name>",
      describe: "cordon a server and move every box it runs to the others (a snapshot carries each)",
      run: async (a) => {
        const r = await op(a, `/v1/fleet/nodes/${encodeURIComponent(a.name)}/drain`, {}, NodeDrainResult);
        if (a.json) return;
        for (const m of r.moved) process.stdout.write(`moved ${m.box} to ${m.to} (${(m.ms / 1000).toFixed(1)} s)\n`);
        for (const f of r.failed) process.stderr.write(`hutch: ${f.box} stays on ${r.node}: ${f.error}\n`);
        if (r.failed.length > 0)
          throw new HutchError(
            "failed",
            `${r.failed.length} box(es) could not be moved off ${r.node}`,
            `see above, then: hutch node drain ${r.node}`,
          );
      },
    }),
  ],
});
