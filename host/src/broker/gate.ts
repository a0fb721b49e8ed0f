// One box's broker listener: the only way out of the box. The listener is
// the box's own, so a connection is this box's by where it arrived; nothing
// the box sends can claim otherwise. Two ways through:
//   CONNECT host:port   a plain tunnel to an allowlisted host, no TLS interception;
//   /<binding>/<path>   plain HTTP with the box's stub, sent on over verified
//                       TLS to the binding's upstream with the real secret.
// Everything else is refused with a status and a reason, and nothing is forwarded.
import { createServer, connect as tcpConnect, isIP, type Server, type Socket } from "node:net";
import { chmodSync, readFileSync, rmSync, statSync } from "node:fs";
import type { Binding, BoxPolicy, EgressDecision } from "@hutch/shared";
import { blockedReason } from "./address.ts";
import { ChunkedDecoder, HttpError, bodyFraming, brokerResponse, concat, header, parseHead, reason, type RequestHead } from "./http.ts";
import { SocketReader } from "./reader.ts";
import { renderCredential } from "./bindings.ts";
import { allowedBy } from "./policy.ts";

/** How long a box may take to send a request head before the connection is dropped. */
const HEAD_TIMEOUT_MS = 30_000;
const CONNECT_TIMEOUT_MS = 15_000;
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length"]);

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
  secret(name: string): string | undefined;
  record(decision: EgressDecision, facts: EgressFacts): void;
}

export class Gate {
  private server?: Server;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly ctx: GateContext) {}

  async listen(path: string): Promise<void> {
    rmSync(path, { force: true });
    const server = createServer((sock) => this.serve(sock));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => resolve());
    });
    chmodSync(path, 0o600);
    this.server = server;
  }

  close(): void {
    // With a callback, a server that is not listening is reported to it instead of as an 'error' event.
    this.server?.close(() => undefined);
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  /** Serves one connection: requests one after another until it closes or turns into a tunnel. */
  serve(sock: Socket): void {
    this.sockets.add(sock);
    sock.on("close", () => this.sockets.delete(sock));
    sock.on("error", () => sock.destroy());
    const reader = new SocketReader(sock);
    sock.on("timeout", () => sock.destroy());
    void (async () => {
      for (;;) {
        sock.setTimeout(HEAD_TIMEOUT_MS);
        let head: RequestHead;
        try {
          const bytes = await reader.head();
          if (!bytes) return sock.end();
          head = parseHead(bytes);
        } catch (err) {
          return this.refuse(sock, err, { host: "", port: 0 }, true);
        }
        sock.setTimeout(0);
        if (head.method === "CONNECT") return this.tunnel(sock, reader, head);
        const keepAlive = await this.forward(sock, reader, head);
        if (!keepAlive || sock.destroyed) return sock.end();
      }
    })().catch(() => sock.destroy());
  }

  private refuse(sock: Socket, err: unknown, facts: { host: string; port: number; method?: string; path?: string; binding?: string }, close: boolean, started = performance.now()): void {
    const status = err instanceof HttpError ? err.status : 502;
    const message = (err as Error).message;
    this.ctx.record("denied", { ...facts, status, reason: message, bytesUp: 0, bytesDown: 0, ms: Math.round(performance.now() - started) });
    if (!sock.destroyed) {
      sock.write(brokerResponse(status, message, close));
      if (close) sock.end();
    }
  }

  // ---- CONNECT ----

  private async tunnel(sock: Socket, reader: SocketReader, head: RequestHead): Promise<void> {
    const started = performance.now();
    const target = parseAuthority(head.target);
    const facts = { host: target?.host ?? head.target.slice(0, 262), port: target?.port ?? 0, method: "CONNECT" };
    let address: string;
    try {
      if (!target) throw new HttpError(400, `CONNECT target ${JSON.stringify(head.target.slice(0, 80))} is not host:port`);
      const rule = allowedBy(this.ctx.policy().allow, target.host, target.port);
      if (rule === "host-other-port") throw new HttpError(403, `port ${target.port} is not allowed for ${target.host}; allow it: hutch box policy BOX --allow ${target.host}:${target.port}`);
      if (!rule) throw new HttpError(403, `${target.host} is not on this box's allowlist; allow it: hutch box policy BOX --allow ${target.host}${target.port === 443 ? "" : `:${target.port}`}`);
      address = await this.resolve(target.host);
    } catch (err) {
      return this.refuse(sock, err, facts, true, started);
    }
    const upstream = tcpConnect({ host: address, port: target.port });
    upstream.setTimeout(CONNECT_TIMEOUT_MS, () => upstream.destroy(new Error("timed out")));
    let open = false;
    upstream.once("connect", () => {
      open = true;
      upstream.setTimeout(0);
      const early = reader.detach();
      sock.write("HTTP/1.1 200 Connection established\r\n\r\n");
      if (early.length > 0) upstream.write(early);
      sock.pipe(upstream);
      upstream.pipe(sock);
      sock.resume();
    });
    upstream.once("error", (err) => {
      if (!open) this.refuse(sock, new HttpError(502, `cannot reach ${target.host}:${target.port} (${address}): ${err.message}`), facts, true, started);
    });
    // pipe() ends each side when the other ends, after its buffered bytes are written:
    // destroying on close instead would cut off the tail of a download.
    sock.once("close", () => upstream.destroy());
    upstream.once("close", (hadError) => {
      if (hadError) sock.destroy();
      // The socket's own counters: no listener per chunk on the data path.
      if (open) this.ctx.record("allowed", { ...facts, status: 200, bytesUp: upstream.bytesWritten, bytesDown: upstream.bytesRead, ms: Math.round(performance.now() - started) });
    });
  }

  /** The one address CONNECT dials: a pin, a literal, or the first DNS answer, checked once and used as is. */
  private async resolve(host: string): Promise<string> {
    const pinned = this.ctx.pins()[host.toLowerCase()];
    if (pinned) return pinned;
    const literal = host.startsWith("[") ? host.slice(1, -1) : host;
    const address = isIP(literal) ? literal : await this.ctx.lookup(host).catch(() => {
      throw new HttpError(502, `${host} does not resolve`);
    });
    const blocked = blockedReason(address);
    if (blocked) throw new HttpError(403, `${host} resolves to ${blocked}; only a pin in config.json (broker.pins) may reach it`);
    return address;
  }

  // ---- credentialed endpoints ----

  /** Forwards one request; true when the connection can carry another. */
  private async forward(sock: Socket, reader: SocketReader, head: RequestHead): Promise<boolean> {
    const started = performance.now();
    const route = parseRoute(head.target);
    const close = (header(head, "connection") ?? "").toLowerCase() === "close" || head.version === "HTTP/1.0";
    const base = { host: "", port: 0, method: head.method, path: route?.path.slice(0, 1024) ?? head.target.slice(0, 1024), ...(route ? { binding: route.binding } : {}) };
    let body: Uint8Array;
    let binding: Binding;
    try {
      // The body is read even for a refusal, so the next request on this connection parses.
      body = await readBody(reader, head);
      if (!route) throw new HttpError(403, `${head.target.slice(0, 80)}: the broker only forwards /<binding>/<path> (plain-HTTP proxying is refused; use https through CONNECT)`);
      const found = this.ctx.bindings()[route.binding];
      if (!found) throw new HttpError(404, `no binding named "${route.binding}"`);
      binding = found;
      base.host = binding.host;
      base.port = binding.port ?? 443;
      if (!this.ctx.policy().bindings.includes(route.binding)) throw new HttpError(403, `binding "${route.binding}" is not enabled for this box; enable it: hutch box policy BOX --secret ${route.binding}`);
      if (!binding.methods.includes(head.method)) throw new HttpError(405, `${head.method} is not allowed for binding "${route.binding}"`);
      if (!binding.paths.some((p) => route.path.startsWith(p))) throw new HttpError(403, `path ${route.path.split("?")[0]!.slice(0, 200)} is not allowed for binding "${route.binding}"`);
      const presented = header(head, binding.header);
      if (presented === undefined || presented !== renderCredential(binding.format, this.ctx.stub(route.binding))) {
        throw new HttpError(403, `the credential in ${binding.header} is not this box's stub for "${route.binding}"`);
      }
    } catch (err) {
      this.refuse(sock, err, base, true, started);
      return false;
    }
    const secret = this.ctx.secret(binding.secret);
    if (secret === undefined) {
      this.refuse(sock, new HttpError(503, `secret "${binding.secret}" is not set; set it on the host: hutch secret set ${binding.secret}`), base, close, started);
      return !close;
    }
    const headers = new Headers();
    for (const [name, value] of head.headers) {
      const lower = name.toLowerCase();
      if (HOP_BY_HOP.has(lower) || lower === binding.header.toLowerCase()) continue;
      headers.append(name, value);
    }
    headers.set(binding.header, renderCredential(binding.format, secret));
    const port = binding.port ?? 443;
    headers.set("host", port === 443 ? binding.host : `${binding.host}:${port}`);
    const abort = new AbortController();
    const onClose = () => abort.abort();
    sock.once("close", onClose);
    let res: Response;
    try {
      res = await fetch(`https://${binding.address ? bracket(binding.address) : binding.host}:${port}${route!.path}`, {
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
      sock.off("close", onClose);
      this.refuse(sock, new HttpError(502, `upstream ${binding.host}: ${(err as Error).message}`), base, close, started);
      return !close;
    }
    const down = await this.relayResponse(sock, head, res, close);
    sock.off("close", onClose);
    this.ctx.record("injected", { ...base, status: res.status, bytesUp: body.length, bytesDown: down.bytes, ms: Math.round(performance.now() - started) });
    return down.complete && !close;
  }

  /** Writes the upstream's answer back as HTTP/1.1: its length when it has one, else chunked. Streams (SSE) as it arrives. */
  private async relayResponse(sock: Socket, head: RequestHead, res: Response, close: boolean): Promise<{ bytes: number; complete: boolean }> {
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
    await write(sock, new TextEncoder().encode(text + "\r\n"));
    let bytes = 0;
    if (noBody || !res.body) return { bytes, complete: true };
    try {
      for await (const chunk of res.body) {
        if (chunk.length === 0) continue;
        bytes += chunk.length;
        if (chunked) {
          // One write to the kernel for size line, data and CRLF, without copying the data.
          sock.cork();
          sock.write(`${chunk.length.toString(16)}\r\n`);
          sock.write(chunk);
          const flushed = sock.write(CRLF);
          sock.uncork();
          if (!flushed && !(await drained(sock))) return { bytes, complete: false };
          continue;
        }
        const ok = await write(sock, chunk);
        if (!ok) return { bytes, complete: false };
      }
      if (chunked) await write(sock, LAST_CHUNK);
      return { bytes, complete: true };
    } catch {
      // The upstream cut the stream: the box sees its connection end mid-body, as it would direct.
      sock.destroy();
      return { bytes, complete: false };
    }
  }
}

const CRLF = new TextEncoder().encode("\r\n");
const LAST_CHUNK = new TextEncoder().encode("0\r\n\r\n");

function write(sock: Socket, bytes: Uint8Array): Promise<boolean> {
  if (sock.destroyed) return Promise.resolve(false);
  if (sock.write(bytes)) return Promise.resolve(true);
  return drained(sock);
}

/** Resolves true once the socket drained, false if it closed first. */
function drained(sock: Socket): Promise<boolean> {
  if (sock.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      sock.off("drain", onDrain);
      sock.off("close", onClose);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    sock.once("drain", onDrain);
    sock.once("close", onClose);
  });
}

async function readBody(reader: SocketReader, head: RequestHead): Promise<Uint8Array> {
  const framing = bodyFraming(head);
  if (framing.kind === "length") return framing.length === 0 ? new Uint8Array(0) : reader.exactly(framing.length);
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
    if (!(await reader.more())) throw new HttpError(400, "connection closed inside a chunked body");
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

/** `/binding/rest` (or the same as an absolute URL naming the broker on loopback). */
export function parseRoute(target: string): { binding: string; path: string } | null {
  let path = target;
  const abs = /^http:\/\/(127\.0\.0\.1|localhost)(:[0-9]{1,5})?(\/.*)$/i.exec(target);
  if (abs) path = abs[3]!;
  const m = /^\/([a-z0-9][a-z0-9-]{0,31})(\/[^#]*|\?[^#]*)?$/.exec(path);
  if (!m) return null;
  const rest = m[2] ?? "/";
  return { binding: m[1]!, path: rest.startsWith("?") ? `/${rest}` : rest };
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
