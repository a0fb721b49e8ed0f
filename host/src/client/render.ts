// Events for people: one line each, output shown as the text it printed.
import { HutchError, isEvent, type SessionEvent } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";

const time = (at: string) => at.slice(11, 19);
// Terminal control sequences would repaint the watcher's own screen; show text only.
const plain = (s: string) =>
  s
    .replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "")
    .replace(/\x1b\][^\x07]*\x07/g, "")
    .replace(/[\x00-\x08\x0b-\x1f\x7f]/g, "");

export async function renderEvent(d: DaemonClient, e: SessionEvent): Promise<string> {
  const head = `#${e.seq} ${time(e.at)} ${e.actor.id}`;
  if (!isEvent(e)) return `${head} ${e.kind} (does not fit its schema) ${JSON.stringify(e.data)}`;
  switch (e.kind) {
    case "output.appended": {
      if (e.data.snapshot) return `${head} (screen redrawn)`;
      const bytes = await d.bytes(`/v1/sessions/${e.session}/output/${e.data.chunk}`).catch((err) => {
        // Dropped to keep the session under its output cap: its output.dropped event says so further on.
        if (err instanceof HutchError && err.data?.dropped === true) return null;
        throw err;
      });
      if (!bytes) return `${head} │ [${e.data.length} bytes of output dropped]`;
      const text = plain(new TextDecoder().decode(bytes)).trimEnd();
      return text
        ? text
            .split("\n")
            .map((l) => `${head} │ ${l}`)
            .join("\n")
        : `${head} │`;
    }
    case "output.dropped":
      return `${head} ✂ ${e.data.bytes} bytes of older output dropped (chunks ${e.data.fromChunk}-${e.data.toChunk}, over the ${e.data.cap} cap of ${e.data.limit} bytes)`;
    case "input.sent":
      return `${head} > ${JSON.stringify(e.data.text)}`;
    case "annotation.added": {
      const a = e.data.anchor;
      const where = a ? ` @ ${a.path}${a.line ? `:${a.line}` : ""}${a.seq ? ` (#${a.seq})` : ""}` : "";
      return `${head} ✎ ${e.data.text}${where}`;
    }
    case "session.event.imported": {
      // An event of a session elsewhere, shown as it was (its time and actor) with where it came from.
      const { from, at, actor, kind, data } = e.data;
      const origin = `[${from.remote} ${from.session}#${from.seq}]`;
      if (kind === "output.appended") return `#${e.seq} ${time(at)} ${actor.id} ${origin} (terminal output, kept on ${from.remote})`;
      const inner = await renderEvent(d, { session: from.session, seq: from.seq, at, actor, kind, data });
      return inner.replace(/^#\d+ /, `#${e.seq} ${origin} `);
    }
    case "session.work.returned":
      return `${head} ⇠ box ${e.data.box} on ${e.data.remote} brought back (${e.data.case}): ${e.data.events} events of ${e.data.sessions.length} session(s) appended`;
    case "session.moved":
      return `${head} ⇢ moved to ${e.data.to.remote}: session ${e.data.to.session} on box ${e.data.to.box} (hutch --remote ${e.data.to.remote} session log ${e.data.to.session})`;
    case "session.arrived":
      return `${head} ⇠ moved here from ${e.data.from.remote}: session ${e.data.from.session} on box ${e.data.from.box} (its ${e.data.events} events above)`;
    case "session.driver.stolen":
      return `${head} driver stolen from ${e.data.from.id} by ${e.data.to.id}`;
    default:
      return `${head} ${e.kind} ${JSON.stringify(e.data)}`;
  }
}
