// A remote of several servers (a fleet's: every server takes the same token
// and reaches every box): which failures of one server let the client try
// the next, and a WebSocket that opens on the first server that answers.
//
// The rule is the one that keeps a write from landing twice. A request goes
// to the next server when the failed connection never carried it (refused,
// unreachable, a TLS handshake that failed: nothing was sent), or when it may
// have reached the server but sending it again is harmless: a read (GET,
// HEAD, OPTIONS) or a write with an idempotency key, which the fleet answers
// once. A server that answered with an HTTP error answered: that is the
// answer, never a reason to ask another.
import { IDEMPOTENCY_HEADER } from "@hutch/shared/base";

/** How a request to one server failed: never sent, perhaps sent, or neither (the caller's own abort, a bad body). */
export type Failure = "not-sent" | "maybe-sent" | "other";

/** Connections that failed before a byte of the request left (BoringSSL's and Bun's codes). */
const NOT_SENT = new Set([
  "ECONNREFUSED",
  "ConnectionRefused",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
  "FailedToOpenSocket",
]);
/** A TLS handshake that failed (the certificate is not the pinned one): the request and its token were never sent. */
const TLS_CODE = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|^ERR_TLS|^ERR_SSL|HANDSHAKE/;
/** Connections that broke after they were made: the request may have reached the server. */
const MAYBE_SENT = new Set(["ECONNRESET", "ETIMEDOUT", "EPIPE", "ConnectionClosed", "ERR_SOCKET_CLOSED"]);

export function failure(err: unknown): Failure {
  const e = err as { code?: unknown; name?: unknown } | null;
  const code = typeof e?.code === "string" ? e.code : "";
  if (NOT_SENT.has(code) || TLS_CODE.test(code)) return "not-sent";
  if (MAYBE_SENT.has(code) || e?.name === "TimeoutError") return "maybe-sent";
  return "other";
}

/** Whether sending the request again cannot make it happen twice: a read, or a write with an idempotency key. */
export function resendable(init: { method?: string; headers?: Headers; body?: unknown }): boolean {
  // A streamed body is read as it is sent: there is nothing left to send again.
  if (init.body instanceof ReadableStream) return false;
  const method = (init.method ?? "GET").toUpperCase();
  return method === "GET" || method === "HEAD" || method === "OPTIONS" || Boolean(init.headers?.get(IDEMPOTENCY_HEADER));
}

/** Whether a request that failed this way may go to the next server. */
export function mayFailOver(f: Failure, resend: boolean): boolean {
  return f === "not-sent" || (f === "maybe-sent" && resend);
}

/** The servers in the order they are tried: the one that answered last, then the ones after it, wrapping. */
export function tryOrder(count: number, first: number): number[] {
  return Array.from({ length: count }, (_, k) => (first + k) % count);
}

/**
 * A WebSocket over several servers: it opens on the first of `order` and,
 * while it has not opened, a server that cannot be reached (`answers` says
 * whether an HTTP request there gets any answer) gives way to the next. A
 * server that answers but refused the upgrade (a 401, a 404) is the answer:
 * the caller sees that socket's error and close, as with one server. Once
 * open it is that server's socket; a later loss is the caller's to handle
 * (it opens a new one, which starts at the server that answered last).
 */
export class FailoverSocket {
  onopen: ((e: Event) => void) | null = null;
  onmessage: ((e: MessageEvent) => void) | null = null;
  onclose: ((e: CloseEvent) => void) | null = null;
  onerror: ((e: Event) => void) | null = null;
  private ws!: WebSocket;
  private kind: WebSocket["binaryType"] = "blob";
  private opened = false;
  private stopped = false;

  constructor(
    private readonly open: (server: number) => WebSocket,
    private readonly order: number[],
    private readonly answers: (server: number) => Promise<boolean>,
    private readonly events: { opened(server: number): void; skipped(server: number): void },
  ) {
    this.start(0);
  }

  private start(k: number): void {
    const server = this.order[k]!;
    const ws = this.open(server);
    this.ws = ws;
    ws.binaryType = this.kind;
    let error: Event | null = null;
    ws.onopen = (e) => {
      this.opened = true;
      this.events.opened(server);
      this.onopen?.(e);
    };
    ws.onmessage = (e) => this.onmessage?.(e);
    ws.onerror = (e) => {
      if (this.opened) this.onerror?.(e);
      else error = e;
    };
    ws.onclose = (e) => {
      const give = () => {
        if (error) this.onerror?.(error);
        this.onclose?.(e);
      };
      if (this.opened || this.stopped || k + 1 >= this.order.length) return give();
      void this.answers(server).then((answered) => {
        if (answered || this.stopped) return give();
        this.events.skipped(server);
        this.start(k + 1);
      });
    };
  }

  get binaryType(): WebSocket["binaryType"] {
    return this.kind;
  }
  set binaryType(t: WebSocket["binaryType"]) {
    this.kind = t;
    this.ws.binaryType = t;
  }
  get readyState(): number {
    return this.ws.readyState;
  }
  send(data: string | ArrayBufferLike | ArrayBufferView | Blob): void {
    this.ws.send(data as never);
  }
  close(code?: number, reason?: string): void {
    this.stopped = true;
    this.ws.close(code, reason);
  }
}
