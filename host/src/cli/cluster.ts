// `hutch cluster`: the fleet's operator verbs. They talk to the NATS cluster
// itself, not to a daemon: the fleet's store and node list are there, and
// init runs before any server of the fleet can start.
import { resolve } from "node:path";
import { HutchError } from "@hutch/shared/base";
import { defaultFleetKey } from "../fleet/key.ts";
import { parseClusterUrls } from "../fleet/urls.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { printJson, table } from "./output.ts";

type ClusterArgs = GlobalArgs & { cluster?: string };
type InitArgs = ClusterArgs & { "fleet-key"?: string };

const CLUSTER = {
  type: "string",
  describe: "the fleet's NATS JetStream cluster: nats://HOST:PORT, comma-separated",
} as const;

function urls(a: ClusterArgs, verb: string): string[] {
  if (a.cluster === undefined)
    throw new HutchError("invalid", `hutch cluster ${verb} needs --cluster`, `e.g. hutch cluster ${verb} --cluster nats://127.0.0.1:4222`);
  return parseClusterUrls(a.cluster);
}

export const cluster = body<GlobalArgs>({
  demand: "name a cluster command",
  commands: [
    command<InitArgs>({
      command: "init",
      describe: "make the fleet's snapshot store on the cluster, once, and write its key (copy it to every server)",
      options: {
        cluster: CLUSTER,
        "fleet-key": { type: "string", describe: "where to write the fleet key (default: $HUTCH_HOME/keys/fleet.key)" },
      },
      run: async (a) => {
        const servers = urls(a, "init");
        const keyFile = resolve(a["fleet-key"] ?? defaultFleetKey(a.home));
        const { initFleet } = await import("../fleet/index.ts");
        const made = await initFleet(a.home, servers, keyFile);
        if (a.json) return printJson({ ...made, keyFile });
        process.stdout.write(
          `made fleet snapshot store ${made.store} on the NATS cluster "${made.cluster}"; its key is ${keyFile}\n` +
            `copy that file to every server's $HUTCH_HOME/keys/fleet.key (chmod 600), keep a copy offline, then on each: hutch serve --cluster ${a.cluster} --node NAME\n`,
        );
      },
    }),
    command<ClusterArgs>({
      command: "nodes",
      describe: "list the fleet's live servers: name, address, version, last heartbeat",
      options: { cluster: CLUSTER },
      run: async (a) => {
        const { fleetNodes } = await import("../fleet/index.ts");
        const nodes = await fleetNodes(urls(a, "nodes"));
        if (a.json) return printJson(nodes);
        const now = Date.now();
        process.stdout.write(
          nodes.length === 0
            ? "no live nodes; start one: hutch serve --cluster URLS --node NAME\n"
            : table([
                ["NODE", "LISTEN", "VERSION", "SEEN"],
                ...nodes.map((n) => [n.name, n.listen, n.version, `${Math.max(0, Math.round((now - n.seen) / 1000))}s ago`]),
              ]),
        );
      },
    }),
  ],
});
