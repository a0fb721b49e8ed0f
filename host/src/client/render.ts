// Events for people: one line each, output shown as the text it printed.
// Every string from the log was written by someone else (another user, the
// agent, the box) and goes through terminalText before it reaches this
// terminal; what the log stores is left as it was sent.
import { HutchError, isEvent, type SessionEvent } from "@hutch/shared";
import { count, stripTerminal, terminalJson, terminalText } from "@hutch/shared/text";
import type { DaemonClient } from "./daemon.ts";

/** A field that must stay on its line: a newline in it could forge a line of someone else's. */
const one = (s: string) => terminalText(s, { oneLine: true });
const time = (at: string) => one(at.slice(11, 19));
/** A box's terminal output as text (stripTerminal), with whatever else is a control escaped. */
export const plain = (s: string) => terminalText(stripTerminal(s));

export async function renderEvent(d: DaemonClient, e: SessionEvent): Promise<string> {
  const head = `#${e.seq} ${time(e.at)} ${one(e.actor.id)}`;
  if (!isEvent(e)) return `${head} ${one(e.kind)} (does not fit its schema) ${terminalJson(e.data)}`;
  switch (e.kind) {
    case "output.appended": {
      if (e.data.snapshot) return `${head} (screen redrawn)`;
      const bytes = await d.bytes(`/v1/sessions/${e.session}/output/${e.data.chunk}`).catch((err) => {
        // Dropped to keep the session under its output cap: its output.dropped event says so further on.
        if (err instanceof HutchError && err.data?.dropped === true) return null;
        throw err;
      });
      if (!bytes) return `${head} │ [${count(e.data.length, "byte")} of output dropped]`;
      const text = plain(new TextDecoder().decode(bytes)).trimEnd();
      return text
        ? text
            .split("\n")
            .map((l) => `${head} │ ${l}`)
            .join("\n")
        : `${head} │`;
    }
    case "output.dropped":
      return `${head} ✂ ${count(e.data.bytes, "byte")} of older output dropped (chunks ${e.data.fromChunk}-${e.data.toChunk}, over the ${e.data.cap} cap of ${e.data.limit} bytes)`;
    case "input.sent":
      return `${head} > ${terminalJson(e.data.text)}`;
    case "annotation.added": {
      const a = e.data.anchor;
      const where = a ? ` @ ${one(a.path)}${a.line ? `:${a.line}` : ""}${a.seq ? ` (#${a.seq})` : ""}` : "";
      // A note of several lines: each line carries the head, so none can pass for another event.
      return `${terminalText(e.data.text)
        .split("\n")
        .map((l) => `${head} ✎ ${l}`)
        .join("\n")}${where}`;
    }
    case "session.event.imported": {
      // An event of a session elsewhere, shown as it was (its time and actor) with where it came from.
      const { from, at, actor, kind, data } = e.data;
      const origin = `[${one(from.remote)} ${one(from.session)}#${from.seq}]`;
      if (kind === "output.appended")
        return `#${e.seq} ${time(at)} ${one(actor.id)} ${origin} (terminal output, kept on ${one(from.remote)})`;
      const inner = await renderEvent(d, { session: from.session, seq: from.seq, at, actor, kind, data });
      return inner.replace(/^#\d+ /, `#${e.seq} ${origin} `);
    }
    case "session.work.returned":
      return `${head} ⇠ box ${one(e.data.box)} on ${one(e.data.remote)} brought back (${one(e.data.case)}): ${count(e.data.events, "event")} of ${count(e.data.sessions.length, "session")} appended`;
    case "session.moved": {
      const to = e.data.to;
      return `${head} ⇢ moved to ${one(to.remote)}: session ${one(to.session)} on box ${one(to.box)} (hutch --remote ${one(to.remote)} session log ${one(to.session)})`;
    }
    case "session.arrived": {
      const from = e.data.from;
      return `${head} ⇠ moved here from ${one(from.remote)}: session ${one(from.session)} on box ${one(from.box)} (its ${count(e.data.events, "event")} above)`;
    }
    case "session.driver.stolen":
      return `${head} driver stolen from ${one(e.data.from.id)} by ${one(e.data.to.id)}`;
    default:
      return `${head} ${e.kind} ${terminalJson(e.data)}`;
  }
}
