// A user's quota (UserQuota in shared/src/remote.ts): how many boxes they may
// hold at once, and the vCPUs and memory those boxes may be given in all. It
// is checked where a box is made (BoxService's `creating` veto), counting
// what the user holds: on one server, its boxes; in a fleet, every server's
// (the box directory, fleet/boxes.ts). The refusal names the quota, what the
// user holds and the next step.
import { HutchError, type UserQuota } from "@hutch/shared";

export interface Held {
  cpus: number;
  memoryMiB: number;
}

/** Throws when one more box given `want` would take `user` past `quota`. */
export function checkQuota(user: string, quota: UserQuota | null, held: Held[], want: Held): void {
  if (!quota) return;
  const raise = (flag: string) => `delete one of their boxes (hutch box list), or an admin raises it: hutch user quota ${user} ${flag} N`;
  if (quota.boxes !== undefined && held.length + 1 > quota.boxes)
    throw new HutchError(
      "denied",
      `user ${user}'s quota is ${quota.boxes} box${quota.boxes === 1 ? "" : "es"}, and they hold ${held.length}`,
      raise("--boxes"),
      { quota: "boxes" },
    );
  const cpus = held.reduce((n, h) => n + h.cpus, 0);
  if (quota.cpus !== undefined && cpus + want.cpus > quota.cpus)
    throw new HutchError(
      "denied",
      `user ${user}'s quota is ${quota.cpus} vCPU${quota.cpus === 1 ? "" : "s"}: their boxes have ${cpus}, and this one asks ${want.cpus}`,
      raise("--cpus"),
      { quota: "cpus" },
    );
  const memory = held.reduce((n, h) => n + h.memoryMiB, 0);
  if (quota.memoryMiB !== undefined && memory + want.memoryMiB > quota.memoryMiB)
    throw new HutchError(
      "denied",
      `user ${user}'s quota is ${quota.memoryMiB} MiB of memory: their boxes have ${memory} MiB, and this one asks ${want.memoryMiB} MiB`,
      raise("--memory"),
      { quota: "memoryMiB" },
    );
}
