// The host end of a box's agent channel: connect, hello (with a timeout),
// then a host-role Mux. Everything the guest sends is untrusted: the Mux
// enforces framing, caps and credit; this module validates the hello.
import {
  check,
  firstError,
  GuestHello,
  HUTCH_VERSION,
  Mux,
  PROTOCOL_VERSION,
  ProtocolError,
  type GuestHello as GuestHelloT,
} from "@hutch/shared";
import type { ChannelEndpoint } from "./types.ts";
import { peerCred } from "./peercred.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "engine.channel" });

export interface Channel {
  mux: Mux;
  hello: GuestHelloT;
  close(): void;
  /**
   * Before a VM sleeps: holds everything the host writes from now on, and
   * resolves once the guest has read all that went before (a ping's pong),
   * so nothing the host sent is lost with the old QEMU's socket. The socket
   * closing meanwhile is not a lost channel. Rejects after timeoutMs.
   */
  hold?(timeoutMs: number): Promise<void>;
  /** The sleep did not happen: what was held goes out on the same socket. */
  release?(): void;
  /**
   * After a wake: the same connection, streams and all, on the restored
   * guest's new socket. True once the guest answered a ping on it; false
   * when it did not carry on (the caller opens a fresh connection).
   */
  reattach?(endpoint: ChannelEndpoint, timeoutMs: number): Promise<boolean>;
}

export interface ChannelEvents {
  /** The guest broke the protocol: the channel is already closed. */
  onProtocolError(err: ProtocolError): void;
  /** The connection ended (after a successful hello). */
  onLost(): void;
}

export class ChannelError extends Error {
  override name = "ChannelError";
  constructor(
    message: string,
    readonly kind: "timeout" | "protocol" | "refused" | "exited",
  ) {
    super(message);
  }
}

type Sock = Awaited<ReturnType<typeof Bun.connect>>;

/**
 * Connects to the guest, retrying while the socket is not there yet, and
 * resolves once the guest's hello arrived and checked out. Rejects with a
 * ChannelError when the deadline passes or the guest misbehaves.
 */
/** How often a connection waiting for its hello checks that the box still runs. */
const ALIVE_EVERY_MS = 500;

export async function openChannel(
  endpoint: ChannelEndpoint,
  timeoutMs: number,
  events: ChannelEvents,
  alive?: () => Promise<boolean>,
): Promise<Channel> {
  // A virtio-serial port can still carry bytes the guest wrote to the previous
  // connection: there, a bad first frame means "reconnect", not "broken guest".
  const retryBeforeHello = endpoint.leftovers === true;
  const deadline = Date.now() + timeoutMs;
  let last: Error = new Error("socket not there yet");
  while (Date.now() < deadline) {
    // A box that died while booting will never answer: say so now, not at the deadline.
    if (alive && !(await alive())) throw new ChannelError("the box stopped before its guest answered", "exited");
    try {
      // One connection waits for the whole deadline: a VM's QEMU holds our hello
      // unread until the guest opens its port, and every extra connection
      // would leave one more stale hello queued for it.
      return await connectOnce(endpoint, deadline, events, alive);
    } catch (err) {
      if (err instanceof ChannelError && err.kind !== "timeout" && !(retryBeforeHello && err.kind === "protocol")) throw err;
      last = err as Error;
      if (!(err instanceof ChannelError)) await Bun.sleep(25);
      else if (err.kind === "protocol") await Bun.sleep(250);
    }
  }
  if (last instanceof ChannelError) throw last;
  throw new ChannelError(`the guest did not answer within ${timeoutMs} ms (${last.message})`, "timeout");
}

function connectOnce(endpoint: ChannelEndpoint, deadline: number, events: ChannelEvents, alive?: () => Promise<boolean>): Promise<Channel> {
  return new Promise<Channel>((resolve, reject) => {
    let settled = false;
    const nonce = crypto.randomUUID();
    // Set when we close the socket ourselves (a protocol error): the error, not the close, explains it.
    let closedByUs = false;
    const pending: Uint8Array[] = [];
    let sock: Sock | undefined;
    let mux: Mux;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearInterval(watch);
      fn();
    };
    // A box that dies while we wait (a panic at boot) will never answer: fail now.
    const watch = setInterval(() => {
      void alive?.().then((up) => {
        if (up) return;
        settle(() => {
          transport.close();
          reject(new ChannelError("the box stopped before its guest answered", "exited"));
        });
      });
    }, ALIVE_EVERY_MS);
    // Sleeping: writes wait in pending, and the old socket's close is expected.
    let holding = false;
    const flush = () => {
      if (!sock || holding) return;
      while (pending.length > 0) {
        const head = pending[0]!;
        const n = sock.write(head);
        if (n < head.length) {
          pending[0] = head.subarray(Math.max(n, 0));
          return;
        }
        pending.shift();
      }
    };
    const transport = {
      write(bytes: Uint8Array) {
        if (pending.length > 0) {
          pending.push(bytes);
          return;
        }
        pending.push(bytes);
        flush();
      },
      close() {
        closedByUs = true;
        // Held across a sleep there is no socket to end: the streams end here.
        if (sock) sock.end();
        else mux?.lost("the channel was closed");
      },
    };
    mux = new Mux(transport, {
      role: "host",
      onHello(hello) {
        if (!check(GuestHello, hello)) {
          mux.fail(new ProtocolError(`guest hello is malformed: ${firstError(GuestHello, hello)}`));
          return;
        }
        if (hello.answers !== undefined && hello.answers !== nonce) {
          // An earlier connection's answer, still queued on a virtio port: a reconnect starts clean.
          mux.fail(new ProtocolError("the guest's hello answers an earlier connection"));
          return;
        }
        if (hello.protocol !== PROTOCOL_VERSION) {
          mux.fail(new ProtocolError(`guest speaks protocol ${hello.protocol}, this host speaks ${PROTOCOL_VERSION}`));
          return;
        }
        settle(() =>
          resolve({
            mux,
            hello,
            close: () => transport.close(),
            hold: async (timeoutMs) => {
              const answered = mux.roundTrip();
              holding = true;
              await withTimeout(answered, timeoutMs, "the guest did not answer a ping before its sleep");
            },
            release: () => {
              holding = false;
              flush();
            },
            reattach,
          }),
        );
      },
      onError(err) {
        if (settled) events.onProtocolError(err);
        else settle(() => reject(new ChannelError(`protocol error before hello: ${err.message}`, "protocol")));
      },
    });
    const timer = setTimeout(
      () => {
        settle(() => {
          transport.close();
          reject(new ChannelError("the guest accepted the connection but never sent its hello", "timeout"));
        });
      },
      Math.max(0, deadline - Date.now()),
    );
    // Whichever socket the connection is on (the first, or one a wake reattached it to).
    const closed = (s: Sock) => {
      // One a later socket replaced: nothing to do with the connection now.
      if (sock !== undefined && s !== sock) return;
      // The sleeping VM's QEMU went away with this socket; the connection waits for reattach.
      if (holding && s === sock) {
        sock = undefined;
        return;
      }
      const wasAlive = mux.alive;
      mux.lost("the guest closed the channel");
      if (!settled && !closedByUs) settle(() => reject(new Error("connection closed before hello")));
      // A close we made ourselves follows a protocol error, which reports it.
      else if (wasAlive && !closedByUs) events.onLost();
    };
    const reattach = async (to: ChannelEndpoint, timeoutMs: number): Promise<boolean> => {
      if (!holding || !mux.alive) return false;
      const until = Date.now() + timeoutMs;
      let next: Sock | undefined;
      while (!next && Date.now() < until) {
        next = await Bun.connect({
          unix: to.path,
          socket: {
            data: (_s, data) => mux.feed(data),
            drain: () => flush(),
            close: (s) => closed(s),
          },
        }).catch(() => undefined);
        if (!next) await Bun.sleep(25);
      }
      if (!next) return false;
      const refused = wrongPeer(to, (next as unknown as { fd?: number }).fd ?? -1);
      if (refused) {
        next.terminate();
        return false;
      }
      sock = next;
      holding = false;
      // The guest's clock stood still while it slept; a hello would have carried the time, this does.
      mux.control({ type: "clock", time: Date.now() });
      flush();
      try {
        await withTimeout(mux.roundTrip(), Math.max(1000, until - Date.now()), "no pong");
        return true;
      } catch {
        return false;
      }
    };
    Bun.connect({
      unix: endpoint.path,
      socket: {
        open(s) {
          const refused = wrongPeer(endpoint, (s as unknown as { fd?: number }).fd ?? -1);
          if (refused) {
            closedByUs = true;
            s.terminate();
            settle(() => reject(refused));
            return;
          }
          sock = s;
          mux.sendHello({ protocol: PROTOCOL_VERSION, client: "hutch", version: HUTCH_VERSION, time: Date.now(), nonce });
        },
        data(_s, data) {
          mux.feed(data);
        },
        drain() {
          flush();
        },
        close(s) {
          closed(s);
        },
        error(_s, err) {
          if (!settled) settle(() => reject(err));
        },
        connectError(_s, err) {
          settle(() => reject(err));
        },
      },
    }).catch((err: Error) => settle(() => reject(err)));
  });
}

function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: Timer | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/**
 * A socket someone else put in the guest's place (a box process that renamed
 * it and listened there) must not get the host's hello or its requests: the
 * listener has to be the process the engine started. Null when it is.
 */
function wrongPeer(endpoint: ChannelEndpoint, fd: number): ChannelError | null {
  if (endpoint.peerPid === undefined) return null;
  const cred = peerCred(fd);
  if (cred && endpoint.peerPid > 0 && cred.pid === endpoint.peerPid) return null;
  const seen = cred ? `pid ${cred.pid} (uid ${cred.uid})` : "a process whose credentials cannot be read";
  const expected = endpoint.peerPid > 0 ? `pid ${endpoint.peerPid}` : "unknown";
  logger.warn("refusing a channel peer that is not the box's guest", {
    socket: endpoint.path,
    seen: cred?.pid ?? -1,
    guest: endpoint.peerPid,
  });
  return new ChannelError(
    `the channel socket ${endpoint.path} is held by ${seen}, not by the box's guest (${expected}): refusing to talk to it`,
    "refused",
  );
}
