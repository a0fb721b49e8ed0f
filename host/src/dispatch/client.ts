// `hutch dispatch` on the client: with --here the work tree is offloaded
// first (into a box the dispatch then owns) and the winner brought back into
// it afterwards, both through the daemon API only; in between the CLI follows
// the orchestration session, the dispatch itself running in the daemon. A
// Ctrl-C cancels it (the daemon tears its boxes down and keeps logs, diffs
// and verdicts), as `docker compose up` stops what it started.
import { type BringBackOutput, Events, HutchError, read, type Dispatch, type DispatchCreateBody, type SessionEvent } from "@hutch/shared";
import type { DaemonClient } from "../client/daemon.ts";
import { subscribe } from "../client/subscribe.ts";

export interface DispatchOptions extends Omit<DispatchCreateBody, "box" | "ownBox" | "workdir"> {
  /** Offload the work tree around cwd and bring the winner back into it. */
  here: boolean;
  cwd: string;
}

export interface DispatchOutcome {
  dispatch: Dispatch;
  bringBack: BringBackOutput | null;
}

export async function runDispatch(
  d: DaemonClient,
  opts: DispatchOptions,
  onEvent: (e: SessionEvent) => void,
  progress: (s: string) => void,
): Promise<DispatchOutcome> {
  const { here, cwd, ...rest } = opts;
  const body: DispatchCreateBody = { ...rest };
  if (here === (opts.from !== undefined))
    throw new HutchError(
      "invalid",
      "name exactly one of --from SNAP and --here",
      "hutch dispatch --here -k 3 --agent claude --check CMD -- TASK",
    );
  if (here) {
    const { offload, defaultBoxName } = await import("../workspace/offload.ts");
    const { findRepo } = await import("../workspace/git.ts");
    const repo = await findRepo(cwd);
    const box = `${defaultBoxName(repo.root).slice(0, 40)}-dsp-${crypto.randomUUID().slice(0, 6)}`;
    progress(`offloading ${repo.root} into box ${box}`);
    const r = await offload(d, { cwd, box }, progress);
    Object.assign(body, { box: r.box, ownBox: true, workdir: r.guestDir });
  }
  const started = await d.request<Dispatch>("POST", "/v1/dispatches", body);
  progress(`dispatch ${started.id}: ${opts.k} workers; watch it: hutch session watch ${started.session}`);
  let cancelling = false;
  const cancel = () => {
    if (cancelling) return;
    cancelling = true;
    progress(`cancelling dispatch ${started.id} (its boxes are deleted; logs, diffs and verdicts kept)`);
    void d.request("POST", `/v1/dispatches/${started.id}/cancel`).catch(() => undefined);
  };
  process.on("SIGINT", cancel);
  try {
    const sub = subscribe(d, started.session, 1, {
      event: (e) => {
        onEvent(e);
        if (read(e, Events.dispatchFinished)) sub.close();
      },
    });
    await sub.done;
  } finally {
    process.off("SIGINT", cancel);
  }
  const dispatch = await d.request<Dispatch>("GET", `/v1/dispatches/${started.id}`);
  if (!here || !dispatch.winnerBox) return { dispatch, bringBack: null };
  return { dispatch, bringBack: await bringWinnerHome(d, cwd, body.box!, dispatch.winnerBox, progress) };
}

/**
 * The winner is a fork of the box the work tree was offloaded into: it holds
 * the same repository, so the offload's record and refs are copied to its
 * name and bring-back runs on it as on the offloaded box.
 */
async function bringWinnerHome(
  d: DaemonClient,
  cwd: string,
  base: string,
  winner: string,
  progress: (s: string) => void,
): Promise<BringBackOutput> {
  const { findRepo, git } = await import("../workspace/git.ts");
  const { readRecord, writeRecord, offloadRef } = await import("../workspace/record.ts");
  const { bringBack } = await import("../workspace/bring-back.ts");
  const repo = await findRepo(cwd);
  const rec = await readRecord(repo.gitDir, base);
  if (!rec)
    throw new HutchError(
      "not_found",
      `the offload record of box ${base} is gone`,
      `bring it back by hand: hutch exec ${winner} -- git diff`,
    );
  await writeRecord(repo.gitDir, { ...rec, box: winner });
  for (const what of ["base", "index", "work"] as const) {
    const sha = (await git(repo.root, ["rev-parse", "--verify", "-q", offloadRef(base, what)], { ok: [1] })).stdout.trim();
    if (sha) await git(repo.root, ["update-ref", offloadRef(winner, what), sha]);
  }
  progress(`bringing the winner (box ${winner}) back`);
  return bringBack(d, { box: winner, cwd }, progress);
}
