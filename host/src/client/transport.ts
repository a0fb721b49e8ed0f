// How a client reaches a daemon: the one place that turns a daemon target
// into HTTP requests and WebSockets. Everything else (requests, tool streams,
// subscriptions, the IDE bridge's change feed, operations) asks this module,
// so a new kind of target changes this file and nothing else.
//
// Two targets. The home's unix socket (0600: the kernel says who connected).
// A remote (`hutch serve`): the same paths over HTTPS and WSS, an
// `Authorization: Bearer` header, and the pinned certificate as the only trust
// anchor. The pin is the identity, as in incus, so the host name need not be
// in the certificate; a server presenting any other certificate fails the
// handshake, before a byte of the request (and so the token) is sent.
//
// A remote may list several servers of one fleet, each with its own pin: the
// requests go to the one that answered last, and to the next when it cannot
// be reached, by the rule of ./failover.ts.
//
// The local socket's transport is in ./local-transport.ts, which the client
// of the home's daemon imports by itself (client/daemon.ts): none of this
// file's remote code is loaded on that path.
import { HutchError } from "@hutch/shared/base";
import { log } from "../log.ts";
import { failure, FailoverSocket, mayFailOver, resendable, tryOrder } from "./failover.ts";
import { localTransport } from "./local-transport.ts";
import type { DaemonTarget, RemoteServerTarget, Transport } from "./transport-types.ts";

export { localTarget } from "./local-transport.ts";
export type { DaemonTarget, RemoteServerTarget, Transport } from "./transport-types.ts";

/** TLS errors that mean the server's certificate is not the pinned one (BoringSSL's words, as Bun reports them). */
const CERT_ERROR = /certificate|self.signed|SSL|TLS|UNABLE_TO_VERIFY|ERR_TLS/i;

export function transport(target: DaemonTarget): Transport {
  return target.kind === "remote" ? remoteTransport(target) : localTransport(target);
}

const debug = log.create({ service: "client" });

function remoteTransport(target: Extract<DaemonTarget, { kind: "remote" }>): Transport {
  const { servers, name } = target;
  // Bun honours checkServerIdentity only once the chain verified against `ca`: the pin decides, the name does not.
  const tls = servers.map((s) => ({ ca: s.cert, checkServerIdentity: () => undefined }));
  const auth = `Bearer ${target.token}`;
  let current = Math.min(Math.max(target.first ?? 0, 0), servers.length - 1);
  const settle = (i: number) => {
    debug.debug("remote answered", { remote: name, server: servers[i]!.url });
    if (i === current) return;
    current = i;
    target.answered?.(servers[i]!.url);
  };
  const skip = (i: number, err: unknown) =>
    debug.debug("remote server unreachable, trying the next", { remote: name, server: servers[i]!.url, error: err });
  return {
    target,
    get where() {
      return servers[current]!.url;
    },
    async fetch(path, init = {}, opts = {}) {
      const headers = new Headers(init.headers);
      headers.set("authorization", auth);
      const resend = resendable({ method: init.method, headers, body: init.body });
      const failed: { server: number; err: Error }[] = [];
      for (const i of tryOrder(servers.length, current)) {
        const within = opts.answerWithinMs ? AbortSignal.timeout(opts.answerWithinMs) : undefined;
        const signal = within && init.signal ? AbortSignal.any([init.signal, within]) : (within ?? init.signal);
        try {
          const res = await fetch(`${servers[i]!.url}${path}`, { ...init, headers, tls: tls[i], signal } as RequestInit);
          settle(i);
          return res;
        } catch (err) {
          // The caller's own abort is not the server's failure.
          if (init.signal?.aborted || !mayFailOver(failure(err), resend)) throw await explain(name, servers[i]!, err as Error);
          failed.push({ server: i, err: err as Error });
          skip(i, err);
        }
      }
      throw await unreachable(name, servers, failed);
    },
    websocket(path, headers) {
      const open = (i: number) =>
        new WebSocket(`${servers[i]!.url.replace(/^https:/, "wss:")}${path}`, {
          headers: { ...headers, authorization: auth },
          tls: tls[i],
        } as unknown as string[]);
      if (servers.length === 1) return open(0);
      const answers = (i: number) =>
        fetch(`${servers[i]!.url}/v1/health`, { tls: tls[i], signal: AbortSignal.timeout(5000) } as RequestInit).then(
          () => true,
          () => false,
        );
      const order = tryOrder(servers.length, current);
      return new FailoverSocket(open, order, answers, { opened: settle, skipped: (i) => skip(i, "no answer") }) as unknown as WebSocket;
    },
  };
}

/** A failed connection to a remote's server, said as what to do: a changed certificate names the re-pin command. */
async function explain(name: string, server: RemoteServerTarget, err: Error): Promise<Error> {
  if (!CERT_ERROR.test(err.message)) return err;
  const { fetchCertificate, mismatch } = await import("./cert.ts");
  const got = await fetchCertificate(server.url).catch(() => null);
  if (got && got.fingerprint !== server.fingerprint) return mismatch(name, server.url, server.fingerprint, got.fingerprint);
  return new HutchError("unavailable", `remote "${name}" (${server.url}): ${err.message}`, `check it: hutch remote list`);
}

/**
 * No server of the remote answered. One server: its error, as before (a
 * request that may be retried retries it). Several: a changed certificate
 * first (it needs the user), else one error naming each server's failure.
 */
async function unreachable(name: string, servers: RemoteServerTarget[], failed: { server: number; err: Error }[]): Promise<Error> {
  const explained = await Promise.all(failed.map((f) => explain(name, servers[f.server]!, f.err)));
  if (explained.length === 1) return explained[0]!;
  const named = explained.find((e) => e instanceof HutchError);
  if (named) return named;
  return new Error(
    `no server of remote "${name}" answered: ${failed.map((f) => `${servers[f.server]!.url}: ${f.err.message}`).join("; ")}`,
  );
}
