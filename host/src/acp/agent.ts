// `hutch acp`: an Agent Client Protocol agent on stdio (the official SDK)
// whose sessions are hutch sessions, reached through the daemon API like any
// other client, so it works the same against a remote daemon.
//
// One invariant: an editor sees a session as its log, in seq order, once.
// Each ACP session follows its hutch session with one subscription, from seq
// 1, and every event goes through the one fold in ./map.ts into
// `session/update`s, sent in order on one chain. A prompt is input to that
// session like `hutch session send`: the turn it starts, and turns others
// start from the CLI or another editor, reach the editor the same way, each
// update carrying the event's actor. A prompt answers once the subscription
// has seen its turn settle and every update before that was sent.
import { HUTCH_VERSION, HutchError } from "@hutch/shared/base";
import { emptyTurn, foldTurn, settled, type Session, type SessionEvent, type TurnState } from "@hutch/shared";
import {
  agent as acpAgent,
  methods,
  ndJsonStream,
  PROTOCOL_VERSION,
  RequestError,
  type AgentApp,
  type AgentContext,
  type ContentBlock,
  type SessionUpdate,
  type Stream,
} from "@agentclientprotocol/sdk";
import type { DaemonClient } from "../client/daemon.ts";
import { subscribe, type Subscription } from "../client/subscribe.ts";
import { newMapState, updatesOf, type MapState } from "./map.ts";
import { offloadedBox, type Offloaded } from "./workspace.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "acp" });

export type AcpAgentName = "claude" | "codex" | "opencode" | "pi";

export interface AcpOptions {
  /** The agent a new session runs. */
  agent: AcpAgentName;
  /** A client of the daemon, named after the editor (`ide` kind, `acp.<editor>`). */
  connect(name: string): Promise<DaemonClient>;
}

/** The driver slot is taken with a lease for each prompt, renewed while the turn runs, so a vanished editor frees it. */
const DRIVER_LEASE_MS = 30_000;
const HEARTBEAT_MS = 10_000;

/** The actor name for an editor: `acp.` and its name folded to what the daemon accepts. */
export function actorName(editor: string | undefined): string {
  const folded = (editor ?? "editor")
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[^a-z0-9]+/, "")
    .slice(0, 56);
  return `acp.${folded || "editor"}`;
}

/** A prompt's content blocks as the text one turn gets: text as is, resources named or inlined. */
export function promptText(blocks: ContentBlock[]): string {
  return blocks
    .map((b) => {
      if (b.type === "text") return b.text;
      if (b.type === "resource_link") return `@${b.uri}`;
      if (b.type === "resource") {
        const r = b.resource as { uri: string; text?: string };
        return r.text !== undefined ? `@${r.uri}\n\`\`\`\n${r.text}\n\`\`\`` : `@${r.uri}`;
      }
      return "";
    })
    .filter(Boolean)
    .join("\n");
}

/** A hutch error as the JSON-RPC error an editor shows: its message with the next step. */
export function requestError(err: unknown, sessionId?: string): RequestError {
  if (err instanceof RequestError) return err;
  if (err instanceof HutchError) {
    const message = err.hint ? `${err.message} (next: ${err.hint})` : err.message;
    const code = err.code === "not_found" ? -32002 : err.code === "invalid" ? -32602 : -32603;
    return new RequestError(code, message, { hutch: err.code, ...(sessionId ? { sessionId } : {}) });
  }
  return RequestError.internalError(undefined, (err as Error).message ?? String(err));
}

/** One hutch session as an editor follows it. */
class Followed {
  private readonly map: MapState = newMapState();
  private turn: TurnState = emptyTurn();
  private sent: Promise<void> = Promise.resolve();
  private readonly waiters = new Set<() => void>();
  private sub?: Subscription;
  private caughtUp!: () => void;
  /** Resolves once the replay reached the log's end and its updates were sent. */
  readonly replayed: Promise<void>;
  prompting = false;
  cancelled = false;

  constructor(
    readonly session: Session,
    private readonly d: DaemonClient,
    private readonly send: (update: SessionUpdate) => Promise<void>,
    private readonly paths: Offloaded | null,
  ) {
    this.replayed = new Promise((res) => {
      this.caughtUp = res;
    });
  }

  start(): void {
    const localPath = this.paths ? (p: string) => this.paths!.localPath(p) : undefined;
    const opts = { headless: this.session.headless === true, ...(localPath ? { localPath } : {}) };
    this.sub = subscribe(this.d, this.session.id, 1, {
      event: (e: SessionEvent) => {
        this.turn = foldTurn(this.turn, e);
        for (const u of updatesOf(e, this.map, opts)) this.sent = this.sent.then(() => this.send(u)).catch(() => undefined);
        for (const w of this.waiters) w();
      },
      caughtUp: () => void this.sent.then(() => this.caughtUp()),
    });
    this.sub.done.catch((err) => logger.warn("session subscription ended", { session: this.session.id, err }));
  }

  /** Resolves when the turn that input `seq` started has settled and every update up to there was sent. */
  async settledAfter(seq: number): Promise<void> {
    await new Promise<void>((res) => {
      const check = () => {
        if (this.turn.input >= seq && settled(this.turn, this.session.headless === true)) {
          this.waiters.delete(check);
          res();
        }
      };
      this.waiters.add(check);
      check();
    });
    await this.sent;
  }

  close(): void {
    this.sub?.close();
    for (const w of this.waiters) w();
  }
}

const path = (sid: string, rest = "") => `/v1/sessions/${encodeURIComponent(sid)}${rest}`;

/** The ACP agent: initialize, session/new, session/load, session/prompt, session/cancel. */
export function buildAgent(o: AcpOptions): AgentApp {
  let daemon: Promise<DaemonClient> | undefined;
  let editor: string | undefined;
  let client: AgentContext | undefined;
  const sessions = new Map<string, Followed>();
  const d = () => {
    daemon ??= o.connect(actorName(editor));
    return daemon;
  };
  const sendTo = (sessionId: string) => (update: SessionUpdate) => client!.notify(methods.client.session.update, { sessionId, update });

  const follow = async (session: Session, paths: Offloaded | null): Promise<Followed> => {
    sessions.get(session.id)?.close();
    const f = new Followed(session, await d(), sendTo(session.id), paths);
    sessions.set(session.id, f);
    f.start();
    return f;
  };

  const followed = (sessionId: string): Followed => {
    const f = sessions.get(sessionId);
    if (!f) throw RequestError.sessionNotFound(sessionId);
    return f;
  };

  return acpAgent({ name: "hutch" })
    .onConnect((conn) => {
      client = conn.client;
      void conn.closed.then(() => {
        for (const f of sessions.values()) f.close();
      });
    })
    .onRequest(methods.agent.initialize, ({ params }) => {
      editor = params.clientInfo?.name;
      return {
        protocolVersion: PROTOCOL_VERSION,
        agentCapabilities: { loadSession: true, promptCapabilities: { image: false, audio: false, embeddedContext: true } },
        agentInfo: { name: "hutch", title: "hutch", version: HUTCH_VERSION },
        authMethods: [],
      };
    })
    .onRequest(methods.agent.session.new, async ({ params }) => {
      try {
        const c = await d();
        // The editor's folder, when offloaded to a box this daemon has, is worked on there; else a new box.
        const offloaded = await offloadedBox(c, params.cwd);
        const session = await c.request<Session>(
          "POST",
          "/v1/sessions",
          { agent: o.agent, headless: true, ...(offloaded ? { box: offloaded.box } : {}) },
          { idempotencyKey: crypto.randomUUID() },
        );
        logger.info("session started", { session: session.id, box: session.boxName, agent: o.agent, offloaded: offloaded?.box });
        await follow(session, offloaded);
        return { sessionId: session.id };
      } catch (err) {
        throw requestError(err);
      }
    })
    .onRequest(methods.agent.session.load, async ({ params }) => {
      let session: Session;
      const c = await d().catch((err) => {
        throw requestError(err);
      });
      try {
        session = await c.request<Session>("GET", path(params.sessionId));
      } catch (err) {
        if (err instanceof HutchError && err.code === "not_found")
          throw new RequestError(
            -32002,
            `no hutch session "${params.sessionId}" on this daemon (next: list them: hutch session list; one on a remote needs hutch acp --remote NAME)`,
            { sessionId: params.sessionId },
          );
        throw requestError(err, params.sessionId);
      }
      const f = await follow(session, await offloadedBox(c, params.cwd, session.boxName).catch(() => null));
      // The whole history is sent before the answer, as session/load asks; live updates follow it.
      await f.replayed;
      return {};
    })
    .onRequest(methods.agent.session.prompt, async ({ params }) => {
      const f = followed(params.sessionId);
      if (f.prompting) throw RequestError.invalidRequest(undefined, "a prompt is already running in this session; cancel it first");
      if (f.session.agent === "shell")
        throw new RequestError(
          -32602,
          `session ${params.sessionId} is a shell, with no agent to prompt (next: type into it: hutch session attach ${params.sessionId})`,
          { sessionId: params.sessionId },
        );
      const text = promptText(params.prompt);
      if (!text.trim()) throw RequestError.invalidParams(undefined, "the prompt has no text");
      const c = await d();
      const sid = params.sessionId;
      f.prompting = true;
      f.cancelled = false;
      let beat: ReturnType<typeof setInterval> | undefined;
      try {
        await c.request("POST", path(sid, "/driver/acquire"), { leaseMs: DRIVER_LEASE_MS });
        beat = setInterval(() => void c.request("POST", path(sid, "/driver/heartbeat")).catch(() => undefined), HEARTBEAT_MS);
        // A headless turn takes the prompt whole; an agent's terminal (its TUI) gets it typed, then Enter.
        const input = f.session.headless ? text : `${text}\r`;
        const { seq } = await c.request<{ seq: number }>(
          "POST",
          path(sid, "/input"),
          { text: input },
          { idempotencyKey: crypto.randomUUID() },
        );
        await f.settledAfter(seq);
        return { stopReason: f.cancelled ? "cancelled" : "end_turn" };
      } catch (err) {
        throw requestError(err, sid);
      } finally {
        clearInterval(beat);
        f.prompting = false;
        await c.request("POST", path(sid, "/driver/release")).catch(() => undefined);
      }
    })
    .onNotification(methods.agent.session.cancel, async ({ params }) => {
      const f = sessions.get(params.sessionId);
      if (!f?.prompting) return;
      f.cancelled = true;
      try {
        await (await d()).request("POST", path(params.sessionId, "/interrupt"));
      } catch (err) {
        logger.warn("cancel failed", { session: params.sessionId, err });
      }
    });
}

/** Serves the agent on this process's stdin and stdout until the editor closes them. */
export async function serveStdio(o: AcpOptions): Promise<void> {
  const writer = Bun.stdout.writer();
  const output = new WritableStream<Uint8Array>({
    async write(chunk) {
      writer.write(chunk);
      await writer.flush();
    },
  });
  const stream: Stream = ndJsonStream(output, Bun.stdin.stream());
  const conn = buildAgent(o).connect(stream);
  await conn.closed;
}
