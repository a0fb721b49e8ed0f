// The live log inside the webview: keeps every event of the session, shows
// only the rows in view (so 100,000 events scroll like 100), follows the tail
// while you are at the bottom, filters by kind family and actor.
import { terminalText } from "@hutch/shared/text";
import { render, type Output } from "./render.ts";

interface Ev {
  seq: number;
  at: string;
  actor: { kind: string; id: string };
  kind: string;
  data: unknown;
}
type FromHost = { type: "events"; events: Ev[]; caughtUp?: number; output?: (Output & { seq: number })[] };
declare function acquireVsCodeApi(): { postMessage(m: unknown): void };

const vscode = acquireVsCodeApi();
const ROW = 22;
const OVERSCAN = 10;

const scroller = document.getElementById("scroller")!;
const spacer = document.getElementById("spacer")!;
const kindSel = document.getElementById("kind") as HTMLSelectElement;
const actorSel = document.getElementById("actor") as HTMLSelectElement;
const count = document.getElementById("count")!;

const events: Ev[] = [];
/** What each output event printed, by seq (the bridge reads it with the batch). */
const outputs = new Map<number, Output>();
const families = new Set<string>();
const actors = new Set<string>();
const expanded = new Map<number, number>(); // event index → measured height
let visible: number[] = [];
let offsets = new Float64Array(1); // offsets[i] = top of visible row i; offsets[n] = total height
let frame = 0;

const family = (kind: string) => kind.split(".")[0]!;
const matches = (e: Ev) => (!kindSel.value || family(e.kind) === kindSel.value) && (!actorSel.value || e.actor.id === actorSel.value);
const heightOf = (i: number) => expanded.get(i) ?? ROW;

function rebuildOffsets(): void {
  offsets = new Float64Array(visible.length + 1);
  for (let i = 0; i < visible.length; i++) offsets[i + 1] = offsets[i]! + heightOf(visible[i]!);
  spacer.style.height = `${offsets[visible.length]}px`;
}

function refilter(): void {
  visible = [];
  for (let i = 0; i < events.length; i++) if (matches(events[i]!)) visible.push(i);
  rebuildOffsets();
  schedule();
}

function addOption(sel: HTMLSelectElement, seen: Set<string>, value: string): void {
  if (seen.has(value)) return;
  seen.add(value);
  const o = document.createElement("option");
  o.value = value;
  o.textContent = terminalText(value, { oneLine: true });
  sel.appendChild(o);
}

function append(batch: Ev[]): void {
  const atBottom = scroller.scrollTop + scroller.clientHeight >= offsets[visible.length]! - ROW;
  const added: number[] = [];
  for (const e of batch) {
    const i = events.push(e) - 1;
    addOption(kindSel, families, family(e.kind));
    addOption(actorSel, actors, e.actor.id);
    if (matches(e)) added.push(i);
  }
  if (added.length) {
    const grown = new Float64Array(visible.length + added.length + 1);
    grown.set(offsets);
    for (const i of added) {
      const n = visible.push(i);
      grown[n] = grown[n - 1]! + heightOf(i);
    }
    offsets = grown;
    spacer.style.height = `${offsets[visible.length]}px`;
  }
  count.textContent = `${visible.length.toLocaleString()} / ${events.length.toLocaleString()} events`;
  if (atBottom) scroller.scrollTop = scroller.scrollHeight;
  schedule();
}

/** The first visible row whose bottom is below y. */
function rowAt(y: number): number {
  let lo = 0;
  let hi = visible.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (offsets[mid + 1]! <= y) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function rowElement(index: number, top: number): HTMLElement {
  const e = events[index]!;
  const r = render(e, outputs.get(e.seq));
  const row = document.createElement("div");
  row.className = `row ${r.tone ?? ""}`;
  row.style.top = `${top}px`;
  row.dataset.seq = String(e.seq);
  row.dataset.index = String(index);
  row.dataset.kind = e.kind;
  const line = document.createElement("div");
  line.className = "line";
  const toggle = document.createElement("span");
  toggle.className = "toggle";
  if (r.detail !== undefined) {
    toggle.textContent = expanded.has(index) ? "▾" : "▸";
    toggle.onclick = () => {
      if (expanded.has(index)) expanded.delete(index);
      else expanded.set(index, ROW); // measured once rendered
      rebuildOffsets();
      schedule();
    };
  }
  const seq = Object.assign(document.createElement("span"), { className: "seq", textContent: `#${e.seq}` });
  const time = Object.assign(document.createElement("span"), { className: "time", textContent: e.at.slice(11, 23), title: e.at });
  const actor = Object.assign(document.createElement("span"), {
    className: `actor ${e.actor.kind}`,
    textContent: terminalText(e.actor.id, { oneLine: true }),
  });
  const kind = Object.assign(document.createElement("span"), { className: "kind", textContent: e.kind });
  const summary = Object.assign(document.createElement("span"), { className: "summary", textContent: r.summary });
  line.append(toggle, seq, time, actor, kind, summary);
  if (r.anchor) {
    const a = document.createElement("a");
    a.className = "anchor";
    a.href = "#";
    a.textContent = `${terminalText(r.anchor.path, { oneLine: true })}${r.anchor.line ? `:${r.anchor.line}` : ""}`;
    const anchor = r.anchor;
    a.onclick = (ev) => {
      ev.preventDefault();
      vscode.postMessage({ type: "open", path: anchor.path, line: anchor.line });
    };
    line.append(a);
  }
  row.append(line);
  if (r.detail !== undefined && expanded.has(index)) {
    const pre = document.createElement("pre");
    pre.className = "detail";
    pre.textContent = r.detail;
    row.append(pre);
  }
  return row;
}

function draw(): void {
  frame = 0;
  const top = scroller.scrollTop;
  const bottom = top + scroller.clientHeight;
  const first = Math.max(0, rowAt(top) - OVERSCAN);
  const rows: HTMLElement[] = [];
  for (let v = first; v < visible.length && offsets[v]! < bottom + OVERSCAN * ROW; v++) rows.push(rowElement(visible[v]!, offsets[v]!));
  spacer.replaceChildren(...rows);
  // Expanded rows take the height they render at; fix the offsets once if any changed.
  let changed = false;
  for (const row of rows) {
    const index = Number(row.dataset.index);
    if (!expanded.has(index)) continue;
    const h = Math.max(ROW, row.offsetHeight);
    if (expanded.get(index) !== h) {
      expanded.set(index, h);
      changed = true;
    }
  }
  if (changed) {
    rebuildOffsets();
    schedule();
  }
}

function schedule(): void {
  if (!frame) frame = requestAnimationFrame(draw);
}

scroller.addEventListener("scroll", schedule, { passive: true });
window.addEventListener("resize", schedule);
kindSel.onchange = refilter;
actorSel.onchange = refilter;
window.addEventListener("message", (m: MessageEvent<FromHost>) => {
  if (m.data.type !== "events") return;
  for (const o of m.data.output ?? []) outputs.set(o.seq, o);
  append(m.data.events);
});
vscode.postMessage({ type: "ready" });
