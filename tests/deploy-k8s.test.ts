// deploy/kubernetes, checked without a cluster (kubectl's dry runs need an
// API server to map kinds and fetch its schema; there is none here). Every
// manifest against its kind's schema: the Kubernetes OpenAPI as
// kubernetes-models compiles it (types, required fields, formats; a field
// of no schema passes). Then the wiring no schema knows: the DaemonSet's
// arguments as hutch's own parser reads them, the NATS Service they name,
// the key's Secret, /dev/kvm, the probes' port, the Service, the
// kustomization, the entrypoint's cgroup layout, and every hutch command the
// README shows.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { DaemonSet, type IDaemonSet } from "kubernetes-models/apps/v1";
import { type INetworkPolicy, NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { type IService, Namespace, Service, ServiceAccount } from "kubernetes-models/v1";
import { FLEET_NODE_NAME } from "../shared/src/fleet.ts";
import { parse, parseLabels } from "../host/src/cli/args.ts";
import { ROOT } from "../host/src/cli/main.ts";
import { parseListen } from "../host/src/cli/serve.ts";
import { planCgroups } from "../host/src/engine/cgroup.ts";
import { parseClusterUrls } from "../host/src/fleet/urls.ts";

const DIR = join(import.meta.dir, "..", "deploy", "kubernetes");
const text = (name: string) => readFileSync(join(DIR, name), "utf8");
const yaml = (name: string) => Bun.YAML.parse(text(name));

/** Helm values and kustomize's own file: YAML, but no Kubernetes object. */
const NOT_MANIFESTS = ["nats-values.yaml", "kustomization.yaml"];
const manifests = readdirSync(DIR)
  .filter((f) => f.endsWith(".yaml") && !NOT_MANIFESTS.includes(f))
  .sort();

/** Each kind these manifests use, by apiVersion/kind, with its schema's validator. */
const MODELS: Record<string, (doc: object) => { validate(): void }> = {
  "v1/Namespace": (d) => new Namespace(d as Namespace),
  "v1/ServiceAccount": (d) => new ServiceAccount(d as ServiceAccount),
  "v1/Service": (d) => new Service(d as IService),
  "apps/v1/DaemonSet": (d) => new DaemonSet(d as IDaemonSet),
  "networking.k8s.io/v1/NetworkPolicy": (d) => new NetworkPolicy(d as INetworkPolicy),
};

interface Doc {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}
const docs: [string, Doc][] = manifests.flatMap((f) => {
  const parsed = yaml(f);
  return (Array.isArray(parsed) ? parsed : [parsed]).map((d) => [f, d as Doc] as [string, Doc]);
});
const only = <T>(kind: string): T => {
  const found = docs.filter(([, d]) => d.kind === kind);
  expect(found.length, kind).toBe(1);
  return found[0]![1] as T;
};

const ds = only<IDaemonSet>("DaemonSet");
const pod = ds.spec!.template.spec!;
const hutch = pod.containers[0]!;
const values = yaml("nats-values.yaml") as {
  fullnameOverride: string;
  config: {
    nats?: { port?: number };
    cluster: { enabled: boolean; replicas: number };
    jetstream: { enabled: boolean; fileStore: { enabled: boolean; pvc: { enabled: boolean } } };
  };
};
/** The chart's client port when the values leave it (nats/nats 2.14.2, values.yaml: config.nats.port). */
const NATS_PORT = values.config.nats?.port ?? 4222;

/** The DaemonSet's arguments with each $(VAR) replaced, as the kubelet does, by a value of its kind. */
const EXAMPLES: Record<string, string> = { POD_IP: "10.244.1.7", NODE_NAME: "worker-1", HUTCH_ZONE: "eu-1" };
const expanded = (hutch.args ?? []).map((a) => a.replace(/\$\(([A-Z_]+)\)/g, (_, v: string) => EXAMPLES[v] ?? `$(${v})`));

const volume = (name: string) => pod.volumes?.find((v) => v.name === name);
const mountAt = (path: string) => hutch.volumeMounts?.find((m) => m.mountPath === path);
const envOf = (name: string) => hutch.env?.find((e) => e.name === name);
/** A container port by name or number, as a probe or a Service's targetPort names it. */
const portOf = (p: string | number | undefined) => (typeof p === "number" ? p : hutch.ports?.find((x) => x.name === p)?.containerPort);

describe("every manifest", () => {
  test.each(docs.map(([f, d]) => [f, d] as const))("%s validates against its kind's schema", (_, d) => {
    const model = MODELS[`${d.apiVersion}/${d.kind}`];
    expect(model, `${d.apiVersion} ${d.kind}: add its model to MODELS`).toBeDefined();
    expect(() => model!(d).validate()).not.toThrow();
  });

  test("the schemas catch what they should: a container port given as text", () => {
    const broken = structuredClone(ds);
    broken.spec!.template.spec!.containers[0]!.ports![0]!.containerPort = "8443" as unknown as number;
    expect(() => new DaemonSet(broken).validate()).toThrow(/containerPort must be integer/);
  });

  test("everything is in the namespace hutch", () => {
    for (const [f, d] of docs) expect(d.kind === "Namespace" ? d.metadata.name : d.metadata.namespace, f).toBe("hutch");
  });

  test("kustomization.yaml lists exactly the manifests, and renames the image the DaemonSet runs", () => {
    const k = yaml("kustomization.yaml") as { resources: string[]; images: { name: string }[] };
    expect([...k.resources].sort()).toEqual(manifests);
    expect(k.images.map((i) => i.name)).toEqual([hutch.image!.split(":")[0]!]);
  });

  test.skipIf(!Bun.which("kubectl"))("kubectl kustomize builds them (offline: it reads files only)", () => {
    const p = Bun.spawnSync(["kubectl", "kustomize", DIR], { stderr: "pipe" });
    expect(p.stderr.toString()).toBe("");
    const kinds = (Bun.YAML.parse(p.stdout.toString()) as Doc[]).map((d) => d.kind).sort();
    expect(kinds).toEqual(docs.map(([, d]) => d.kind).sort());
  });
});

describe("the DaemonSet runs hutch serve as hutch reads it", () => {
  test("the image's entrypoint runs hutch with the arguments, the first of them serve", () => {
    expect(hutch.command).toEqual(["/usr/local/bin/hutch-entrypoint"]);
    expect(hutch.args![0]).toBe("serve");
    const dockerfile = text("Dockerfile");
    expect(dockerfile).toContain("COPY --from=build /src/dist/hutch /usr/local/bin/hutch\n");
    expect(dockerfile).toContain("COPY deploy/kubernetes/entrypoint.sh /usr/local/bin/hutch-entrypoint\n");
    expect(text("entrypoint.sh").trimEnd().split("\n").at(-1)).toBe('exec hutch "$@"');
  });

  test("every $(VAR) in the arguments is the container's own variable (the kubelet leaves others as written)", () => {
    const used = [...(hutch.args ?? []).join(" ").matchAll(/\$\(([A-Za-z_]+)\)/g)].map((m) => m[1]!);
    expect(used.length).toBeGreaterThan(0);
    for (const v of used) {
      expect(envOf(v), v).toBeDefined();
      expect(EXAMPLES[v], `${v}: add an example value`).toBeDefined();
    }
    expect(envOf("NODE_NAME")?.valueFrom?.fieldRef?.fieldPath).toBe("spec.nodeName");
    expect(envOf("POD_IP")?.valueFrom?.fieldRef?.fieldPath).toBe("status.podIP");
  });

  test("hutch's parser takes the arguments, and its checks pass on what they give", async () => {
    const p = await parse(ROOT, expanded);
    expect(p.path.map((c) => c.command.split(" ")[0])).toEqual(["hutch", "serve"]);
    const a = p.args as { listen: string; cluster: string; node: string; "fleet-key": string; label: string[]; doctor: boolean };
    expect(parseListen(a.listen)).toEqual({ hostname: EXAMPLES.POD_IP!, port: portOf("https")! });
    expect(FLEET_NODE_NAME.test(a.node)).toBe(true);
    expect(parseLabels(a.label, "--label")).toEqual({ zone: EXAMPLES.HUTCH_ZONE! });
    expect(a.doctor).toBe(true);
    // Not 0.0.0.0: the listen URL is the one the other servers forward to (README.md).
    expect(hutch.args).toContain("$(POD_IP):8443");
  });

  test("--cluster is the client Service of the NATS release nats-values.yaml makes, in this namespace", async () => {
    const a = (await parse(ROOT, expanded)).args as { cluster: string };
    const ns = ds.metadata!.namespace!;
    expect(parseClusterUrls(a.cluster)).toEqual([`nats://${values.fullnameOverride}.${ns}.svc:${NATS_PORT}`]);
    // And the chart is installed into that namespace, as both files say.
    expect(text("nats-values.yaml")).toContain(`--namespace ${ns} --values deploy/kubernetes/nats-values.yaml`);
    expect(text("README.md")).toContain(`--namespace ${ns} --values deploy/kubernetes/nats-values.yaml`);
  });

  test("NATS: 3 clustered JetStream servers on volumes, for hutch's replicas of 3", () => {
    expect(values.config.cluster.enabled).toBe(true);
    expect(values.config.cluster.replicas).toBeGreaterThanOrEqual(3);
    expect(values.config.jetstream.enabled).toBe(true);
    expect(values.config.jetstream.fileStore.enabled).toBe(true);
    expect(values.config.jetstream.fileStore.pvc.enabled).toBe(true);
  });

  test("the fleet key is the Secret's one file, read-only, with no group or other bits (hutch refuses those)", async () => {
    const a = (await parse(ROOT, expanded)).args as { "fleet-key": string };
    const mount = mountAt(dirname(a["fleet-key"]));
    expect(mount?.readOnly).toBe(true);
    const secret = volume(mount!.name)?.secret;
    expect(secret?.secretName).toBe("hutch-fleet-key");
    expect(secret?.items).toEqual([{ key: "fleet.key", path: basename(a["fleet-key"]) }]);
    expect(secret!.defaultMode! & 0o077).toBe(0);
    expect(secret!.defaultMode! & 0o400).toBe(0o400);
  });

  test("$HUTCH_HOME is the node's /var/lib/hutch, and /dev/kvm is the node's device", () => {
    const home = mountAt(envOf("HUTCH_HOME")!.value!);
    expect(volume(home!.name)?.hostPath).toEqual({ path: "/var/lib/hutch", type: "DirectoryOrCreate" });
    const kvm = mountAt("/dev/kvm");
    expect(volume(kvm!.name)?.hostPath).toEqual({ path: "/dev/kvm", type: "CharDevice" });
    expect(hutch.securityContext?.privileged).toBe(true);
  });

  test("it runs only on nodes labelled for it, and tolerates that key's taint", () => {
    const [key] = Object.keys(pod.nodeSelector ?? {});
    expect(key).toBe("hutch.dev/kvm");
    expect(pod.tolerations?.some((t) => t.key === key && t.operator === "Exists" && t.effect === "NoSchedule")).toBe(true);
  });

  test("every probe is a TCP connect to the TLS port (an HTTP one would get 401 without a token)", async () => {
    const a = (await parse(ROOT, expanded)).args as { listen: string };
    const port = parseListen(a.listen).port;
    for (const probe of [hutch.startupProbe, hutch.readinessProbe, hutch.livenessProbe]) {
      expect(probe?.httpGet).toBeUndefined();
      expect(portOf(probe?.tcpSocket?.port)).toBe(port);
    }
  });
});

describe("around the DaemonSet", () => {
  const labels = ds.spec!.template.metadata!.labels!;

  test("the Service selects hutch's pods and sends each node's port to that node's server", () => {
    const svc = only<IService>("Service");
    for (const [k, v] of Object.entries(svc.spec!.selector!)) expect(labels[k]).toBe(v);
    expect(svc.spec!.type).toBe("NodePort");
    expect(svc.spec!.externalTrafficPolicy).toBe("Local");
    expect(svc.spec!.ports!.map((p) => portOf(p.targetPort))).toEqual([8443]);
  });

  test("the NetworkPolicy lets hutch's pods reach NATS's client port", () => {
    const np = only<INetworkPolicy>("NetworkPolicy");
    const client = np.spec!.ingress!.find((r) => r.ports?.some((p) => p.port === NATS_PORT));
    const from = client?.from?.[0]?.podSelector?.matchLabels ?? {};
    expect(Object.keys(from).length).toBeGreaterThan(0);
    for (const [k, v] of Object.entries(from)) expect(labels[k]).toBe(v);
  });

  test("the entrypoint's cgroup is one hutch takes as its own to delegate, not as the root group", () => {
    const group = /mkdir -p \/sys\/fs\/cgroup\/(\S+)/.exec(text("entrypoint.sh"))?.[1];
    expect(group).toBeDefined();
    const view = (self: string) => ({
      mountinfo: "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n",
      selfCgroup: `0::${self}\n`,
      pid: 1,
      uid: 0,
      writable: () => true,
      read: (p: string) => (p.endsWith("cgroup.controllers") ? "cpuset cpu io memory pids" : p.endsWith("cgroup.procs") ? "1" : null),
    });
    // Before it moves: hutch would turn controllers on in the container's own group, which holds hutch (EBUSY).
    expect(planCgroups(view("/")).memory).toEqual({ ok: true, version: 2, parent: "/sys/fs/cgroup/hutch" });
    const after = planCgroups(view(`/${group}`));
    for (const c of ["pids", "memory", "cpu"] as const)
      expect(after[c]).toEqual({
        ok: true,
        version: 2,
        parent: `/sys/fs/cgroup/${group}/boxes`,
        leaf: `/sys/fs/cgroup/${group}/daemon`,
      });
  });

  test("a node name with dots is refused by --node, as the README's known limits say", () => {
    expect(FLEET_NODE_NAME.test("ip-10-0-1-23.ec2.internal")).toBe(false);
    expect(text("README.md")).toContain("Node names with dots are refused");
  });
});

describe("the README's hutch commands", () => {
  // Lines of its code blocks that run hutch, directly or through kubectl exec; a trailing comment dropped.
  const commands = text("README.md")
    .split("```")
    .filter((_, i) => i % 2 === 1)
    .flatMap((block) => block.split("\n"))
    .map((l) => l.replace(/\s+#.*$/, "").trim())
    .map((l) => /(?:^|-- )hutch (.+)$/.exec(l)?.[1])
    .filter((c): c is string => c !== undefined);

  test("there are some", () => {
    expect(commands.length).toBeGreaterThanOrEqual(5);
  });

  test.each(commands.map((c) => [c]))("hutch %s parses", async (c) => {
    const p = await parse(ROOT, c.split(/\s+/));
    expect(p.path.length).toBeGreaterThan(1);
    const cluster = (p.args as { cluster?: string }).cluster;
    if (cluster !== undefined) expect(parseClusterUrls(cluster).length).toBe(1);
  });
});
