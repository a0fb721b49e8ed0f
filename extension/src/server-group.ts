// The sidebar's top level in a fleet: one row per server, its boxes under it.
// A fleet's box listing names each box's server (`Box.server`); a single
// daemon's does not, and then the tree stays flat, boxes at the top level.
// Pure, so the grouping is tested without VS Code.

/** What the grouping reads of a box. */
export interface Placed {
  server?: string;
}

export interface ServerGroups<B extends Placed> {
  /** The servers named by some box, by name, each with its boxes in the order given. */
  servers: { name: string; boxes: B[] }[];
  /** Boxes that name no server: every box outside a fleet. */
  rest: B[];
}

export function groupByServer<B extends Placed>(boxes: B[]): ServerGroups<B> {
  const by = new Map<string, B[]>();
  const rest: B[] = [];
  for (const b of boxes) {
    if (b.server === undefined || b.server === "") rest.push(b);
    else {
      const list = by.get(b.server);
      if (list) list.push(b);
      else by.set(b.server, [b]);
    }
  }
  const servers = [...by.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, list]) => ({ name, boxes: list }));
  return { servers, rest };
}

/**
 * A box as the tree keeps it after an update: a box runs where it was made,
 * so an update that does not name its server (a server's own change feed
 * speaks of its boxes without one) keeps the server it was listed with.
 */
export function keepServer<B extends Placed>(known: B | undefined, next: B): B {
  if (next.server !== undefined || known?.server === undefined) return next;
  return { ...next, server: known.server };
}
