// E2B sandboxes as hutch boxes. Each sandbox is a box named `e2b-<id>`,
// owned by the user whose token made it (so it is in `hutch box list`, and
// the broker and egress policy apply as to any box); what E2B keeps beside a
// sandbox (template, metadata, env vars, its end of life, the in-box API's
// token) is held here. A sandbox that is not its caller's is answered as one
// that does not exist. At endAt the sandbox is killed (its box deleted), as
// E2B does by default; pause stops the clock.
//
// Pause and resume: a VM box sleeps to disk with its memory, as E2B's pause
// persists a sandbox's, and wakes with its processes and their streams here
// (the daemon holds the guest's connection across the sleep); a process box
// sleeps with its files only (its programs stop) and wakes. An engine that
// cannot sleep freezes or stops the box. The README says so.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import {
  E2B_DEFAULT_TIMEOUT_S,
  E2B_ENVD_VERSION,
  HutchError,
  type BoxCreateBody,
  type CreatedSandbox,
  type ListedSandbox,
  type NewSandbox,
  type SandboxState,
} from "@hutch/shared";
import type { BoxService } from "../box/service.ts";
import type { Channel } from "../engine/channel.ts";
import { log } from "../log.ts";
import { PortBridge } from "./ports.ts";
import { ProcessTable } from "./processes.ts";

const logger = log.create({ service: "e2b" });
const ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";
export const BOX_PREFIX = "e2b-";

/** What a template names: the box to make for it. */
export type TemplateBox = Pick<BoxCreateBody, "engine" | "image">;
/** Finds the box a template name maps to, or null for a name hutch does not know. */
export type Templates = (name: string) => TemplateBox | null;

export interface Sandbox {
  id: string;
  boxId: string;
  box: string;
  user: string;
  template: string;
  metadata: Record<string, string>;
  envs: Record<string, string>;
  startedAt: Date;
  endAt: Date;
  paused: boolean;
  envdToken: string;
  processes: ProcessTable;
  ports: PortBridge;
  timer?: ReturnType<typeof setTimeout>;
}

function newId(): string {
  let id = "";
  for (const b of randomBytes(20)) id += ID_ALPHABET[b % 36];
  return id;
}

const notFound = (id: string) => new HutchError("not_found", `sandbox "${id}" not found`, "list yours: Sandbox.list()");

export class SandboxService {
  private readonly sandboxes = new Map<string, Sandbox>();

  constructor(
    private readonly boxes: BoxService,
    private readonly opts: { home: string; templates: Templates; domain: string | null; now?: () => number },
  ) {}

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  /**
   * Takes back the sandboxes whose boxes outlived a daemon restart (the table
   * is the daemon's memory): same id and files, owned by the box's owner, a
   * new access token (connect hands it out), and a fresh default end of life
   * so none runs forever. Their metadata and env vars were not kept. A box
   * that is stopped or paused comes back paused.
   */
  adopt(owner: (boxId: string) => string): number {
    let n = 0;
    for (const box of this.boxes.list()) {
      const m = new RegExp(`^${BOX_PREFIX}([a-z0-9]{20})$`).exec(box.name);
      if (!m || this.sandboxes.has(m[1]!)) continue;
      const row = this.boxes.byId(box.id);
      const image = row ? (JSON.parse(row.config) as { image?: string }).image : undefined;
      const sb = this.record(m[1]!, box.id, owner(box.id), box.engine === "process" ? "base" : (image ?? "default"), {}, {});
      sb.startedAt = new Date(box.createdAt);
      sb.paused = box.state !== "running";
      this.sandboxes.set(sb.id, sb);
      this.arm(sb, E2B_DEFAULT_TIMEOUT_S);
      n++;
    }
    if (n > 0) logger.info("sandboxes taken back after a restart", { count: n });
    return n;
  }

  private record(
    id: string,
    boxId: string,
    user: string,
    template: string,
    metadata: Record<string, string>,
    envs: Record<string, string>,
  ): Sandbox {
    const name = `${BOX_PREFIX}${id}`;
    const now = this.now();
    return {
      id,
      boxId,
      box: name,
      user,
      template,
      metadata,
      envs,
      startedAt: new Date(now),
      endAt: new Date(now),
      paused: false,
      envdToken: randomBytes(24).toString("base64url"),
      processes: new ProcessTable(name),
      ports: new PortBridge(join(this.opts.home, "e2b", id), () => this.boxes.channel(boxId).channel),
    };
  }

  async create(user: string, body: NewSandbox): Promise<CreatedSandbox> {
    const tpl = this.opts.templates(body.templateID);
    if (!tpl)
      throw new HutchError(
        "not_found",
        `template "${body.templateID}" not found: this hutch server maps "base" to a process box and each of its VM images to itself`,
        "use Sandbox.create() for base, or a name from `hutch image list`",
      );
    const id = newId();
    const name = `${BOX_PREFIX}${id}`;
    const box = await this.boxes.create({ name, start: true, ...tpl }, null, user);
    const sb = this.record(id, box.id, user, body.templateID, body.metadata ?? {}, body.envVars ?? {});
    this.sandboxes.set(id, sb);
    this.arm(sb, body.timeout ?? E2B_DEFAULT_TIMEOUT_S);
    logger.info("sandbox created", { sandbox: id, box: name, user, template: body.templateID });
    return this.created(sb);
  }

  private created(sb: Sandbox): CreatedSandbox {
    return {
      templateID: sb.template,
      sandboxID: sb.id,
      clientID: "hutch",
      envdVersion: E2B_ENVD_VERSION,
      envdAccessToken: sb.envdToken,
      domain: this.opts.domain,
    };
  }

  /** The caller's sandbox; another user's, a missing one, or one whose box was deleted meanwhile is not_found. */
  get(user: string, id: string): Sandbox {
    const sb = this.sandboxes.get(id);
    if (!sb || sb.user !== user) throw notFound(id);
    if (!this.boxes.byId(sb.boxId)) {
      this.forget(sb);
      throw notFound(id);
    }
    return sb;
  }

  /** The sandbox an in-box request names, checked against its access token (envd's X-Access-Token). */
  envd(id: string, token: string | null): Sandbox {
    const sb = this.sandboxes.get(id);
    if (!sb || !this.boxes.byId(sb.boxId)) throw notFound(id);
    if (token === null || token !== sb.envdToken)
      throw new HutchError(
        "unauthorized",
        `sandbox ${id}: ${token === null ? "no" : "a wrong"} X-Access-Token`,
        "use the Sandbox object create or connect returned",
      );
    return sb;
  }

  /** The sandbox a request to one of its ports names (E2B's ports are reachable by whoever knows the id). */
  byId(id: string): Sandbox {
    const sb = this.sandboxes.get(id);
    if (!sb || !this.boxes.byId(sb.boxId)) throw notFound(id);
    return sb;
  }

  channel(sb: Sandbox): Channel {
    if (sb.paused) throw new HutchError("not_ready", `sandbox ${sb.id} is paused`, "resume it: Sandbox.connect(id)");
    return this.boxes.channel(sb.boxId).channel;
  }

  state(sb: Sandbox): SandboxState {
    return sb.paused ? "paused" : "running";
  }

  describe(sb: Sandbox, detail = false): ListedSandbox {
    const row = this.boxes.byId(sb.boxId);
    const cfg = row ? (JSON.parse(row.config) as { cpus?: number; memoryMiB?: number }) : {};
    return {
      templateID: sb.template,
      sandboxID: sb.id,
      alias: sb.template,
      clientID: "hutch",
      startedAt: sb.startedAt.toISOString(),
      endAt: sb.endAt.toISOString(),
      cpuCount: cfg.cpus ?? 1,
      memoryMB: cfg.memoryMiB ?? 512,
      diskSizeMB: 0,
      metadata: sb.metadata,
      state: this.state(sb),
      envdVersion: E2B_ENVD_VERSION,
      ...(detail ? { envdAccessToken: sb.envdToken, domain: this.opts.domain } : {}),
    };
  }

  list(user: string, filter: { states?: SandboxState[]; metadata?: Record<string, string> } = {}): ListedSandbox[] {
    const out: ListedSandbox[] = [];
    for (const sb of [...this.sandboxes.values()]) {
      if (sb.user !== user) continue;
      if (!this.boxes.byId(sb.boxId)) {
        this.forget(sb);
        continue;
      }
      if (filter.states && !filter.states.includes(this.state(sb))) continue;
      if (filter.metadata && Object.entries(filter.metadata).some(([k, v]) => sb.metadata[k] !== v)) continue;
      out.push(this.describe(sb));
    }
    return out.sort((a, b) => a.startedAt.localeCompare(b.startedAt));
  }

  /** Sets the sandbox to end `seconds` from now (E2B's setTimeout replaces the end, it does not add to it). */
  setTimeout(user: string, id: string, seconds: number): void {
    const sb = this.get(user, id);
    this.arm(sb, seconds);
  }

  private arm(sb: Sandbox, seconds: number): void {
    if (sb.timer) clearTimeout(sb.timer);
    sb.endAt = new Date(this.now() + seconds * 1000);
    if (sb.paused) return;
    sb.timer = setTimeout(() => {
      logger.info("sandbox timed out", { sandbox: sb.id, box: sb.box });
      void this.destroy(sb).catch((err) => logger.warn("could not kill a sandbox that timed out", { sandbox: sb.id, err: String(err) }));
    }, seconds * 1000);
  }

  async kill(user: string, id: string): Promise<void> {
    await this.destroy(this.get(user, id));
  }

  private async destroy(sb: Sandbox): Promise<void> {
    this.forget(sb);
    await this.boxes.delete(sb.boxId, null);
    logger.info("sandbox killed", { sandbox: sb.id, box: sb.box });
  }

  private forget(sb: Sandbox): void {
    if (sb.timer) clearTimeout(sb.timer);
    sb.processes.close();
    sb.ports.close();
    this.sandboxes.delete(sb.id);
  }

  /** Pauses a running sandbox; false when it already was. */
  async pause(user: string, id: string): Promise<boolean> {
    const sb = this.get(user, id);
    if (sb.paused) return false;
    if (sb.timer) clearTimeout(sb.timer);
    sb.paused = true;
    const can = this.boxes.capabilities(sb.boxId);
    if (can?.sleep === "memory") await this.boxes.sleep(sb.boxId);
    else if (can?.pause) await this.boxes.pause(sb.boxId, null);
    else {
      sb.processes.close();
      if (can?.sleep) await this.boxes.sleep(sb.boxId);
      else await this.boxes.stop(sb.boxId, null);
    }
    logger.info("sandbox paused", { sandbox: sb.id, box: sb.box });
    return true;
  }

  /** Connect: resumes a paused sandbox (true) or extends a running one's end when asked (false). */
  async connect(user: string, id: string, seconds?: number): Promise<{ sandbox: CreatedSandbox; resumed: boolean }> {
    const sb = this.get(user, id);
    const resumed = sb.paused;
    if (resumed) {
      const can = this.boxes.capabilities(sb.boxId);
      if (can?.sleep === "memory") await this.boxes.wake(sb.boxId);
      else if (can?.pause) await this.boxes.resume(sb.boxId, null);
      else if (can?.sleep) await this.boxes.wake(sb.boxId);
      else await this.boxes.start(sb.boxId, null);
      sb.paused = false;
      this.arm(sb, seconds ?? E2B_DEFAULT_TIMEOUT_S);
      logger.info("sandbox resumed", { sandbox: sb.id, box: sb.box });
    } else if (seconds !== undefined && this.now() + seconds * 1000 > sb.endAt.getTime()) this.arm(sb, seconds);
    return { sandbox: this.created(sb), resumed };
  }

  close(): void {
    for (const sb of this.sandboxes.values()) {
      if (sb.timer) clearTimeout(sb.timer);
      sb.processes.close();
      sb.ports.close();
    }
  }
}
