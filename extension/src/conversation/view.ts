// The conversation inside the webview: folds the session's events (replayed
// from seq 1 whenever the view opens, so a reloaded window shows everything
// from the daemon's log, not from webview state) and draws each item once,
// again only when it changed. The agent's messages are Markdown (markdown-it
// with raw HTML off: what the box wrote is text, never markup), tool calls
// fold with their input and result, edits show as diffs with a button that
// opens VS Code's diff editor, and approvals still waiting have Allow / Deny.
// The prompt box sends on Enter (Shift+Enter: a new line); Stop interrupts.
import MarkdownIt from "markdown-it";
import { terminalText } from "@hutch/shared/text";
import { CHOICES } from "../approval-prompt.ts";
import { fold, newConversation, type Conversation, type Ev, type Item } from "./fold.ts";

type FromHost =
  | { type: "events"; events: Ev[] }
  | { type: "status"; text: string; tone?: "error" | "ok" }
  | { type: "busy"; sending: boolean };
declare function acquireVsCodeApi(): { postMessage(m: unknown): void; setState(s: unknown): void };

const vscode = acquireVsCodeApi();
const session = document.body.dataset.session ?? "";
const headless = document.body.dataset.headless !== "false";
// Only the session's id is kept by the webview: after a reload the extension opens it again and replays the log.
vscode.setState({ session, headless, title: document.body.dataset.title ?? session, box: document.body.dataset.box || undefined });

const md = new MarkdownIt({ html: false, linkify: true, breaks: false });
// Links the agent wrote open in the browser through VS Code, and only web links; no image loads (the page's
// policy refuses them too): a URL in what the box wrote must not make this machine fetch it.
md.validateLink = (url) => /^https?:\/\//i.test(url);
md.disable("image");

const list = document.getElementById("items")!;
const stateEl = document.getElementById("state")!;
const usageEl = document.getElementById("usage")!;
const statusEl = document.getElementById("status")!;
const prompt = document.getElementById("prompt") as HTMLTextAreaElement;
const sendBtn = document.getElementById("send") as HTMLButtonElement;
const stopBtn = document.getElementById("stop") as HTMLButtonElement;

const conv: Conversation = newConversation(headless);
/** Each item's element and the signature it was drawn with. */
const drawn = new Map<Item, { el: HTMLElement; sig: string }>();
let sending = false;
/** Events received since the view opened (on the body as data-received, for a test to read). */
let received = 0;

const el = <K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = terminalText(text);
  return e;
};
const who = (a: Ev["actor"]) => `${a.id} (${a.kind})`;
const json = (v: unknown) => JSON.stringify(v, null, 2);

function markdown(text: string): HTMLElement {
  const d = el("div", "md");
  d.innerHTML = md.render(terminalText(text));
  return d;
}

/** What decides whether an item is drawn again. */
function signature(i: Item): string {
  switch (i.type) {
    case "message":
      return `${i.text.length}:${i.done}`;
    case "tool":
      return `${i.status}:${i.output?.length ?? -1}`;
    case "approval":
      return `${i.decision}`;
    default:
      return "";
  }
}

function diffBlock(edit: { path: string; oldText: string | null; newText: string }, index: number, item: Item): HTMLElement {
  const box = el("div", "diff");
  const head = el("div", "diff-head");
  head.append(el("span", "diff-path", edit.path));
  const open = el("button", "open-diff", "Open Diff");
  open.dataset.seq = String(item.seq);
  open.dataset.index = String(index);
  head.append(open);
  box.append(head);
  const pre = el("pre", "diff-body");
  for (const line of (edit.oldText ?? "").split("\n")) if (edit.oldText !== null) pre.append(el("div", "del", `- ${line}`));
  for (const line of edit.newText.split("\n")) pre.append(el("div", "add", `+ ${line}`));
  box.append(pre);
  return box;
}

function draw(i: Item): HTMLElement {
  const row = el("div", `item ${i.type}`);
  row.dataset.seq = String(i.seq);
  switch (i.type) {
    case "prompt": {
      row.append(el("div", "who", who(i.actor)));
      row.append(el("div", "text", i.text));
      break;
    }
    case "message": {
      row.classList.add(i.role);
      if (!i.done) row.classList.add("streaming");
      if (i.role === "reasoning") {
        const d = el("details");
        d.append(el("summary", undefined, "thinking"));
        d.append(el("div", "text", i.text));
        row.append(d);
      } else row.append(markdown(i.text));
      if (i.truncated) row.append(el("div", "dim", "(cut: the message was longer than the log keeps)"));
      break;
    }
    case "tool": {
      row.dataset.status = i.status;
      row.dataset.kind = i.kind;
      const d = el("details");
      d.open = i.edits.length > 0 || i.status === "running";
      const icon = i.status === "running" ? "⧗" : i.status === "ok" ? "✓" : "✗";
      d.append(el("summary", undefined, `${icon} ${i.name}: ${i.title}`));
      if (i.plan)
        d.append(
          ...i.plan.map((p) =>
            el("div", `plan ${p.status}`, `${p.status === "completed" ? "☑" : p.status === "in_progress" ? "◐" : "☐"} ${p.content}`),
          ),
        );
      if (i.edits.length) d.append(...i.edits.map((edit, k) => diffBlock(edit, k, i)));
      else {
        d.append(el("div", "label", "input"));
        d.append(el("pre", "input", json(i.input)));
      }
      if (i.output !== null) {
        d.append(el("div", "label", i.status === "error" ? "error" : "result"));
        d.append(el("pre", "output", `${i.output}${i.truncated ? "\n(cut)" : ""}`));
      }
      row.append(d);
      break;
    }
    case "approval": {
      row.append(el("div", "text", `⚠ ${i.summary}`));
      if (i.decision === null) {
        const buttons = el("div", "buttons");
        for (const choice of CHOICES) {
          const b = el("button", choice === "Deny" ? "deny" : "allow", choice);
          b.dataset.approval = i.id;
          b.dataset.choice = choice;
          buttons.append(b);
        }
        row.append(buttons);
      } else
        row.append(el("div", "dim", `${i.decision.replace("_", " ")}${i.by ? ` by ${who(i.by)}` : ""}${i.reason ? `: ${i.reason}` : ""}`));
      break;
    }
    case "note": {
      row.append(el("div", "text", `✎ ${i.text}${i.anchor ? ` (${i.anchor.path}${i.anchor.line ? `:${i.anchor.line}` : ""})` : ""}`));
      row.append(el("div", "who", who(i.actor)));
      break;
    }
    case "error":
      row.append(el("div", "text", i.text));
      break;
    case "stop":
      row.append(el("div", "text", `■ stopped by ${who(i.actor)}`));
      break;
    case "turn":
      row.append(el("div", "dim", i.stoppedBy ? "turn stopped" : `turn ended: ${i.state}${i.reason ? ` (${i.reason})` : ""}`));
      break;
  }
  return row;
}

function render(): void {
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  for (const i of conv.items) {
    const sig = signature(i);
    const had = drawn.get(i);
    if (had && had.sig === sig) continue;
    const next = draw(i);
    // A folded tool call stays as the reader left it.
    const wasOpen = had?.el.querySelector("details")?.open;
    if (had && wasOpen !== undefined) next.querySelector("details")!.open = wasOpen || next.querySelector("details")!.open;
    if (had) had.el.replaceWith(next);
    else list.append(next);
    drawn.set(i, { el: next, sig });
  }
  stateEl.textContent = conv.state === "unknown" ? "" : conv.state;
  stateEl.dataset.state = conv.state;
  const u = conv.usage;
  usageEl.textContent = u.reports ? `tokens: ${u.input} in, ${u.output} out${u.cached ? `, ${u.cached} cached` : ""}` : "";
  stopBtn.disabled = conv.state !== "busy" && !sending;
  sendBtn.disabled = sending;
  if (atBottom) list.scrollTop = list.scrollHeight;
}

function send(): void {
  const text = prompt.value;
  if (!text.trim() || sending) return;
  sending = true;
  statusEl.textContent = "";
  vscode.postMessage({ type: "send", text });
  prompt.value = "";
  render();
}

prompt.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    send();
  }
});
sendBtn.addEventListener("click", send);
stopBtn.addEventListener("click", () => vscode.postMessage({ type: "stop" }));
list.addEventListener("click", (e) => {
  const t = e.target as HTMLElement;
  if (t.dataset.approval) {
    vscode.postMessage({ type: "approve", id: t.dataset.approval, choice: t.dataset.choice });
    for (const b of Array.from(t.parentElement?.querySelectorAll<HTMLButtonElement>("button") ?? [])) b.disabled = true;
    return;
  }
  if (t.classList.contains("open-diff")) {
    const item = conv.items.find((i) => i.seq === Number(t.dataset.seq));
    const edit = item?.type === "tool" ? item.edits[Number(t.dataset.index)] : undefined;
    if (edit) vscode.postMessage({ type: "diff", edit, tool: item?.type === "tool" ? item.name : "" });
  }
});

window.addEventListener("message", (m: MessageEvent<FromHost>) => {
  const msg = m.data;
  if (msg.type === "events") {
    received += msg.events.length;
    document.body.dataset.received = String(received);
    if (statusEl.dataset.tone === "loading" && msg.events.length) statusEl.textContent = statusEl.dataset.tone = "";
    let changed = false;
    for (const e of msg.events) changed = fold(conv, e) || changed;
    if (changed) render();
  } else if (msg.type === "status") {
    statusEl.textContent = terminalText(msg.text, { oneLine: true });
    statusEl.dataset.tone = msg.tone ?? "";
  } else if (msg.type === "busy") {
    sending = msg.sending;
    render();
  }
});
statusEl.textContent = "reading the session's log…";
statusEl.dataset.tone = "loading";
// The page draws the prompt box disabled: what is typed before Enter sends it (a slow webview's script not run yet)
// would be lost as a stray new line.
prompt.disabled = false;
render();
vscode.postMessage({ type: "ready" });
