// How each event kind reads in the live log: a one-line summary, an optional
// detail block (collapsible), a tone, and an anchor to follow. Keyed on the
// kind string, so kinds added on other branches (agent messages, tools,
// egress) render specially as soon as they are logged; anything else reads
// as its kind and JSON.
export interface Rendered {
  summary: string;
  detail?: string;
  tone?: "error" | "warn" | "ok" | "dim" | "note";
  anchor?: { path: string; line?: number };
}

type Data = Record<string, unknown>;
const str = (v: unknown) => (typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v));
const json = (v: unknown) => JSON.stringify(v, null, 2);
const oneLine = (s: string, max = 200) => {
  const t = s.replace(/\s+/g, " ").trim();
  return t.length > max ? `${t.slice(0, max)}…` : t;
};
const actorName = (v: unknown) => str((v as { id?: unknown } | undefined)?.id);

const renderers: Record<string, (d: Data) => Rendered> = {
  "message.started": (d) => ({ summary: `${str(d.role) || "assistant"} ▸ ${oneLine(str(d.text))}`, tone: "dim" }),
  "message.delta": (d) => ({ summary: `${str(d.role) || "assistant"} … ${oneLine(str(d.text))}`, tone: "dim" }),
  "message.completed": (d) => {
    const text = str(d.text);
    return { summary: `${str(d.role) || "assistant"}: ${oneLine(text)}`, ...(text.length > 200 || text.includes("\n") ? { detail: text } : {}) };
  },
  "tool.called": (d) => ({ summary: `tool ${str(d.name)} (${str(d.id)})`, detail: `input:\n${json(d.input)}` }),
  "tool.completed": (d) => ({
    summary: `tool ${str(d.id)} ${str(d.status) || "done"}`,
    detail: `output:\n${typeof d.output === "string" ? d.output : json(d.output)}`,
    tone: d.status === "error" ? "error" : "ok",
  }),
  "usage.reported": (d) => ({ summary: `usage ${oneLine(JSON.stringify(d))}`, tone: "dim" }),
  "agent.state": (d) => ({ summary: `agent is ${str(d.state)}${d.reason ? `: ${str(d.reason)}` : ""}`, tone: d.state === "needs-input" || d.state === "waiting" ? "warn" : "dim" }),
  "agent.raw": (d) => ({ summary: "agent output (raw)", detail: json(d), tone: "dim" }),
  "exec.started": (d) => ({ summary: `exec ${Array.isArray(d.argv) ? d.argv.map(str).join(" ") : ""}${d.pid ? ` (pid ${str(d.pid)})` : ""}` }),
  "exec.exited": (d) => ({
    summary: d.signal ? `exited by signal ${str(d.signal)}` : typeof d.code === "number" ? `exited with code ${d.code}` : "exited",
    tone: d.code === 0 ? "ok" : "error",
  }),
  "annotation.added": (d) => {
    const a = d.anchor as { path?: string; line?: number; seq?: number } | undefined;
    return {
      summary: `✎ ${oneLine(str(d.text))}`,
      ...(str(d.text).length > 200 ? { detail: str(d.text) } : {}),
      tone: "note",
      ...(a?.path ? { anchor: { path: a.path, ...(a.line ? { line: a.line } : {}) } } : {}),
    };
  },
  "session.driver.acquired": (d) => ({ summary: `driver: ${actorName(d.driver)} took the slot${d.leaseMs ? ` (lease ${str(d.leaseMs)} ms)` : ""}` }),
  "session.driver.released": (d) => ({ summary: `driver: ${actorName(d.driver)} released the slot` }),
  "session.driver.stolen": (d) => ({ summary: `driver: ${actorName(d.to)} took the slot from ${actorName(d.from)}`, tone: "warn" }),
  "session.driver.lapsed": (d) => ({ summary: `driver: ${actorName(d.driver)}'s lease lapsed`, tone: "warn" }),
  "session.created": (d) => ({ summary: `session created (${str(d.agent)}${d.label ? `, ${str(d.label)}` : ""})` }),
  "session.closed": (d) => ({ summary: `session closed${d.reason ? `: ${str(d.reason)}` : ""}` }),
  "box.state.changed": (d) => ({ summary: `box is ${str(d.state)}${d.reason ? `: ${str(d.reason)}` : ""}`, tone: d.state === "failed" ? "error" : "dim" }),
  "input.sent": (d) => ({ summary: `input ${oneLine(JSON.stringify(str(d.text)))}` }),
  "output.appended": (d) => ({ summary: `output ${str(d.length)} bytes${d.snapshot ? " (screen redraw)" : ""}`, tone: "dim" }),
  "attention.required": (d) => ({ summary: `needs attention: ${str(d.reason)}`, tone: "warn" }),
  "error.raised": (d) => ({ summary: `error: ${str(d.message)}`, tone: "error" }),
  "checkpoint.created": (d) => ({ summary: `checkpoint ${str(d.name)}` }),
  "verdict.recorded": (d) => ({ summary: `verdict ${str(d.verdict)}${d.score !== undefined ? ` (${str(d.score)})` : ""}`, ...(d.note ? { detail: str(d.note) } : {}) }),
};

function egress(kind: string, d: Data): Rendered {
  const what = kind.slice("egress.".length);
  const where = `${str(d.host)}${d.port !== undefined ? `:${str(d.port)}` : ""}`;
  return {
    summary: `egress ${what} ${where}${d.bytes !== undefined ? ` ${str(d.bytes)} bytes` : ""}${d.reason ? ` (${str(d.reason)})` : ""}`,
    tone: what === "denied" ? "error" : what === "injected" ? "warn" : "ok",
  };
}

/** The kinds with their own rendering (tests hold them to the registry in shared/). */
export const renderedKinds = (): string[] => Object.keys(renderers);

export function render(kind: string, data: unknown): Rendered {
  const d = (data && typeof data === "object" ? data : { value: data }) as Data;
  const r = renderers[kind];
  if (r) return r(d);
  if (kind.startsWith("egress.")) return egress(kind, d);
  return { summary: kind, detail: json(data), tone: "dim" };
}
