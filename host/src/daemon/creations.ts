// Who pays for a box (server mode): the per-token creation bucket
// (auth/limit.ts) is charged where a box is actually made, BoxService's
// `creating` veto, so every route that makes one is counted, the next one
// too. Each request runs with its payer, a remote principal's token; the local
// socket's requests pay nothing. Work that goes on making boxes after its
// request was answered (doctor's throwaway boxes, a dispatch's workers and
// graders) is paid for up front, all or none, and what it makes is then free:
// it is refused before it starts rather than failing half way.
import { AsyncLocalStorage } from "node:async_hooks";
import type { BoxService } from "../box/service.ts";
import { CreateLimiter } from "../auth/limit.ts";
import { principalOf } from "./actor.ts";
import type { Principal } from "../auth/service.ts";

type Payer = { key: string } | "paid";

export class CreationGate {
  private readonly payer = new AsyncLocalStorage<Payer | null>();

  constructor(readonly limiter = new CreateLimiter()) {}

  /** Charges each box boxes makes to the payer of the request that made it; returns what detaches it. */
  attach(boxes: BoxService): () => void {
    return boxes.creating.add(() => {
      const p = this.payer.getStore();
      if (p && p !== "paid") this.limiter.take(p.key);
    });
  }

  /** Runs each request app handles (and whatever it starts) with its payer; returns app. */
  wrap<A extends { handle: (req: Request) => Promise<Response> }>(app: A): A {
    const handle = app.handle;
    app.handle = (req) => this.as(principalOf(req), () => handle(req));
    return app;
  }

  /** Runs fn (and whatever it starts) with p as its payer: what the E2B listener serves, which is not the app. */
  as<T>(p: Principal | undefined, fn: () => T): T {
    return this.payer.run(p?.remote ? { key: p.token ?? `user ${p.user}` } : null, fn);
  }

  /** Takes n creations from the current payer now, all or none, and runs fn with the boxes it makes paid for. */
  prepaid<T>(n: number, fn: () => T): T {
    const p = this.payer.getStore();
    if (p && p !== "paid" && n > 0) this.limiter.take(p.key, Date.now(), n);
    return this.payer.run("paid", fn);
  }
}
