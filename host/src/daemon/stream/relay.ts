// Joins one client stream (the CLI's leg, over a WebSocket) to one guest
// stream (the box's channel). Credit is passed end to end: a byte is credited
// back to its sender only once the far side consumed it, so the daemon holds
// at most one window per direction whatever the two ends do. DATA is passed
// on with forward(): the payload keeps the buffer it arrived in and only its
// header is rewritten, so the relay copies no data bytes itself.
import { Chan, GuestMsg, HostMsg, check, firstError, type MuxStream, type StreamHandlers } from "@hutch/shared";

export interface RelayEvents {
  /** The guest sent something that is not in the protocol: its channel must go. */
  onGuestViolation(reason: string): void;
  /** Input the client sent (sessions log what their driver types). Called before it is passed on. */
  onInput?(bytes: Uint8Array): void;
  /** The relay ended, from either side. */
  onClose?(): void;
}

/** Runs actions one after another, so a message never overtakes data still waiting for credit. */
function serial(): (step: () => unknown) => void {
  let tail: Promise<unknown> = Promise.resolve();
  return (step) => {
    tail = tail.then(step);
  };
}

/**
 * Keeps what a client sends on a stream the daemon is still opening (an
 * asleep box waking, a session's driver slot): the frames a client sends
 * right after its open would otherwise reach no handler and be lost (a
 * forwarded stream's open, stdin and eof arrive together). Nothing is
 * credited back meanwhile, so the client's window bounds what is kept.
 * relay() takes the stream over and replays what was kept, in order.
 */
export function holdEarly(client: MuxStream): void {
  client.autoCredit = false;
  const kept: ((h: StreamHandlers) => void)[] = [];
  client.handlers = {
    data: (chan, bytes) => kept.push((h) => h.data?.(chan, bytes)),
    eof: (chan) => kept.push((h) => h.eof?.(chan)),
    msg: (msg) => kept.push((h) => h.msg?.(msg)),
    close: (error) => kept.push((h) => h.close?.(error)),
  };
  early.set(client, kept);
}

const early = new WeakMap<MuxStream, ((h: StreamHandlers) => void)[]>();

export function relay(client: MuxStream, guest: MuxStream, events: RelayEvents): void {
  client.autoCredit = false;
  guest.autoCredit = false;
  const toGuest = serial();
  const toClient = serial();

  client.handlers = {
    data(chan, bytes) {
      if (chan !== Chan.stdin) {
        client.close({ code: "invalid", message: `clients send on channel 0 only, not ${chan}` });
        guest.close();
        return;
      }
      events.onInput?.(bytes);
      toGuest(() => guest.forward(chan, bytes).then((ok) => ok && client.consumed(bytes.length)));
    },
    eof(chan) {
      toGuest(() => guest.eof(chan));
    },
    msg(msg) {
      if (!check(HostMsg, msg)) {
        client.close({ code: "invalid", message: `bad message: ${firstError(HostMsg, msg)}` });
        guest.close();
        return;
      }
      toGuest(() => guest.msg(msg));
    },
    close(error) {
      events.onClose?.();
      toGuest(() => guest.close(error?.code === "channel_lost" ? undefined : error));
    },
  };

  guest.handlers = {
    data(chan, bytes) {
      if (chan !== Chan.stdout && chan !== Chan.stderr) {
        events.onGuestViolation(`guest sent data on channel ${chan}`);
        return;
      }
      toClient(() => client.forward(chan, bytes).then((ok) => ok && guest.consumed(bytes.length)));
    },
    eof(chan) {
      toClient(() => client.eof(chan));
    },
    msg(msg) {
      if (!check(GuestMsg, msg)) {
        events.onGuestViolation(`guest sent a malformed message: ${firstError(GuestMsg, msg)}`);
        return;
      }
      toClient(() => client.msg(msg));
    },
    close(error) {
      events.onClose?.();
      toClient(() => client.close(error));
    },
  };

  const kept = early.get(client);
  early.delete(client);
  for (const replay of kept ?? []) replay(client.handlers);
}
