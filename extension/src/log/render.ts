// How each event kind reads in the live log: a one-line summary, an optional
// detail block (collapsible), a tone, and an anchor to follow. Renderers are
// keyed by registered kind and get that kind's data, typed by its schema;
// the event is checked against the registry first (it comes from the daemon:
// checked, not trusted). A kind without a renderer of its own reads as its
// kind and JSON; one whose data does not fit its schema is shown as such.
// What others wrote (an annotation, an agent's message, a box's reason) can
// hold control and bidi characters: the summary and detail shown are escaped
// once, at the end (terminalText), so a bidi override cannot reorder a row.
import { eventKinds, isEvent, type EventData, type EventKind } from "@hutch/shared/events";
import { count, terminalText } from "@hutch/shared/text";

export interface Rendered {
  summary: string;
  detail?: string;
  tone?: "error" | "warn" | "ok" | "dim" | "note";
  anchor?: { path: string; line?: number };
}

const json = (v: unknown) => JSON.stringify(v, null, 2);
const oneLine = (s: string, max = 200) => {
  const t = s.replace(/\s+/g, " ").trim();
  return t.length > max ? `${t.slice(0, max)}…` : t;
};

function egress(what: string, d: EventData<"egress.allowed">): Rendered {
  // A refusal before any request was read (over the box's connection cap) names no host.
  const where = d.host ? `${d.host}:${d.port}` : "the broker";
  const request = [d.binding, d.method, d.path].filter(Boolean).join(" ");
  return {
    summary: `egress ${what} ${where}${request ? ` ${request}` : ""}${d.status !== undefined ? ` → ${d.status}` : ""}, ${count(d.bytesUp, "byte")} up, ${d.bytesDown} down${d.reason ? ` (${d.reason})` : ""}`,
    tone: what === "denied" ? "error" : what === "injected" ? "warn" : "ok",
  };
}

const renderers: { [K in EventKind]?: (d: EventData<K>) => Rendered } = {
  "message.started": (d) => ({ summary: `${d.role} message ${d.id} started`, tone: "dim" }),
  "message.delta": (d) => ({ summary: `… ${oneLine(d.text)}`, tone: "dim" }),
  "message.completed": (d) => ({
    summary: `${d.role}: ${oneLine(d.text)}${d.truncated ? " (cut)" : ""}`,
    ...(d.text.length > 200 || d.text.includes("\n") ? { detail: d.text } : {}),
  }),
  "tool.called": (d) => ({ summary: `tool ${d.name} (${d.id})`, detail: `input:\n${json(d.input)}` }),
  "tool.completed": (d) => ({
    summary: `tool ${d.id} ${d.status}${d.truncated ? " (cut)" : ""}`,
    detail: `output:\n${d.output}`,
    tone: d.status === "error" ? "error" : "ok",
  }),
  "mcp.client.connected": (d) => ({ summary: `mcp client ${d.name} ${d.version} has the box's tools`, tone: "dim" }),
  "mcp.tool.called": (d) => ({ summary: `mcp ${d.name} (${d.id})`, detail: `input:\n${json(d.input)}` }),
  "mcp.tool.completed": (d) => ({
    summary: `mcp ${d.name} ${d.status} in ${d.ms} ms`,
    detail: `output:\n${d.output}`,
    tone: d.status === "error" ? "error" : "ok",
  }),
  "usage.reported": (d) => ({
    summary: d.available ? `usage: input ${d.input ?? "?"}, output ${d.output ?? "?"}, cached ${d.cached ?? "?"}` : "usage: not reported",
    tone: "dim",
  }),
  "agent.state": (d) => ({
    summary: `agent is ${d.state}${d.reason ? `: ${d.reason}` : ""}`,
    tone: d.state === "error" ? "error" : d.state === "needs-input" ? "warn" : "dim",
  }),
  "turn.interrupted": () => ({ summary: "the turn was stopped", tone: "warn" }),
  "agent.raw": (d) => ({ summary: `agent output (raw, ${d.reason}${d.truncated ? ", cut" : ""})`, detail: d.line, tone: "dim" }),
  "exec.started": (d) => ({ summary: `exec ${d.argv.join(" ")}${d.pid !== undefined ? ` (pid ${d.pid})` : ""}` }),
  "exec.exited": (d) => ({
    summary: d.signal ? `exited by signal ${d.signal}` : d.code !== null ? `exited with code ${d.code}` : "exited",
    tone: d.code === 0 ? "ok" : "error",
  }),
  "annotation.added": (d) => ({
    summary: `✎ ${oneLine(d.text)}`,
    ...(d.text.length > 200 ? { detail: d.text } : {}),
    tone: "note",
    ...(d.anchor ? { anchor: { path: d.anchor.path, ...(d.anchor.line ? { line: d.anchor.line } : {}) } } : {}),
  }),
  "session.driver.acquired": (d) => ({ summary: `driver: ${d.driver.id} took the slot${d.leaseMs ? ` (lease ${d.leaseMs} ms)` : ""}` }),
  "session.driver.released": (d) => ({ summary: `driver: ${d.driver.id} released the slot` }),
  "session.driver.stolen": (d) => ({ summary: `driver: ${d.to.id} took the slot from ${d.from.id}`, tone: "warn" }),
  "session.driver.lapsed": (d) => ({ summary: `driver: ${d.driver.id}'s lease lapsed`, tone: "warn" }),
  "session.created": (d) => ({ summary: `session created (${d.agent}${d.label ? `, ${d.label}` : ""})` }),
  "session.closed": (d) => ({ summary: `session closed${d.reason ? `: ${d.reason}` : ""}` }),
  "box.state.changed": (d) => ({
    summary: `box is ${d.state}${d.reason ? `: ${oneLine(d.reason)}` : ""}`,
    ...(d.reason && d.reason.length > 200 ? { detail: d.reason } : {}),
    tone: d.state === "failed" ? "error" : "dim",
  }),
  "box.slept": (d) => ({
    summary: `box asleep${d.programsStopped ? " (its programs were stopped; agents resume on wake)" : ", programs kept"}, ${count(d.bytes, "byte")} in ${d.ms} ms${d.by ? ` (by ${d.by.id})` : ""}`,
    tone: d.programsStopped ? "warn" : "dim",
  }),
  "box.woke": (d) => ({
    summary: `box woke in ${d.ms} ms${d.programsKept ? ", programs kept" : ""}${d.by ? ` (by ${d.by.id})` : ""}`,
    tone: "dim",
  }),
  "box.moved": (d) => ({
    summary: `box moved from ${d.from} to ${d.to} (${d.reason === "failover" ? `failover: ${d.from} went down` : d.reason})${
      d.programsKept ? ", programs kept" : d.snapshot ? `, from snapshot ${d.snapshot}; its programs started afresh` : ", made afresh"
    }${d.by ? ` (by ${d.by.id})` : ""}`,
    tone: d.reason === "failover" ? "warn" : "dim",
  }),
  "box.woke.cold": (d) => ({ summary: `box booted afresh on wake, its programs lost: ${oneLine(d.reason)}`, tone: "warn" }),
  "input.sent": (d) => ({ summary: `input ${oneLine(JSON.stringify(d.text))}` }),
  "output.appended": (d) => ({ summary: `output ${count(d.length, "byte")}${d.snapshot ? " (screen redraw)" : ""}`, tone: "dim" }),
  "output.dropped": (d) => ({
    summary: `output ${count(d.bytes, "byte")} dropped (chunks ${d.fromChunk}-${d.toChunk}, over the ${d.cap} cap of ${d.limit} bytes)`,
    tone: "warn",
  }),
  "attention.required": (d) => ({ summary: `needs attention: ${d.reason}`, tone: "warn" }),
  "error.raised": (d) => ({ summary: `error: ${d.message}`, tone: "error" }),
  "checkpoint.created": (d) => ({ summary: `checkpoint ${d.name}${d.ref ? ` (${d.ref})` : ""}` }),
  "verdict.recorded": (d) => ({
    summary: `verdict ${d.verdict}${d.score !== undefined ? ` (${d.score})` : ""}`,
    ...(d.note ? { detail: d.note } : {}),
  }),
  // An event of the session's earlier life on another daemon: read as that event, marked with where it came from.
  "session.event.imported": (d) => {
    const inner = unescaped({ kind: d.kind, data: d.data });
    return {
      ...inner,
      summary: `[${d.from.remote} ${d.from.session} #${d.from.seq}, ${d.actor.id}] ${inner.summary}`,
      tone: inner.tone === "error" || inner.tone === "warn" ? inner.tone : "dim",
    };
  },
  "session.work.returned": (d) => ({
    summary: `work of box ${d.box} on ${d.remote} came home (${d.case}); ${count(d.events, "event")} of ${count(d.sessions.length, "session")} above`,
    tone: "ok",
  }),
  "session.moved": (d) => ({ summary: `moved to ${d.to.remote}: session ${d.to.session} in box ${d.to.box} goes on there`, tone: "note" }),
  "session.arrived": (d) => ({
    summary: `arrived from ${d.from.remote} (session ${d.from.session}, box ${d.from.box}); its ${d.events === 1 ? "1 event is" : `${d.events} events are`} above`,
    tone: "note",
  }),
  "dispatch.started": (d) => ({ summary: `dispatch ${d.dispatch}: ${d.k} workers from ${d.snapshot}, check ${oneLine(d.check)}` }),
  "dispatch.worker.started": (d) => ({ summary: `worker ${d.worker} (${d.agent}) in box ${d.box}` }),
  "dispatch.finished": (d) => ({
    summary: `dispatch ${d.status}: ${d.winner !== null ? `worker ${d.winner} won` : "no winner"}${d.reason ? ` (${oneLine(d.reason)})` : ""}`,
    tone: d.winner !== null ? "ok" : "warn",
  }),
  "approval.requested": (d) => ({ summary: `approval ${d.id} asked (${d.kind}): ${oneLine(d.summary)}`, tone: "warn" }),
  "approval.decided": (d) => ({
    summary: `approval ${d.id} ${d.decision.replace("_", " ")}${d.reason ? `: ${oneLine(d.reason)}` : ""}`,
    tone: d.decision.startsWith("allow") ? "ok" : "warn",
  }),
  "approval.refused": (d) => ({ summary: `approval ${d.id}: a decision was refused (${oneLine(d.reason)})`, tone: "error" }),
  "schedule.run.started": (d) => ({
    summary: `schedule ${d.schedule} (${d.trigger}): ${d.agent} in box ${d.box}${d.woke ? `, woke it in ${d.wakeMs} ms` : ""}`,
    tone: "note",
  }),
  "schedule.run.finished": (d) => ({
    summary: `schedule ${d.schedule} run ${d.status}${d.exit !== null ? ` (exit ${d.exit})` : ""} after ${Math.round(d.ms / 1000)} s, box awake ${Math.round(d.boxSeconds)} s${
      d.tokens ? `, ${d.tokens.input} in / ${d.tokens.output} out tokens` : ""
    }${d.reason ? `: ${oneLine(d.reason)}` : ""}`,
    tone: d.status === "ok" ? "ok" : "warn",
  }),
  "egress.allowed": (d) => egress("allowed", d),
  "egress.denied": (d) => egress("denied", d),
  "egress.injected": (d) => egress("injected", d),
};

/** The kinds with their own rendering. */
export const renderedKinds = (): string[] => Object.keys(renderers);

/** Calls the renderer of a kind with that kind's data (the pair comes from one checked event). */
function renderKnown<K extends EventKind>(kind: K, data: EventData<K>): Rendered | undefined {
  return renderers[kind]?.(data);
}

/** What an output event printed, as the bridge read it (OutputText without its seq). */
export interface Output {
  text: string;
  cut?: boolean;
  dropped?: boolean;
}

/**
 * A terminal's output as a row: its first line as the summary (how many more
 * follow), the whole text as the detail; escape sequences were stripped by
 * the bridge, and what is left is escaped with the rest of the row.
 */
export function outputRow(o: Output, bytes: number): Rendered {
  if (o.dropped) return { summary: `output: ${count(bytes, "byte")}, dropped under the session's output cap`, tone: "warn" };
  const lines = o.text.replace(/\n+$/, "").split("\n");
  const shown = lines.filter((l) => l.trim() !== "");
  if (shown.length === 0) return { summary: "output: (no text; cursor or screen control only)", tone: "dim" };
  const more = shown.length - 1 + (o.cut ? 1 : 0);
  return {
    summary: `│ ${shown[0]!.trimEnd()}${more > 0 ? `  (+${o.cut ? "more" : count(more, "line")})` : ""}`,
    ...(lines.length > 1 || o.cut ? { detail: `${o.text.replace(/\n+$/, "")}${o.cut ? "\n… (cut)" : ""}` } : {}),
  };
}

/**
 * An event as the live log shows it: the summary on one line, the detail, both
 * escaped. The anchor is the path as logged (to open it). An output event
 * reads as what it printed when its text came with it, else as its size.
 */
export function render(e: { kind: string; data: unknown }, output?: Output): Rendered {
  const r = output && isEvent(e) && e.kind === "output.appended" && !e.data.snapshot ? outputRow(output, e.data.length) : unescaped(e);
  return {
    ...r,
    summary: terminalText(r.summary, { oneLine: true }),
    ...(r.detail !== undefined ? { detail: terminalText(r.detail) } : {}),
  };
}

function unescaped(e: { kind: string; data: unknown }): Rendered {
  if (isEvent(e)) return renderKnown(e.kind, e.data) ?? { summary: e.kind, detail: json(e.data), tone: "dim" };
  // A kind this extension does not know (a newer daemon) reads as its kind; a known one that does not fit, as an error.
  return eventKinds().includes(e.kind)
    ? { summary: `${e.kind} that does not fit its schema`, detail: json(e.data), tone: "error" }
    : { summary: e.kind, detail: json(e.data), tone: "dim" };
}
