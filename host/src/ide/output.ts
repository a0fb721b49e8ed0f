// A log view shows what a terminal printed, not how many bytes: the bridge
// reads the bytes of each output.appended event in a batch (one request per
// chunk, however many events share it) and sends their text beside the
// events, escape sequences stripped. Escaping for display is the view's
// (the same terminalText every human renderer uses), once, at the end.
import { Events, HutchError, OUTPUT_TEXT_MAX, read, type OutputText, type SessionEvent } from "@hutch/shared";
import { stripTerminal } from "@hutch/shared/text";
import type { DaemonClient } from "../client/daemon.ts";

/** The text of each output.appended event in `events` (screen redraws are not new output). */
export async function outputTexts(d: Pick<DaemonClient, "bytes">, session: string, events: SessionEvent[]): Promise<OutputText[]> {
  const chunks = new Map<number, Promise<Uint8Array | null>>();
  const chunk = (n: number) => {
    let p = chunks.get(n);
    if (!p) {
      p = d.bytes(`/v1/sessions/${encodeURIComponent(session)}/output/${n}`).catch((err) => {
        // Dropped to keep the session under its output cap (its output.dropped event says so), or gone: no text.
        if (err instanceof HutchError && err.code === "not_found") return null;
        throw err;
      });
      chunks.set(n, p);
    }
    return p;
  };
  const out: OutputText[] = [];
  for (const e of events) {
    const o = read(e, Events.outputAppended);
    if (!o || o.snapshot) continue;
    const bytes = await chunk(o.chunk);
    if (!bytes) {
      out.push({ seq: e.seq, text: "", dropped: true });
      continue;
    }
    const text = stripTerminal(new TextDecoder().decode(bytes.subarray(o.offset, o.offset + o.length)));
    out.push({ seq: e.seq, text: text.slice(0, OUTPUT_TEXT_MAX), ...(text.length > OUTPUT_TEXT_MAX ? { cut: true } : {}) });
  }
  return out;
}
