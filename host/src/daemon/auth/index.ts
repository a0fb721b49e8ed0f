// HTTP for server mode's users, tokens and box shares. Who may call what is
// decided before (daemon/access.ts); here: parse, validate, call the service.
import { Elysia } from "elysia";
import type { AuthService, Principal } from "../../auth/service.ts";
import type { BoxService } from "../../box/service.ts";
import { AuthModel } from "./model.ts";

/** The address and certificate fingerprint a join string carries: the serving daemon's, null without --listen. */
export type ServeInfo = () => { url: string | null; fingerprint: string | null };

export function authController(auth: AuthService, boxes: BoxService, who: (req: Request) => Principal, serve: ServeInfo) {
  return new Elysia({ prefix: "/v1", tags: ["auth"], normalize: false })
    .get(
      "/whoami",
      ({ request }) => {
        const p = who(request);
        return { user: p.user, scopes: [...p.scopes], remote: p.remote };
      },
      { response: AuthModel.whoami, detail: { summary: "Who this connection is" } },
    )
    .get("/users", () => auth.users(), { response: AuthModel.users, detail: { summary: "List users (admin)" } })
    .post(
      "/users",
      ({ body, set }) => {
        set.status = 201;
        return auth.addUser(body.name);
      },
      { body: AuthModel.userAdd, response: AuthModel.user, detail: { summary: "Add a user (admin)" } },
    )
    .put("/users/:name/quota", ({ params, body }) => auth.setQuota(params.name, body), {
      params: AuthModel.userName,
      body: AuthModel.quota,
      response: AuthModel.user,
      detail: { summary: "Set a user's quota of boxes, vCPUs and memory; an empty body removes it (admin)" },
    })
    .get("/tokens", ({ query }) => auth.tokens(query.user), {
      query: AuthModel.tokenQuery,
      response: AuthModel.tokens,
      detail: { summary: "List tokens, never their secrets (admin)" },
    })
    .post(
      "/tokens",
      ({ body, set }) => {
        set.status = 201;
        return auth.createToken(body, serve());
      },
      { body: AuthModel.tokenCreate, response: AuthModel.tokenCreated, detail: { summary: "Create a token and its join string (admin)" } },
    )
    .post("/tokens/:id/revoke", ({ params }) => auth.revoke(params.id), {
      params: AuthModel.tokenId,
      response: AuthModel.token,
      detail: { summary: "Revoke a token; its open connections close at once (admin)" },
    })
    .get("/boxes/:ref/shares", ({ params }) => auth.shares(boxes.get(params.ref).id), {
      params: AuthModel.ref,
      response: AuthModel.shares,
      detail: { summary: "Who a box is shared with" },
    })
    .put("/boxes/:ref/shares", ({ params, body }) => auth.share(boxes.get(params.ref).id, body.user, body.mode), {
      params: AuthModel.ref,
      body: AuthModel.share,
      response: AuthModel.shareInfo,
      detail: { summary: "Share a box with a user, to read (watch) or to drive" },
    })
    .delete("/boxes/:ref/shares/:user", ({ params }) => auth.unshare(boxes.get(params.ref).id, params.user), {
      params: AuthModel.refUser,
      response: AuthModel.unshared,
      detail: { summary: "Stop sharing a box with a user" },
    });
}
