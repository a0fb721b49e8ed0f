// Events for people: one line each, output shown as the text it printed.
import type { SessionEvent } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";

const time = (at: string) => at.slice(11, 19);
// Terminal control sequences would repaint the watcher's own screen; show text only.
const plain = (s: string) => s.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "").replace(/\x1b\][^\x07]*\x07/g, "").replace(/[\x00-\x08\x0b-\x1f\x7f]/g, "");

export async function renderEvent(d: DaemonClient, e: SessionEvent): Promise<string> {
  const head = `#${e.seq} ${time(e.at)} ${e.actor.id}`;
  const data = e.data as Record<string, unknown>;
  switch (e.kind) {
    case "output.appended": {
      if (data.snapshot) return `${head} (screen redrawn)`;
      const text = plain(new TextDecoder().decode(await d.bytes(`/v1/sessions/${e.session}/output/${data.chunk}`))).trimEnd();
      return text ? text.split("\n").map((l) => `${head} │ ${l}`).join("\n") : `${head} │`;
    }
    case "input.sent":
      return `${head} > ${JSON.stringify(data.text)}`;
    case "annotation.added": {
      const a = data.anchor as { path: string; line?: number; seq?: number } | undefined;
      const where = a ? ` @ ${a.path}${a.line ? `:${a.line}` : ""}${a.seq ? ` (#${a.seq})` : ""}` : "";
      return `${head} ✎ ${data.text}${where}`;
    }
    case "session.driver.stolen": {
      const { from, to } = data as { from: { id: string }; to: { id: string } };
      return `${head} driver stolen from ${from.id} by ${to.id}`;
    }
    default:
      return `${head} ${e.kind} ${JSON.stringify(e.data)}`;
  }
}
