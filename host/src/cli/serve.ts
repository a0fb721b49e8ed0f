// `hutch serve`: the daemon, also on TLS TCP. Loads the daemon's code in-process, as `hutch daemon` does.
import { hostname } from "node:os";
import { resolve } from "node:path";
import { HutchError } from "@hutch/shared/base";
import { FLEET_NODE_NAME } from "@hutch/shared";
import { parseClusterUrls } from "../fleet/urls.ts";
import { defaultFleetKey } from "../fleet/key.ts";
import type { FleetOptions } from "../fleet/index.ts";
import { env } from "../env.ts";
import { body, type GlobalArgs, parseLabels } from "./args.ts";
import { setExitCode } from "./exit.ts";

type ServeArgs = GlobalArgs & {
  listen: string;
  cert?: string;
  key?: string;
  doctor: boolean;
  e2b?: string;
  "e2b-domain"?: string;
  cluster?: string;
  node?: string;
  "fleet-key"?: string;
  label?: string[];
  advertise?: string;
};

/** HOST:PORT, with [v6]:PORT for IPv6. */
export function parseListen(s: string): { hostname: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(s);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port < 1 || port > 65535)
    throw new HutchError("invalid", `--listen ${s}: expected HOST:PORT`, "e.g. --listen 127.0.0.1:8443 or --listen [::]:8443");
  return { hostname: (m[1] ?? m[2])!, port };
}

/** --cluster, --node and --fleet-key as the daemon's fleet options; none without --cluster. */
function fleetOptions(a: ServeArgs): FleetOptions | undefined {
  if (a.cluster === undefined) {
    const stray =
      a.node !== undefined
        ? "--node"
        : a["fleet-key"] !== undefined
          ? "--fleet-key"
          : a.label?.length
            ? "--label"
            : a.advertise !== undefined
              ? "--advertise"
              : null;
    if (stray) throw new HutchError("invalid", `${stray} goes with --cluster`, "add --cluster nats://HOST:PORT[,...], or drop it");
    return undefined;
  }
  const node = a.node ?? hostname().split(".")[0]!;
  if (!FLEET_NODE_NAME.test(node))
    throw new HutchError("invalid", `--node ${node}: letters, digits, - and _ (at most 64)`, "e.g. --node server-a");
  return {
    advertise: advertised(a),
    urls: parseClusterUrls(a.cluster),
    node,
    keyFile: resolve(a["fleet-key"] ?? defaultFleetKey(a.home)),
    labels: parseLabels(a.label ?? [], "--label"),
    writeTimeoutMs: env.clusterWriteTimeoutMs(),
  };
}

/**
 * Where the fleet's other servers reach this one (they forward requests for
 * its boxes there): --advertise, or the --listen address when it is one a
 * peer can dial; a wildcard (0.0.0.0, ::) is not, and is refused without it.
 */
function advertised(a: ServeArgs): string | undefined {
  const { hostname: host, port } = parseListen(a.listen);
  if (a.advertise !== undefined) {
    const m = /^https:\/\/(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.exec(a.advertise);
    if (!m)
      throw new HutchError(
        "invalid",
        `--advertise ${a.advertise}: expected https://HOST[:PORT]`,
        `e.g. --advertise https://10.0.0.1:${port}`,
      );
    return m[2] ? a.advertise : `${a.advertise}:${port}`;
  }
  if (host === "0.0.0.0" || host === "::")
    throw new HutchError(
      "invalid",
      `--listen ${a.listen} is every interface, which the fleet's other servers cannot dial to forward requests here`,
      `add --advertise https://THIS-SERVER'S-ADDRESS:${port}`,
    );
  return undefined;
}

export const serve = body<ServeArgs>({
  options: {
    listen: {
      type: "string",
      default: "127.0.0.1:8443",
      describe: "address and port to serve TLS on (HOST:PORT; 0.0.0.0 or [::] for every interface)",
    },
    cert: { type: "string", describe: "PEM certificate (chain) to present; default: a self-signed one kept in $HUTCH_HOME/keys" },
    key: { type: "string", describe: "PEM private key of --cert" },
    e2b: {
      type: "string",
      describe: "also serve the E2B API (the e2b SDK's control and in-box API) on HOST:PORT, TLS with the same certificate",
    },
    "e2b-domain": {
      type: "string",
      describe:
        "the domain sandboxes are reached under (PORT-SANDBOXID.DOMAIN, wildcard DNS to this server); default: the client's E2B_DOMAIN",
    },
    doctor: {
      type: "boolean",
      default: false,
      describe: "prove the host first (hutch doctor, in-process); refuse to serve when no engine works",
    },
    cluster: {
      type: "string",
      describe:
        "join a fleet on this NATS JetStream cluster (nats://HOST:PORT, comma-separated): snapshots go to the fleet's store (made once: hutch cluster init)",
    },
    node: { type: "string", describe: "this server's name in the fleet (with --cluster; default: the host name)" },
    "fleet-key": { type: "string", describe: "the fleet's snapshot key (with --cluster; default: $HUTCH_HOME/keys/fleet.key)" },
    advertise: {
      type: "string",
      describe:
        "with --cluster: the https://HOST[:PORT] the fleet's other servers reach this one at (needed when --listen is 0.0.0.0 or [::])",
    },
    label: {
      type: "string",
      array: true,
      describe: "a label of this server, KEY=VALUE (with --cluster; repeatable): box create --on KEY=VALUE places boxes here",
    },
  },
  examples: [
    [
      "hutch serve --listen 0.0.0.0:8443",
      "serve every interface with a self-signed certificate (its fingerprint is logged and in every join string)",
    ],
    ["hutch user add alice && hutch token create --user alice", "on the server: a user and the join string to hand them"],
    [
      "hutch serve --listen 0.0.0.0:8443 --cluster nats://10.0.0.1:4222,nats://10.0.0.2:4222 --node a",
      "one server of a fleet: snapshots taken here restore on every other (README: a fleet of servers)",
    ],
    [
      "hutch serve --e2b 127.0.0.1:8444",
      "the E2B API too: E2B_API_URL and E2B_SANDBOX_URL both https://127.0.0.1:8444, E2B_API_KEY a token",
    ],
  ],
  run: async (a) => {
    const listen = parseListen(a.listen);
    if (a["e2b-domain"] !== undefined && a.e2b === undefined)
      throw new HutchError("invalid", "--e2b-domain goes with --e2b", "add --e2b HOST:PORT, or drop --e2b-domain");
    if (a["e2b-domain"] !== undefined && !/^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/.test(a["e2b-domain"]))
      throw new HutchError("invalid", `--e2b-domain ${a["e2b-domain"]}: a DNS name`, "e.g. --e2b-domain e2b.lan");
    const e2b = a.e2b === undefined ? undefined : { ...parseListen(a.e2b), ...(a["e2b-domain"] ? { domain: a["e2b-domain"] } : {}) };
    const fleet = fleetOptions(a);
    const { runDaemon } = await import("../daemon/server.ts");
    setExitCode(
      await runDaemon(a.home, {
        ...listen,
        doctor: a.doctor,
        ...(e2b ? { e2b } : {}),
        ...(a.cert ? { cert: a.cert } : {}),
        ...(a.key ? { key: a.key } : {}),
        ...(fleet ? { fleet } : {}),
      }),
    );
  },
});
