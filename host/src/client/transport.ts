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
import { join } from "node:path";
import { HutchError } from "@hutch/shared/base";
import { HOME_FILES } from "../paths.ts";

export type DaemonTarget =
  | { kind: "local"; socket: string }
  | { kind: "remote"; name: string; url: string; token: string; cert: string; fingerprint: string };

export interface Transport {
  readonly target: DaemonTarget;
  /** The daemon's address for people and logs: the socket path, or the remote's URL. */
  readonly where: string;
  /** An HTTP request to a daemon path (`/v1/...`); throws when the daemon cannot be reached. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** A WebSocket to a daemon path, naming the client with `headers`. */
  websocket(path: string, headers: Record<string, string>): WebSocket;
}

/** The daemon that serves this home on this machine. */
export function localTarget(home: string): DaemonTarget {
  return { kind: "local", socket: join(home, HOME_FILES.socket) };
}

/** TLS errors that mean the server's certificate is not the pinned one (BoringSSL's words, as Bun reports them). */
const CERT_ERROR = /certificate|self.signed|SSL|TLS|UNABLE_TO_VERIFY|ERR_TLS/i;

export function transport(target: DaemonTarget): Transport {
  if (target.kind === "remote") return remoteTransport(target);
  const { socket } = target;
  return {
    target,
    where: socket,
    // The host must be at least 4 characters: Elysia finds the path by offset.
    fetch: (path, init = {}) => fetch(`http://localhost${path}`, { ...init, unix: socket }),
    // Bun's WebSocket takes headers as a second-argument option.
    websocket: (path, headers) => new WebSocket(`ws+unix://${socket}:${path}`, { headers } as unknown as string[]),
  };
}

function remoteTransport(target: Extract<DaemonTarget, { kind: "remote" }>): Transport {
  // Bun honours checkServerIdentity only once the chain verified against `ca`: the pin decides, the name does not.
  const tls = { ca: target.cert, checkServerIdentity: () => undefined };
  const auth = `Bearer ${target.token}`;
  return {
    target,
    where: target.url,
    async fetch(path, init = {}) {
      const headers = new Headers(init.headers);
      headers.set("authorization", auth);
      try {
        return await fetch(`${target.url}${path}`, { ...init, headers, tls } as RequestInit);
      } catch (err) {
        throw await explain(target, err as Error);
      }
    },
    websocket: (path, headers) =>
      new WebSocket(`${target.url.replace(/^https:/, "wss:")}${path}`, {
        headers: { ...headers, authorization: auth },
        tls,
      } as unknown as string[]),
  };
}

/** A failed connection to a remote, said as what to do: a changed certificate names the re-pin command. */
async function explain(target: Extract<DaemonTarget, { kind: "remote" }>, err: Error): Promise<Error> {
  if (!CERT_ERROR.test(err.message)) return err;
  const { fetchCertificate, mismatch } = await import("./cert.ts");
  const got = await fetchCertificate(target.url).catch(() => null);
  if (got && got.fingerprint !== target.fingerprint) return mismatch(target.name, target.url, target.fingerprint, got.fingerprint);
  return new HutchError("unavailable", `remote "${target.name}" (${target.url}): ${err.message}`, `check it: hutch remote list`);
}
