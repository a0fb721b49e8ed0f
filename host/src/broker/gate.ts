// One box's broker listener: the only way out of the box. The listener is
// the box's own, so a connection is this box's by where it arrived; nothing
// the box sends can claim otherwise. Two ways through:
//   CONNECT host:port   a plain tunnel to an allowlisted host, no TLS interception;
//   /<binding>/<path>   plain HTTP with the box's stub, sent on over verified
//                       TLS to the binding's upstream with the real secret.
// Everything else is refused with a status and a reason, and nothing is forwarded.
import { isIP } from "node:net";
import type { UnixSocketListener } from "bun";
import { chmodSync, readFileSync, rmSync, statSync } from "node:fs";
import type { Binding, BoxPolicy, EgressDecision } from "@hutch/shared";
import { blockedReason } from "./address.ts";
import { ChunkedDecoder, HttpError, bodyFraming, brokerResponse, concat, header, parseHead, reason, type RequestHead } from "./http.ts";
import { SocketReader } from "./reader.ts";
import { type Conn, handlers } from "./conn.ts";
import { splicer, type Splicer } from "./splice.ts";
import { growSendBuffer } from "./sockopt.ts";
import { renderCredential } from "./bindings.ts";
import { allowedBy } from "./policy.ts";
import { parseRoute, requestUrl, type Route } from "./route.ts";
import { approvalRule } from "./approve.ts";
import { digestOf } from "../approval/digest.ts";
import type { Verdict } from "../approval/verdict.ts";

/** How long a box may take to send a request head before the connection is dropped (a total, not an idle time). */
const HEAD_TIMEOUT_MS = 30_000;
/** A request body that sends no byte for this long is answered 408 and its connection closed. */
export const BODY_IDLE_MS = 30_000;
const CONNECT_TIMEOUT_MS = 15_000;
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
]);

export interface EgressFacts {
  host: string;
  port: number;
  method?: string;
  path?: string;
  binding?: string;
  status?: number;
  reason?: string;
  bytesUp: number;
  bytesDown: number;
  ms: number;
}

/** What a gate asks of the broker, always fresh (policy changes apply to the next request). */
export interface GateContext {
  boxId: string;
  policy(): BoxPolicy;
  bindings(): Record<string, Binding>;
  /** CONNECT pins: host -> address it may dial even if private. */
  pins(): Record<string, string>;
  /** Resolves a name to the one address CONNECT will dial. */
  lookup(host: string): Promise<string>;
  stub(binding: string): string;
  /** The real secret, unsealed now; undefined when it is not set. */
  secret(name: string): Promise<string | undefined>;
  record(decision: EgressDecision, facts: EgressFacts): void;
  /** Asking a person (host/src/approval), bound to this box; absent: nothing can be asked, so what needs asking is refused. */
  approvals?: GateApprovals;
}

/** The approval service as one box's gate sees it (wired in service.ts). */
export interface GateApprovals {
  /**
   * Whether this may go ahead: a grant already decided for exactly this
   * digest (`named`: the approval the request names), or a person's answer
   * now; resolves a refusal when the answer is no, or when nobody answered
   * in time. `gone` resolves when the requester went away: the wait ends
   * (the approval stays pending, for a retry of the same request).
   */
  ask(
    kind: "credential" | "egress",
    summary: string,
    digest: string,
    named: string | undefined,
    gone: Promise<void>,
    target?: string,
  ): Promise<Verdict | null>;
  /** A decision sent from inside the box: always refused (and logged); the message says why. */
  fromBox(id: string, decision: string): string;
}

/** The header a box names an earlier approval with, to send exactly what it approved. */
export const APPROVAL_HEADER = "x-hutch-approval";
/** The path on the broker's listener where a box might try to decide an approval itself (refused, logged). */
const SELF_DECIDE = /^\/(apr_[0-9a-z]{20})$/;

export interface GateLimits {
  /** See BODY_IDLE_MS; tests make it short. */
  bodyIdleMs: number;
}

export class Gate {
  private server?: UnixSocketListener<Conn>;
  private readonly conns = new Set<Conn>();
  /** Tunnels handed to the kernel copy path, cut when the gate closes. */
  private readonly tunnels = new Set<number>();
  private closed = false;
  private readonly limits: GateLimits;

  constructor(
    private readonly ctx: GateContext,
    /** The kernel copy path for tunnels (null: copy in JavaScript); asked for with the first tunnel. */
    private readonly kernelCopy: () => Splicer | null = splicer,
    limits: Partial<GateLimits> = {},
  ) {
    this.limits = { bodyIdleMs: BODY_IDLE_MS, ...limits };
  }

  async listen(path: string): Promise<void> {
    rmSync(path, { force: true });
    this.server = Bun.listen<Conn>({ unix: path, socket: handlers((c) => this.serve(c)) });
    chmodSync(path, 0o600);
  }

  close(): void {
    this.closed = true;
    if (this.tunnels.size > 0) this.kernelCopy()?.cut([...this.tunnels]);
    this.tunnels.clear();
    this.server?.stop(true);
    this.server = undefined;
    for (const c of this.conns) c.destroy();
    this.conns.clear();
  }

  /** Serves one connection: requests one after another until it closes or turns into a tunnel. */
  serve(conn: Conn): void {
    this.conns.add(conn);
    growSendBuffer(conn.fd);
    conn.onClose(() => this.conns.delete(conn));
    const reader = new SocketReader(conn);
    void (async () => {
      for (;;) {
        const timer = setTimeout(() => conn.destroy(), HEAD_TIMEOUT_MS);
        let head: RequestHead;
        try {
          const bytes = await reader.head();
          if (!bytes) return conn.end();
          head = parseHead(bytes);
        } catch (err) {
          return this.refuse(conn, err, { host: "", port: 0 }, true);
        } finally {
          clearTimeout(timer);
        }
        if (head.method === "CONNECT") return this.tunnel(conn, reader, head);
        const keepAlive = await this.forward(conn, reader, head);
        if (!keepAlive || conn.closed) return conn.end();
      }
    })().catch(() => conn.destroy());
  }

  private refuse(
    conn: Conn,
    err: unknown,
    facts: { host: string; port: number; method?: string; path?: string; binding?: string },
    close: boolean,
    started = performance.now(),
  ): void {
    const status = err instanceof HttpError ? err.status : 502;
    const message = (err as Error).message;
    this.ctx.record("denied", { ...facts, status, reason: message, bytesUp: 0, bytesDown: 0, ms: Math.round(performance.now() - started) });
    if (!conn.closed) {
      conn.write(brokerResponse(status, message, close));
      if (close) conn.end();
    }
  }

  // ---- CONNECT ----

  private async tunnel(conn: Conn, reader: SocketReader, head: RequestHead): Promise<void> {
    const started = performance.now();
    const target = parseAuthority(head.target);
    const facts = { host: target?.host ?? head.target.slice(0, 262), port: target?.port ?? 0, method: "CONNECT" };
    let address: string;
    try {
      if (!target) throw new HttpError(400, `CONNECT target ${JSON.stringify(head.target.slice(0, 80))} is not host:port`);
      const policy = this.ctx.policy();
      let rule = allowedBy(policy.allow, target.host, target.port);
      if (rule !== "ok" && policy.unlisted === "ask" && this.ctx.approvals) {
        const verdict = await this.askEgress(reader, target, facts);
        if (!verdict) return conn.end();
        if (!verdict.allow) throw new HttpError(verdict.status, verdict.message);
        rule = "ok";
      }
      if (rule === "host-other-port")
        throw new HttpError(
          403,
          `port ${target.port} is not allowed for ${target.host}; allow it: hutch box policy BOX --allow ${target.host}:${target.port}`,
        );
      if (!rule)
        throw new HttpError(
          403,
          `${target.host} is not on this box's allowlist; allow it: hutch box policy BOX --allow ${target.host}${target.port === 443 ? "" : `:${target.port}`}`,
        );
      address = await this.resolve(target.host);
    } catch (err) {
      return this.refuse(conn, err, facts, true, started);
    }
    let upstream: Conn;
    try {
      let timer: Timer | undefined;
      const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("timed out")), CONNECT_TIMEOUT_MS)));
      const sock = await Promise.race([Bun.connect<Conn>({ hostname: address, port: target!.port, socket: handlers() }), timeout]).finally(
        () => clearTimeout(timer),
      );
      upstream = sock.data;
    } catch (err) {
      return this.refuse(
        conn,
        new HttpError(502, `cannot reach ${target!.host}:${target!.port} (${address}): ${(err as Error).message}`),
        facts,
        true,
        started,
      );
    }
    // Nothing moves until the tunnel is joined; what arrives meanwhile is held, in order.
    upstream.pause();
    if (conn.closed || this.closed) return upstream.destroy();
    const early = reader.detach();
    conn.write("HTTP/1.1 200 Connection established\r\n\r\n");
    const kernel = this.kernelCopy();
    if (kernel && conn.fd >= 0 && upstream.fd >= 0) return this.splice(kernel, conn, upstream, early, facts, started);
    const bytesBefore = conn.bytesIn;
    if (early.length > 0) upstream.write(early);
    for (const b of conn.takeHeld()) upstream.write(b);
    for (const b of upstream.takeHeld()) conn.write(b);
    conn.pipeTo(upstream);
    upstream.pipeTo(conn);
    conn.resume();
    upstream.resume();
    conn.onClose(() => upstream.end());
    upstream.onClose(() => conn.end());
    let recorded = false;
    const done = () => {
      if (recorded) return;
      recorded = true;
      this.ctx.record("allowed", {
        ...facts,
        status: 200,
        bytesUp: conn.bytesIn - bytesBefore + early.length,
        bytesDown: upstream.bytesIn,
        ms: Math.round(performance.now() - started),
      });
    };
    conn.onClose(done);
    upstream.onClose(done);
  }

  /**
   * A host the allowlist does not name, on a box whose policy asks: held
   * until a person answers. The digest is the host and port, so allow_always
   * (which also adds it to the policy) and reject_always hold for that
   * destination; allow_once lets this one connection through.
   */
  private askEgress(
    reader: SocketReader,
    target: { host: string; port: number },
    facts: { host: string; port: number },
  ): Promise<Verdict | null> {
    const where = target.port === 443 ? target.host : `${target.host}:${target.port}`;
    const summary = `a connection to ${where}, which this box's allowlist does not name (CONNECT, not intercepted)`;
    return this.ctx.approvals!.ask(
      "egress",
      summary,
      digestOf(["egress", facts.host, String(facts.port)]),
      undefined,
      reader.gone(),
      where,
    );
  }

  /** The tunnel's bytes from here on are copied by the kernel (splice.ts); the decision is recorded when it ends. */
  private async splice(
    kernel: Splicer,
    conn: Conn,
    upstream: Conn,
    early: Uint8Array,
    facts: Pick<EgressFacts, "host" | "port" | "method">,
    started: number,
  ): Promise<void> {
    let up = 0;
    let down = 0;
    const ended = (reason?: string, after: { up: number; down: number } = { up: 0, down: 0 }) =>
      this.ctx.record("allowed", {
        ...facts,
        status: 200,
        ...(reason ? { reason } : {}),
        bytesUp: up + after.up,
        bytesDown: down + after.down,
        ms: Math.round(performance.now() - started),
      });
    const cut = (reason?: string) => {
      conn.destroy();
      upstream.destroy();
      ended(reason);
    };
    const toUpstream = (b: Uint8Array) => {
      up += b.length;
      upstream.write(b);
    };
    if (early.length > 0) toUpstream(early);
    // Whatever either side sent before the handover goes across first, in order, and is on its way before the fds change hands.
    for (;;) {
      conn.takeHeld().forEach(toUpstream);
      for (const b of upstream.takeHeld()) {
        down += b.length;
        conn.write(b);
      }
      const drained = (await conn.drained()) && (await upstream.drained());
      if (!drained || this.closed) return cut();
      if (!conn.holds && !upstream.holds) break;
    }
    const a = kernel.take(conn);
    const b = kernel.take(upstream);
    if (a < 0 || b < 0) {
      // Only if dup failed (out of fds): the tunnel ends, as it would on any resource error.
      for (const fd of [a, b]) if (fd >= 0) kernel.drop(fd);
      return cut("no file descriptor for the tunnel");
    }
    const { id, done } = kernel.join(a, b);
    this.tunnels.add(id);
    const r = await done;
    this.tunnels.delete(id);
    ended(r.error, r);
  }

  /** The one address CONNECT dials: a pin, a literal, or the first DNS answer, checked once and used as is. */
  private async resolve(host: string): Promise<string> {
    const pinned = this.ctx.pins()[host.toLowerCase()];
    if (pinned) return pinned;
    const literal = host.startsWith("[") ? host.slice(1, -1) : host;
    const address = isIP(literal)
      ? literal
      : await this.ctx.lookup(host).catch(() => {
          throw new HttpError(502, `${host} does not resolve`);
        });
    const blocked = blockedReason(address);
    if (blocked) throw new HttpError(403, `${host} resolves to ${blocked}; only a pin in config.json (broker.pins) may reach it`);
    return address;
  }

  // ---- credentialed endpoints ----

  /** Forwards one request; true when the connection can carry another. */
  private async forward(conn: Conn, reader: SocketReader, head: RequestHead): Promise<boolean> {
    const started = performance.now();
    const close = (header(head, "connection") ?? "").toLowerCase() === "close" || head.version === "HTTP/1.0";
    const base: Omit<EgressFacts, "bytesUp" | "bytesDown" | "ms"> = {
      host: "",
      port: 0,
      method: head.method,
      path: head.target.slice(0, 1024),
    };
    let body: Uint8Array;
    let binding: Binding;
    let url: string;
    // What is checked below is what is sent: the normalised path (route.ts), never the raw target.
    let route: Route | null = null;
    let badTarget: unknown;
    try {
      route = parseRoute(head.target);
    } catch (err) {
      badTarget = err;
    }
    if (route) {
      base.binding = route.binding;
      base.path = (route.path + route.query).slice(0, 1024);
    }
    try {
      // The body is read even for a refusal, so the box is not cut off while it still sends.
      body = await readBody(reader, head, this.limits.bodyIdleMs);
      if (badTarget) throw badTarget;
      if (!route)
        throw new HttpError(
          403,
          `${head.target.slice(0, 80)}: the broker only forwards /<binding>/<path> (plain-HTTP proxying is refused; use https through CONNECT)`,
        );
      const found = this.ctx.bindings()[route.binding];
      if (!found && route.binding === "approvals") throw this.selfDecide(route.path, body);
      if (!found) throw new HttpError(404, `no binding named "${route.binding}"`);
      binding = found;
      base.host = binding.host;
      base.port = binding.port ?? 443;
      if (!this.ctx.policy().bindings.includes(route.binding))
        throw new HttpError(
          403,
          `binding "${route.binding}" is not enabled for this box; enable it: hutch box policy BOX --secret ${route.binding}`,
        );
      if (!binding.methods.includes(head.method)) throw new HttpError(405, `${head.method} is not allowed for binding "${route.binding}"`);
      const path = route.path;
      if (!binding.paths.some((p) => path.startsWith(p))) {
        throw new HttpError(
          403,
          `path ${path.slice(0, 200)} is not allowed for binding "${route.binding}" (it allows paths under ${binding.paths.join(", ").slice(0, 200)})`,
        );
      }
      url = requestUrl(`https://${binding.address ? bracket(binding.address) : binding.host}:${base.port}`, route.path + route.query);
      const presented = header(head, binding.header);
      if (presented === undefined || presented !== renderCredential(binding.format, this.ctx.stub(route.binding))) {
        throw new HttpError(403, `the credential in ${binding.header} is not this box's stub for "${route.binding}"`);
      }
    } catch (err) {
      this.refuse(conn, err, base, true, started);
      return false;
    }
    const headers = new Headers();
    for (const [name, value] of head.headers) {
      const lower = name.toLowerCase();
      if (HOP_BY_HOP.has(lower) || lower === binding.header.toLowerCase() || lower === APPROVAL_HEADER) continue;
      headers.append(name, value);
    }
    const rule = approvalRule(binding.approve, head.method, route.path);
    if (rule) {
      const verdict = await this.approve(reader, route, head, headers, body, rule);
      if (!verdict) return false;
      if (!verdict.allow) {
        this.refuse(conn, new HttpError(verdict.status, verdict.message), base, close, started);
        return !close;
      }
      base.reason = `approved: ${verdict.id}`;
    }
    const secret = await this.ctx.secret(binding.secret);
    if (secret === undefined) {
      this.refuse(
        conn,
        new HttpError(503, `secret "${binding.secret}" is not set; set it on the host: hutch secret set ${binding.secret}`),
        base,
        close,
        started,
      );
      return !close;
    }
    headers.set(binding.header, renderCredential(binding.format, secret));
    headers.set("host", base.port === 443 ? binding.host : `${binding.host}:${base.port}`);
    const abort = new AbortController();
    const onClose = () => abort.abort();
    conn.onClose(onClose);
    let res: Response;
    try {
      res = await fetch(url, {
        method: head.method,
        headers,
        ...(body.length > 0 ? { body } : {}),
        redirect: "manual",
        signal: abort.signal,
        decompress: false,
        // serverName: the certificate is checked against the binding's host (and SNI names it)
        // also when a pinned address is dialled. Unlike checkServerIdentity it keeps Bun's
        // connection pool, which is most of the per-request cost.
        tls: { ...(binding.ca ? { ca: caPem(binding.ca) } : {}), serverName: binding.host },
      } as RequestInit);
    } catch (err) {
      conn.offClose(onClose);
      this.refuse(conn, new HttpError(502, `upstream ${binding.host}: ${(err as Error).message}`), base, close, started);
      return !close;
    }
    const down = await this.relayResponse(conn, head, res, close);
    conn.offClose(onClose);
    this.ctx.record("injected", {
      ...base,
      status: res.status,
      bytesUp: body.length,
      bytesDown: down.bytes,
      ms: Math.round(performance.now() - started),
    });
    return down.complete && !close;
  }

  /**
   * Holds a request a binding's rule names until a person answers (or a
   * grant for exactly these bytes exists). The digest covers everything sent
   * but the credential: binding, method, path and query, each header (name
   * lowercased, in order) and the body; what is sent afterwards is exactly
   * this. null: the box went away while it waited (nothing is answered).
   */
  private async approve(
    reader: SocketReader,
    route: Route,
    head: RequestHead,
    headers: Headers,
    body: Uint8Array,
    rule: string,
  ): Promise<Verdict | null> {
    const approvals = this.ctx.approvals;
    if (!approvals)
      return {
        allow: false,
        status: 403,
        message: `${head.method} ${route.path.slice(0, 200)} needs a person's approval (rule "${rule}") and nobody can be asked here`,
      };
    const parts: (string | Uint8Array)[] = ["credential", route.binding, head.method, route.path + route.query];
    for (const [name, value] of headers) parts.push(name.toLowerCase(), value);
    parts.push(body);
    const digest = digestOf(parts);
    const named = header(head, APPROVAL_HEADER);
    const query = route.query.length > 1 ? ` ${route.query.slice(0, 200)}` : "";
    const summary = `${head.method} ${route.path.slice(0, 400)}${query} through "${route.binding}" with the user's credential (rule "${rule}"), ${body.length} byte${body.length === 1 ? "" : "s"} of body`;
    return approvals.ask("credential", summary, digest, named, reader.gone());
  }

  /** A box deciding an approval itself, through its own listener: refused and logged by the approval service. */
  private selfDecide(path: string, body: Uint8Array): HttpError {
    const m = SELF_DECIDE.exec(path);
    if (!m || !this.ctx.approvals) return new HttpError(404, 'no binding named "approvals"');
    let decision = "";
    try {
      decision = String((JSON.parse(new TextDecoder().decode(body)) as { decision?: unknown }).decision ?? "");
    } catch {
      decision = "";
    }
    return new HttpError(403, this.ctx.approvals.fromBox(m[1]!, decision));
  }

  /** Writes the upstream's answer back as HTTP/1.1: its length when it has one, else chunked. Streams (SSE) as it arrives. */
  private async relayResponse(conn: Conn, head: RequestHead, res: Response, close: boolean): Promise<{ bytes: number; complete: boolean }> {
    const noBody = head.method === "HEAD" || res.status === 204 || res.status === 304;
    const length = res.headers.get("content-length");
    const chunked = !noBody && length === null;
    let text = `HTTP/1.1 ${res.status} ${res.statusText || reason(res.status)}\r\n`;
    res.headers.forEach((value, name) => {
      if (HOP_BY_HOP.has(name) && name !== "content-length") return;
      if (name === "set-cookie") return;
      text += `${name}: ${value}\r\n`;
    });
    for (const cookie of res.headers.getSetCookie()) text += `set-cookie: ${cookie}\r\n`;
    if (chunked) text += "transfer-encoding: chunked\r\n";
    if (close) text += "connection: close\r\n";
    await write(conn, new TextEncoder().encode(`${text}\r\n`));
    let bytes = 0;
    if (noBody || !res.body) return { bytes, complete: true };
    const declared = length === null ? -1 : Number(length);
    if (NATIVE_BULK && declared >= BULK_BODY && conn.fd >= 0) return relayBulk(conn, res, declared);
    // readMany is Bun's (typed in bun-types, hidden here by the DOM lib's reader type).
    const body = res.body.getReader() as unknown as {
      readMany(): Promise<Bun.ReadableStreamDefaultReadManyResult<Uint8Array>> | Bun.ReadableStreamDefaultReadManyResult<Uint8Array>;
    };
    try {
      for (;;) {
        // Every chunk fetch has queued at once (on a bulk download ~512 KiB a call), and a wait only when the box is behind.
        const { done, value } = await body.readMany();
        if (done) break;
        let flowing = true;
        for (const chunk of value) {
          if (chunk.length === 0) continue;
          bytes += chunk.length;
          if (chunked) conn.write(`${chunk.length.toString(16)}\r\n`);
          flowing = conn.write(chunk);
          if (chunked) flowing = conn.write(CRLF);
        }
        if (!flowing && !(await conn.drained())) return { bytes, complete: false };
        if (conn.closed) return { bytes, complete: false };
      }
      if (chunked) await write(conn, LAST_CHUNK);
      return { bytes, complete: true };
    } catch {
      // The upstream cut the stream: the box sees its connection end mid-body, as it would direct.
      conn.destroy();
      return { bytes, complete: false };
    }
  }
}

/** Bodies with a length of at least this go to the box natively (relayBulk); smaller ones, and SSE, through JavaScript. */
const BULK_BODY = 256 * 1024;
/** Measured (and tested) on Linux only; elsewhere the JavaScript relay, which works on every platform. */
const NATIVE_BULK = process.platform === "linux";

/**
 * A large body with a length, from fetch straight into the box's socket
 * (Bun.write to its fd): no JavaScript per chunk, and about half the CPU of
 * reading fetch's stream (a 1 GiB download in scripts/bench/broker.ts:
 * 0.62–0.75× direct instead of 0.40–0.57×). The connection's own socket is
 * paused meanwhile (the reader holds it between requests), so nothing else
 * writes to the fd. Bun waits for the socket when the box reads slowly.
 */
async function relayBulk(conn: Conn, res: Response, length: number): Promise<{ bytes: number; complete: boolean }> {
  if (!(await conn.drained())) return { bytes: 0, complete: false };
  try {
    const bytes = await Bun.write(Bun.file(conn.fd), res);
    if (bytes === length) return { bytes, complete: true };
    // Shorter than its length (the upstream cut it): the box sees the connection end mid-body, as it would direct.
    conn.destroy();
    return { bytes, complete: false };
  } catch {
    // The box went away, or the upstream failed mid-body; how much left is not known, so none is counted.
    conn.destroy();
    return { bytes: 0, complete: false };
  }
}

const CRLF = new TextEncoder().encode("\r\n");
const LAST_CHUNK = new TextEncoder().encode("0\r\n\r\n");

/** Writes and waits until the connection took it all; false if it closed first. */
function write(conn: Conn, bytes: Uint8Array): Promise<boolean> {
  if (conn.closed) return Promise.resolve(false);
  if (bytes.length > 0) conn.write(bytes);
  return conn.drained();
}

/** The whole body, in memory (bounded by MAX_BODY); 408 when no byte of it arrives for idleMs. */
async function readBody(reader: SocketReader, head: RequestHead, idleMs: number): Promise<Uint8Array> {
  const framing = bodyFraming(head);
  if (framing.kind === "length") return framing.length === 0 ? new Uint8Array(0) : reader.exactly(framing.length, idleMs);
  const decoder = new ChunkedDecoder();
  let body: Uint8Array = new Uint8Array(0);
  let input = reader.take(reader.buf.length);
  for (;;) {
    const { body: parts, done } = decoder.feed(input);
    for (const p of parts) body = concat(body, p);
    if (done) {
      reader.buf = concat(decoder.rest(), reader.buf);
      return body;
    }
    if (!(await reader.more(idleMs))) throw new HttpError(400, "connection closed inside a chunked body");
    input = reader.take(reader.buf.length);
  }
}

/** `host:port` of a CONNECT (IPv6 in brackets). */
export function parseAuthority(target: string): { host: string; port: number } | null {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):([0-9]{1,5})$/.exec(target);
  if (!m) return null;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return null;
  return { host: m[1]!.toLowerCase(), port };
}

const caCache = new Map<string, { mtimeMs: number; pem: string }>();

/** A binding's CA file, reread only when it changes. */
function caPem(path: string): string {
  const mtimeMs = statSync(path).mtimeMs;
  const hit = caCache.get(path);
  if (hit && hit.mtimeMs === mtimeMs) return hit.pem;
  const pem = readFileSync(path, "utf8");
  caCache.set(path, { mtimeMs, pem });
  return pem;
}

function bracket(address: string): string {
  return isIP(address) === 6 ? `[${address}]` : address;
}
