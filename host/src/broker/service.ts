// The broker: secrets sealed at rest, per-box policy and stubs, one gate per
// running box, and the relay that joins the box's loopback listener (over
// the agent channel) to that gate. Every decision is recorded.
import { connect } from "node:net";
import { rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { lookup } from "node:dns/promises";
import {
  Chan,
  HutchError,
  joinSocket,
  type Binding,
  type BoxPolicy,
  type EgressDecision,
  type EgressRecord,
  type HutchConfig,
  type MuxStream,
  type PolicyChangeBody,
  type SecretFindResult,
  type SecretInfo,
  type Actor,
  type ApprovalChoice,
} from "@hutch/shared";
import type { BrokerTables } from "../store/types.ts";
import type { Channel } from "../engine/channel.ts";
import { BOX_FILES } from "../paths.ts";
import { log } from "../log.ts";
import type { Sealer } from "./seal.ts";
import { loadConfig } from "../config.ts";
import { allBindings, bindingEnv } from "./bindings.ts";
import { findSecrets } from "./find.ts";
import { Gate, type EgressFacts, type GateApprovals, type GateLimits } from "./gate.ts";
import type { ApprovalService } from "../approval/service.ts";
import { hintOf } from "../approval/verdict.ts";
import { changePolicy } from "./policy.ts";
import { splicer } from "./splice.ts";
import { ConnCap, MAX_BOX_CONNS } from "./cap.ts";
import { brokerResponse } from "./http.ts";
import { Listeners } from "../listeners.ts";

const logger = log.create({ service: "broker" });

const systemLookup = (host: string) => lookup(host).then((r) => r.address);

/** Where processes in a box find the broker: the guest's loopback listener. */
export const BROKER_PORT = 3128;
export const BROKER_URL = `http://127.0.0.1:${BROKER_PORT}`;
/** Secrets are for headers: bounded, printable, single line. */
const MAX_SECRET = 16 * 1024;
/**
 * How long a connection refused over the cap stays open after its answer, so
 * the box reads the 503 before the guest closes the socket: a close with the
 * box's unread request still queued is a reset, which can discard the answer.
 */
const REFUSED_LINGER_MS = 1_000;

export interface BrokerLimits extends GateLimits {
  /** Connections one box may hold open through the relay (see cap.ts). */
  maxConns: number;
}

interface Running {
  gate: Gate;
  socketPath: string;
  channel: Channel;
  cap: ConnCap;
  listen?: MuxStream;
}

export class BrokerService {
  private readonly running = new Map<string, Running>();
  private config: { mtimeMs: number; value: HutchConfig } = { mtimeMs: -1, value: {} };
  /** Every decision (the daemon logs it into the box's open sessions). */
  readonly decisions = new Listeners<[boxId: string, decision: EgressDecision, facts: EgressFacts]>("egress decision");
  /** A box's policy changed (the fleet's directory carries it, so another server makes the box again with it). */
  readonly policyChanged = new Listeners<[boxId: string]>("policy change");
  private readonly limits: Partial<GateLimits>;
  private readonly maxConns: number;

  constructor(
    private readonly store: BrokerTables,
    private readonly sealer: Sealer,
    private readonly configPath: string,
    /** Name resolution for CONNECT (the system resolver; tests give names of their own). */
    private readonly lookup: (host: string) => Promise<string> = systemLookup,
    { maxConns = MAX_BOX_CONNS, ...gateLimits }: Partial<BrokerLimits> = {},
  ) {
    this.maxConns = maxConns;
    this.limits = gateLimits;
  }

  // ---- secrets ----
  //
  // Secrets belong to a user. The server's own (its local user's) are kept by
  // name; a remote user's under `user/name` (no secret name holds a `/`), and
  // a box reads only its owner's: one user's key never pays for another's box.

  /** Asking a person (host/src/approval); unwired, what needs asking is refused. */
  approvals?: ApprovalService;
  /** Who a box's own connection speaks as, when it tries to decide (the daemon wires its owner in). */
  boxActor: (boxId: string) => Actor = (boxId) => ({ kind: "agent", id: `box:${boxId}` });

  /** Whose secrets a box's bindings use: its owner, or null for the local user's (server mode wires this). */
  secretOwner: (boxId: string) => string | null = () => null;

  private key(name: string, owner?: string | null): string {
    return owner ? `${owner}/${name}` : name;
  }

  async setSecret(name: string, value: string, owner?: string | null): Promise<SecretInfo> {
    const trimmed = value.replace(/\r?\n$/, "");
    if (trimmed.length === 0)
      throw new HutchError("invalid", `secret "${name}" is empty`, `pipe the value in: printf %s "$VALUE" | hutch secret set ${name}`);
    if (trimmed.length > MAX_SECRET)
      throw new HutchError(
        "invalid",
        `secret "${name}" is longer than ${MAX_SECRET} bytes`,
        "secrets are credentials sent in a header; check what you piped in",
      );
    if (/[\x00-\x1f\x7f]/.test(trimmed))
      throw new HutchError(
        "invalid",
        `secret "${name}" contains control characters (a line break inside?)`,
        "a secret is one line; check what you piped in",
      );
    this.store.setSecret(this.key(name, owner), await this.sealer.seal(new TextEncoder().encode(trimmed)));
    logger.info("secret set", { name, ...(owner ? { owner } : {}) });
    return this.secretInfo(name, owner)!;
  }

  /** The owner's secrets (null: the local user's), by their own names. */
  listSecrets(owner?: string | null): SecretInfo[] {
    const prefix = owner ? `${owner}/` : null;
    return this.store
      .secrets()
      .filter((s) => (prefix ? s.name.startsWith(prefix) : !s.name.includes("/")))
      .map((s) => this.secretInfo(prefix ? s.name.slice(prefix.length) : s.name, owner)!);
  }

  removeSecret(name: string, owner?: string | null): { name: string; removed: true } {
    if (!this.store.removeSecret(this.key(name, owner)))
      throw new HutchError("not_found", `no secret named "${name}"`, "list them: hutch secret list");
    logger.info("secret removed", { name, ...(owner ? { owner } : {}) });
    return { name, removed: true };
  }

  /** Where the owner's stored values occur in texts (positions and names only; see find.ts). */
  async findSecrets(texts: string[], owner?: string | null): Promise<SecretFindResult> {
    const prefix = owner ? `${owner}/` : null;
    const mine = this.store.secrets().filter((s) => (prefix ? s.name.startsWith(prefix) : !s.name.includes("/")));
    if (!mine.length) return { found: [] };
    const secrets: { name: string; value: string }[] = [];
    for (const s of mine) {
      const value = await this.reveal(s.name);
      if (value !== undefined) secrets.push({ name: prefix ? s.name.slice(prefix.length) : s.name, value });
    }
    return { found: findSecrets(texts, secrets) };
  }

  private secretInfo(name: string, owner?: string | null): SecretInfo | undefined {
    const key = this.key(name, owner);
    const row = this.store.secrets().find((s) => s.name === key);
    if (!row) return undefined;
    const bindings = Object.entries(this.bindings())
      .filter(([, b]) => b.secret === name)
      .map(([n]) => n);
    return { name, bindings, createdAt: row.createdAt, updatedAt: row.updatedAt };
  }

  private async reveal(name: string): Promise<string | undefined> {
    const sealed = this.store.sealed(name);
    return sealed ? new TextDecoder().decode(await this.sealer.open(sealed)) : undefined;
  }

  // ---- configuration and policy ----

  /** config.json, reread when it changes, so a new binding needs no daemon restart. */
  configNow(): HutchConfig {
    let mtimeMs = 0;
    try {
      mtimeMs = statSync(this.configPath).mtimeMs;
    } catch {
      mtimeMs = 0;
    }
    if (mtimeMs !== this.config.mtimeMs) this.config = { mtimeMs, value: mtimeMs === 0 ? {} : loadConfig(this.configPath) };
    return this.config.value;
  }

  bindings(): Record<string, Binding> {
    return allBindings(this.configNow());
  }

  /**
   * Refuses, before anything is made, an agent whose model API needs a
   * secret its user has not stored: a box would only get 503s from the
   * broker, which the agent CLIs retry for minutes.
   */
  requireSecrets(agent: string, bindings: readonly string[], owner: string | null): void {
    const known = this.bindings();
    for (const name of bindings) {
      const b = known[name];
      if (!b) continue;
      if (this.store.sealed(this.key(b.secret, owner))) continue;
      throw new HutchError(
        "config",
        `${agent} reaches its model API through the ${name} binding, and no "${b.secret}" secret is stored${owner ? ` for ${owner}` : ""}`,
        `store the key first: printf %s "$KEY" | hutch secret set ${b.secret}`,
      );
    }
  }

  /** Refuses bindings that do not exist, naming them. */
  checkPolicy(p: Partial<BoxPolicy>): void {
    const known = this.bindings();
    for (const b of p.bindings ?? []) {
      if (!known[b])
        throw new HutchError(
          "invalid",
          `no binding named "${b}" (known: ${Object.keys(known).sort().join(", ")})`,
          `define it in ${this.configPath} under "bindings"`,
        );
    }
  }

  policy(boxId: string): BoxPolicy {
    const { allow, bindings, unlisted, approvalMs } = this.store.policy(boxId);
    // The defaults are left out, so a policy reads as it always did until someone sets them.
    return { allow, bindings, ...(unlisted === "ask" ? { unlisted } : {}), ...(approvalMs ? { approvalTimeoutMs: approvalMs } : {}) };
  }

  changePolicy(boxId: string, change: PolicyChangeBody): BoxPolicy {
    this.checkPolicy({ bindings: change.bindings ?? [] });
    const row = this.store.policy(boxId);
    const next = changePolicy(row, change);
    this.store.savePolicy(boxId, {
      ...row,
      ...next,
      ...(change.unlisted ? { unlisted: change.unlisted } : {}),
      ...(change.approvalTimeoutMs ? { approvalMs: change.approvalTimeoutMs } : {}),
    });
    logger.info("policy changed", {
      box: boxId,
      allow: next.allow.join(","),
      bindings: next.bindings.join(","),
      ...(change.unlisted ? { unlisted: change.unlisted } : {}),
      ...(change.approvalTimeoutMs ? { approvalTimeoutMs: change.approvalTimeoutMs } : {}),
    });
    // Processes started from now on get the new bindings' environment. Only the bindings change it: re-announcing
    // the listener for an allowlist change would cut the connections it holds (an egress approval's among them).
    const r = this.running.get(boxId);
    const rebound = next.bindings.length !== row.bindings.length || next.bindings.some((b, i) => b !== row.bindings[i]);
    if (r && rebound) this.openListener(boxId, r);
    this.policyChanged.emit(boxId);
    return this.policy(boxId);
  }

  egress(boxId: string, decision: EgressDecision | undefined, limit: number): EgressRecord[] {
    return this.store.egress(boxId, decision, limit);
  }

  /** The box's stub for a binding, minted on first use. Worthless outside this box's gate. */
  stub(boxId: string, binding: string): string {
    const row = this.store.policy(boxId);
    const have = row.stubs[binding];
    if (have) return have;
    const stub = `hutch-stub-${binding}-${randomBytes(18).toString("base64url")}`;
    this.store.savePolicy(boxId, { ...row, stubs: { ...row.stubs, [binding]: stub } });
    return stub;
  }

  /** What every process in the box gets: the proxy for CONNECT, and each enabled binding's endpoint and stub. */
  envFor(boxId: string): Record<string, string> {
    const out: Record<string, string> = {
      HTTP_PROXY: BROKER_URL,
      HTTPS_PROXY: BROKER_URL,
      http_proxy: BROKER_URL,
      https_proxy: BROKER_URL,
      NO_PROXY: "127.0.0.1,localhost",
      no_proxy: "127.0.0.1,localhost",
      npm_config_proxy: BROKER_URL,
      npm_config_https_proxy: BROKER_URL,
      HUTCH_BROKER_URL: BROKER_URL,
      // CONNECT tunnels are not intercepted, so TLS in the box is checked against the box's own
      // store; Node ignores that store unless told (curl, git and Python read it already).
      NODE_EXTRA_CA_CERTS: "/etc/ssl/certs/ca-certificates.crt",
    };
    const bindings = this.bindings();
    for (const name of this.policy(boxId).bindings) {
      const b = bindings[name];
      if (b) Object.assign(out, bindingEnv(name, b, BROKER_URL, this.stub(boxId, name)));
    }
    return out;
  }

  // ---- running boxes ----

  /** A box's channel is up: open its gate and ask the guest to listen on loopback for it. */
  async attach(boxId: string, boxDir: string, channel: Channel): Promise<void> {
    this.detach(boxId);
    const socketPath = join(boxDir, BOX_FILES.brokerSocket);
    const gate = await this.openGate(boxId, socketPath);
    const r: Running = { gate, socketPath, channel, cap: new ConnCap(this.maxConns, (n) => this.recordOverCap(boxId, n)) };
    this.running.set(boxId, r);
    if (channel.hello.capabilities.includes("net")) this.openListener(boxId, r);
    else logger.warn("guest cannot listen (no net capability): the box has no way out", { box: boxId });
  }

  /** The box's own listener: whatever connects to socketPath speaks as this box. */
  async openGate(boxId: string, socketPath: string): Promise<Gate> {
    const gate = new Gate(
      {
        boxId,
        policy: () => this.policy(boxId),
        bindings: () => this.bindings(),
        pins: () => this.configNow().broker?.pins ?? {},
        lookup: this.lookup,
        stub: (b) => this.stub(boxId, b),
        secret: (name) => this.reveal(this.key(name, this.secretOwner(boxId))),
        record: (decision, facts) => this.record(boxId, decision, facts),
        ...(this.approvals ? { approvals: this.gateApprovals(boxId, this.approvals) } : {}),
      },
      splicer,
      this.limits,
    );
    await gate.listen(socketPath);
    return gate;
  }

  /** The approval service as this box's gate uses it: a grant for the digest, else a person's answer, waited for. */
  private gateApprovals(boxId: string, approvals: ApprovalService): GateApprovals {
    return {
      ask: (kind, summary, digest, named, gone, target) =>
        approvals.round({ kind, boxId, summary, digest, ...(target ? { target } : {}) }, named, gone),
      fromBox: (id, decision) => {
        try {
          approvals.decide(id, decision as ApprovalChoice, this.boxActor(boxId), { via: "box", boxId });
          return `approval ${id} cannot be decided from inside the box`;
        } catch (err) {
          return `${(err as Error).message}${hintOf(err)}`;
        }
      },
    };
  }

  detach(boxId: string): void {
    const r = this.running.get(boxId);
    if (!r) return;
    this.running.delete(boxId);
    if (r.listen && !r.listen.closed) r.listen.close();
    r.gate.close();
    r.cap.close();
    rmSync(r.socketPath, { force: true });
  }

  close(): void {
    for (const id of [...this.running.keys()]) this.detach(id);
  }

  private openListener(boxId: string, r: Running): void {
    if (!r.channel.mux.alive) return;
    const previous = r.listen;
    const stream = r.channel.mux.open({ tool: "net.listen", port: BROKER_PORT, env: this.envFor(boxId) });
    r.listen = stream;
    if (previous && !previous.closed) previous.close();
    stream.handlers = {
      msg: (msg) => {
        const m = msg as { type?: string; conn?: unknown };
        if (m.type === "conn" && typeof m.conn === "number" && Number.isInteger(m.conn) && m.conn > 0) this.relay(r, m.conn);
      },
      close: (error) => {
        if (error && r.listen === stream && r.channel.mux.alive)
          logger.warn("the guest's broker listener failed", { box: boxId, error: error.message });
      },
    };
  }

  /** Joins one connection the guest accepted to this box's gate, or refuses it when the box is at its cap. */
  private relay(r: Running, conn: number): void {
    if (!r.channel.mux.alive) return;
    const stream = r.channel.mux.open({ tool: "net.accept", conn });
    if (!r.cap.admit()) return this.refuseOverCap(r, stream);
    const sock = connect(r.socketPath);
    sock.once("close", () => r.cap.release());
    joinSocket(stream, sock, Chan.stdout, Chan.stdin, (h) => {
      stream.autoCredit = false;
      stream.handlers = h;
    });
  }

  /**
   * Answers a connection over the cap from here, without a gate connection
   * (no fd): a 503 that names the cap, then the end of the stream once the box
   * closed or REFUSED_LINGER_MS passed. What the box sends is dropped, and
   * never credited beyond one window.
   */
  private refuseOverCap(r: Running, stream: MuxStream): void {
    stream.autoCredit = false;
    const linger = setTimeout(() => stream.close(), REFUSED_LINGER_MS);
    stream.handlers = { close: () => clearTimeout(linger) };
    const answer = brokerResponse(503, overCapMessage(r.cap.max), true);
    // Chan.stdin is the box's way in (guest/PROTOCOL.md, net.accept).
    void stream.write(Chan.stdin, answer).then((ok) => ok && stream.eof(Chan.stdin));
  }

  private recordOverCap(boxId: string, refused: number): void {
    this.record(boxId, "denied", {
      host: "",
      port: 0,
      status: 503,
      reason: `${refused} connection${refused === 1 ? "" : "s"} refused: ${overCapMessage(this.maxConns)}`,
      bytesUp: 0,
      bytesDown: 0,
      ms: 0,
    });
  }

  private record(boxId: string, decision: EgressDecision, raw: EgressFacts): void {
    const facts = clipEgress(raw);
    this.store.logEgress(boxId, { at: new Date().toISOString(), decision, ...facts });
    if (decision === "denied") logger.info("egress denied", { box: boxId, host: facts.host, port: facts.port, reason: facts.reason });
    else
      logger.debug(`egress ${decision}`, {
        box: boxId,
        host: facts.host,
        port: facts.port,
        status: facts.status,
        bytesDown: facts.bytesDown,
      });
    this.decisions.emit(boxId, decision, facts);
  }
}

/** How the box hears an approval's answer. */
/** Facts within the egress events' bounds: a long upstream error must not make a session log refuse the record. */
export function clipEgress(raw: EgressFacts): EgressFacts {
  return {
    ...raw,
    host: raw.host.slice(0, 262),
    ...(raw.method !== undefined ? { method: raw.method.slice(0, 16) } : {}),
    ...(raw.path !== undefined ? { path: raw.path.slice(0, 1024) } : {}),
    ...(raw.binding !== undefined ? { binding: raw.binding.slice(0, 64) } : {}),
    ...(raw.reason !== undefined ? { reason: raw.reason.slice(0, 1024) } : {}),
  };
}

function overCapMessage(max: number): string {
  return `the box has ${max} connections open to the broker, its cap; close connections it no longer uses (or reuse them with keep-alive), then retry`;
}
