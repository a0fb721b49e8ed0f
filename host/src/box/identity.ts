// A guest learns which box it is on every new connection: a VM woken from a
// warm pool's sleep was booted as the pool's box, and its hostname and
// HUTCH_BOX_ID must become the box that claimed it before any process of that
// box starts. The message goes first on the connection, before the broker's
// listener and any exec, and the guest handles stream-0 messages in order
// with the opens behind them (guest/PROTOCOL.md, Control stream).
import type { IdentityMsg } from "@hutch/shared";
import type { BoxService } from "./service.ts";

/** Tells each box's guest its name and id when its channel opens (guests with the `identity` capability). */
export function tellIdentity(boxes: BoxService): void {
  boxes.channelOpened.add((boxId, _dir, channel) => {
    if (!channel.hello.capabilities.includes("identity")) return;
    const row = boxes.byId(boxId);
    if (!row) return;
    const msg: IdentityMsg = { type: "identity", name: row.name, id: row.id };
    channel.mux.control(msg);
  });
}
