// A tool stream to a box through the daemon: a WebSocket carrying guest
// protocol frames, with a host-role Mux on our end.
import { HutchError, HUTCH_VERSION, Mux, PROTOCOL_VERSION, ErrorCodes, type MuxStream, type StreamError } from "@hutch/shared/base";
import type { ToolOpen } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";

export interface ToolStream {
  stream: MuxStream;
  close(): void;
}

/** Maps a stream's close error to the CLI's named error (exit codes follow). */
export function streamError(e: StreamError): HutchError {
  const code =
    e.code in ErrorCodes
      ? (e.code as keyof typeof ErrorCodes)
      : e.code === "denied"
        ? "denied"
        : e.code === "channel_lost"
          ? "unavailable"
          : "failed";
  return new HutchError(code, e.message, e.hint);
}

/** States in which the daemon wakes a box before the stream reaches it (BoxService.awake). */
const WAKES = new Set(["asleep", "sleeping", "waking"]);

/**
 * Says on stderr that the box is being woken, when it is: the stream waits
 * for the wake, which the daemon does, so this only asks, beside the stream.
 */
function sayIfWaking(daemon: DaemonClient, box: string): void {
  daemon
    .request<{ name: string; state: string }>("GET", `/v1/boxes/${encodeURIComponent(box)}`)
    .then((b) => {
      if (WAKES.has(b.state)) process.stderr.write(`waking ${b.name}…\n`);
    })
    .catch(() => undefined);
}

/**
 * How long a stream may wait for its box's first word before the CLI asks
 * whether the box is waking. A running box answers in a few ms (10-18 ms on
 * 2 loaded cores); a wake takes 150-250 ms there (`box woke` in the daemon's
 * log). Asking on every stream cost `exec B -- true` ~8 ms (a second
 * connection and a box read on both sides: scripts/bench/README.md, cli.ts).
 */
const WAKE_NOTE_AFTER_MS = 25;

/** How long before a stream the daemon could not open is asked for once more. */
const REOPEN_AFTER_MS = 500;

/**
 * Opens a tool stream to `box`. A stream that failed before the daemon's
 * hello (so before the call was sent: nothing ran) for a reason the daemon
 * did not name, such as a fleet server forwarding it the moment its box
 * moved, is asked for once more; a named refusal (401, 403, 404) is final.
 */
export async function openToolStream(
  daemon: DaemonClient,
  box: string,
  call: ToolOpen,
  query: Record<string, string> = {},
): Promise<ToolStream> {
  try {
    return await openOnce(daemon, box, call, query);
  } catch (err) {
    if (!(err instanceof Unnamed)) throw err;
    await Bun.sleep(REOPEN_AFTER_MS);
    return openOnce(daemon, box, call, query);
  }
}

/** A stream that could not be opened, for no reason the daemon named. */
class Unnamed extends HutchError {}

function openOnce(daemon: DaemonClient, box: string, call: ToolOpen, query: Record<string, string>): Promise<ToolStream> {
  return new Promise((resolve, reject) => {
    const q = new URLSearchParams(query);
    // The headers name the client to the daemon.
    const path = `/v1/boxes/${encodeURIComponent(box)}/stream${q.size ? `?${q}` : ""}`;
    const ws = daemon.transport.websocket(path, daemon.headers);
    ws.binaryType = "arraybuffer";
    let ready = false;
    // Armed once the call is sent; the box's first frame (or the end) disarms it.
    let wakeNote: ReturnType<typeof setTimeout> | undefined;
    const mux = new Mux(
      { write: (b) => ws.send(b), close: () => ws.close() },
      {
        role: "host",
        onHello() {
          ready = true;
          resolve({ stream: mux.open(call), close: () => ws.close() });
          wakeNote = setTimeout(() => sayIfWaking(daemon, box), WAKE_NOTE_AFTER_MS);
          wakeNote.unref();
        },
        onError(err) {
          if (!ready) reject(new HutchError("failed", `daemon stream: ${err.message}`));
        },
      },
    );
    ws.onopen = () => mux.sendHello({ protocol: PROTOCOL_VERSION, client: "hutch-cli", version: HUTCH_VERSION });
    ws.onmessage = (e) => {
      if (ready) clearTimeout(wakeNote);
      mux.feed(new Uint8Array(e.data as ArrayBuffer));
    };
    ws.onclose = () => {
      clearTimeout(wakeNote);
      mux.lost("the daemon closed the stream");
      if (!ready) void refusal(daemon, path, "the daemon closed the stream before it started").then(reject);
    };
    ws.onerror = () => {
      if (!ready) void refusal(daemon, path, "could not open a stream to the daemon").then(reject);
    };
  });
}

/**
 * Why an upgrade was refused. A WebSocket client is not shown the refusal's
 * body, so the same path is asked again as a plain GET, which the daemon
 * answers with the same check (a remote's 401, 403 or 404) as JSON.
 */
async function refusal(daemon: DaemonClient, path: string, otherwise: string): Promise<HutchError> {
  const fallback = new Unnamed("unavailable", otherwise, "retry; see: hutch doctor");
  try {
    const res = await daemon.transport.fetch(path, { headers: daemon.headers });
    if (res.status !== 401 && res.status !== 403 && res.status !== 404) return fallback;
    return HutchError.fromBody(await res.json(), res.status);
  } catch (err) {
    return err instanceof HutchError ? err : fallback;
  }
}
