// The session log side of `hutch mcp`: which session of a box a call goes
// into (its newest open one; a new "mcp" session when it has none), and the
// two events per call. Logging never fails a call: a box without a session
// the daemon will make (a stopped box, a name that does not exist) simply
// gets no events, and the reason goes to stderr.
import { emit, Events, loggedInput, type Session } from "@hutch/shared";
import type { DaemonClient } from "../client/daemon.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "mcp" });

/** Tools that must not start a box to log into it. */
const NO_NEW_SESSION = new Set(["box_start", "box_stop"]);

export class SessionTrail {
  private readonly sessions = new Map<string, Promise<string | undefined>>();
  private seq = 0;

  constructor(private readonly d: DaemonClient) {}

  private session(box: string, tool: string): Promise<string | undefined> {
    let s = this.sessions.get(box);
    if (!s) {
      s = this.find(box, !NO_NEW_SESSION.has(tool)).catch((err: Error) => {
        logger.warn("no session to log into", { box, error: err.message });
        return undefined;
      });
      // An answer of "none" is asked again next time (the box may have started since).
      void s.then((id) => {
        if (!id) this.sessions.delete(box);
      });
      this.sessions.set(box, s);
    }
    return s;
  }

  private async find(box: string, create: boolean): Promise<string | undefined> {
    const open = await this.d.request<Session[]>("GET", `/v1/sessions?box=${encodeURIComponent(box)}&state=open`);
    const newest = open.at(-1);
    if (newest) return newest.id;
    if (!create) return undefined;
    const made = await this.d.request<Session>("POST", "/v1/sessions", { box, label: "mcp" }, { idempotencyKey: crypto.randomUUID() });
    return made.id;
  }

  private async append(box: string | undefined, tool: string, event: { kind: string; data: unknown }): Promise<void> {
    if (!box) return;
    const id = await this.session(box, tool);
    if (!id) return;
    await this.d
      .request("POST", `/v1/sessions/${id}/events`, { events: [event] }, { idempotencyKey: crypto.randomUUID() })
      .catch((err: Error) => logger.warn("could not log a call", { box, session: id, error: err.message }));
  }

  async called(box: string | undefined, name: string, input: unknown): Promise<string> {
    const id = `call_${++this.seq}_${crypto.randomUUID().slice(0, 8)}`;
    await this.append(box, name, emit(Events.mcpToolCalled, { id, name, input: loggedInput(input) }));
    return id;
  }

  async completed(box: string | undefined, id: string, name: string, status: "ok" | "error", output: string, ms: number): Promise<void> {
    await this.append(box, name, emit(Events.mcpToolCompleted, { id, name, status, output: output.slice(0, 4096), ms }));
  }
}
