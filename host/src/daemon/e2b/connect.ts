// Connect RPC, the JSON form the e2b SDK speaks to envd (connectrpc.com/docs/protocol):
// a unary call is a POST of application/json, answered with the message, or
// with an error body {code, message} and the HTTP status of its code. A
// server stream is a POST of application/connect+json holding one enveloped
// message (a flags byte, a 4-byte big-endian length, the JSON), answered 200
// with enveloped messages and an end-of-stream envelope (flag 0x02) that
// carries the error, if any. Malformed input is invalid_argument, never a
// crash: the listener answers it and goes on serving.
import { check, CONNECT_STATUS, firstError, HutchError, type ConnectCode } from "@hutch/shared";
import type { TSchema, Static } from "@sinclair/typebox";

/** The largest request message accepted (a SendInput chunk is the biggest the SDK sends). */
export const MAX_MESSAGE = 16 * 1024 * 1024;
const END_STREAM = 0x02;
const COMPRESSED = 0x01;

export class ConnectError extends Error {
  constructor(
    readonly code: ConnectCode,
    message: string,
  ) {
    super(message);
  }
}

/** A hutch error as the Connect code the SDK maps to its own error classes. */
export function toConnect(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof HutchError) {
    const code: ConnectCode = (
      {
        invalid: "invalid_argument",
        config: "invalid_argument",
        unauthorized: "unauthenticated",
        not_found: "not_found",
        not_ready: "unavailable",
        conflict: "already_exists",
        denied: "permission_denied",
        limited: "resource_exhausted",
        failed: "internal",
        unavailable: "unavailable",
      } as const
    )[err.code];
    return new ConnectError(code, err.hint ? `${err.message} (${err.hint})` : err.message);
  }
  return new ConnectError("internal", String(err));
}

export function errorResponse(err: unknown): Response {
  const e = toConnect(err);
  return Response.json({ code: e.code, message: e.message }, { status: CONNECT_STATUS[e.code] });
}

function parse<S extends TSchema>(schema: S, text: string, what: string): Static<S> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ConnectError("invalid_argument", `${what}: the message is not JSON`);
  }
  if (!check(schema, value)) throw new ConnectError("invalid_argument", `${what}: ${firstError(schema, value)}`);
  return value;
}

/** A unary request's message, checked. */
export async function unaryMessage<S extends TSchema>(req: Request, schema: S, what: string): Promise<Static<S>> {
  const type = req.headers.get("content-type") ?? "";
  if (!type.startsWith("application/json"))
    throw new ConnectError(
      "invalid_argument",
      `${what}: content-type ${type || "(none)"}; this server speaks Connect's JSON (application/json)`,
    );
  const body = await req.arrayBuffer();
  if (body.byteLength > MAX_MESSAGE) throw new ConnectError("resource_exhausted", `${what}: message over ${MAX_MESSAGE} bytes`);
  return parse(schema, new TextDecoder().decode(body || new ArrayBuffer(0)) || "{}", what);
}

/** A server-stream request's one message, unwrapped from its envelope and checked. */
export async function streamMessage<S extends TSchema>(req: Request, schema: S, what: string): Promise<Static<S>> {
  const type = req.headers.get("content-type") ?? "";
  if (!type.startsWith("application/connect+json"))
    throw new ConnectError("invalid_argument", `${what}: content-type ${type || "(none)"}; a stream speaks application/connect+json`);
  const body = new Uint8Array(await req.arrayBuffer());
  if (body.length < 5) throw new ConnectError("invalid_argument", `${what}: the request is not an enveloped message`);
  const flags = body[0]!;
  const len = new DataView(body.buffer, body.byteOffset).getUint32(1);
  if (flags & COMPRESSED) throw new ConnectError("unimplemented", `${what}: compressed messages are not supported`);
  if (len > MAX_MESSAGE) throw new ConnectError("resource_exhausted", `${what}: message over ${MAX_MESSAGE} bytes`);
  if (body.length !== 5 + len)
    throw new ConnectError("invalid_argument", `${what}: the envelope says ${len} bytes, ${body.length - 5} came`);
  return parse(schema, new TextDecoder().decode(body.subarray(5)) || "{}", what);
}

function envelope(flags: number, value: unknown): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(value));
  const out = new Uint8Array(5 + json.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, json.length);
  out.set(json, 5);
  return out;
}

export interface ServerStream {
  send(message: unknown): void;
  /** Ends the stream, with the error its end carries. */
  end(err?: unknown): void;
  /** Aborted when the client goes away or the stream ends. */
  signal: AbortSignal;
}

/**
 * Answers a server stream: `run` gets the stream to send on and end. A
 * keepalive message goes out every `keepaliveS` seconds (the SDK's
 * Keepalive-Ping-Interval), so proxies between keep the connection.
 */
export function serverStream(req: Request, keepalive: unknown, run: (s: ServerStream) => void | Promise<void>): Response {
  const ended = new AbortController();
  let ctl!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({
    start: (c) => {
      ctl = c;
    },
    cancel: () => ended.abort(),
  });
  req.signal.addEventListener("abort", () => ended.abort(), { once: true });
  const interval = Number(req.headers.get("keepalive-ping-interval"));
  const timer = interval > 0 ? setInterval(() => s.send(keepalive), Math.max(1, interval) * 1000) : undefined;
  const s: ServerStream = {
    signal: ended.signal,
    send(message) {
      if (ended.signal.aborted) return;
      try {
        ctl.enqueue(envelope(0, message));
      } catch {
        ended.abort();
      }
    },
    end(err) {
      if (ended.signal.aborted) return;
      const e = err === undefined ? undefined : toConnect(err);
      try {
        ctl.enqueue(envelope(END_STREAM, e ? { error: { code: e.code, message: e.message } } : {}));
        ctl.close();
      } catch {
        // the client is gone
      }
      ended.abort();
    },
  };
  ended.signal.addEventListener("abort", () => clearInterval(timer), { once: true });
  void Promise.resolve()
    .then(() => run(s))
    .catch((err) => s.end(err));
  return new Response(body, { status: 200, headers: { "content-type": "application/connect+json" } });
}
