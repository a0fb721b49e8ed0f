// E2B's control API (create, list, get, kill, timeout, pause, connect) for
// one authenticated user. Errors are E2B's shape, {code, message}, with the
// status the SDK maps to its error classes (401, 404, 409).
import { check, ConnectBody, firstError, HutchError, NewSandbox, TimeoutBody, type SandboxState } from "@hutch/shared";
import type { TSchema, Static } from "@sinclair/typebox";
import type { Principal } from "../../auth/service.ts";
import type { SandboxService } from "../../e2b/sandboxes.ts";

export function e2bError(err: unknown): Response {
  const e = err instanceof HutchError ? err : new HutchError("failed", String(err));
  const status = e.code === "not_ready" ? 409 : e.status;
  return Response.json({ code: status, message: e.hint ? `${e.message} (${e.hint})` : e.message }, { status });
}

async function body<S extends TSchema>(req: Request, schema: S, optional = false): Promise<Static<S>> {
  const text = await req.text();
  if (!text && optional) return {} as Static<S>;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HutchError("invalid", "the body is not JSON", "send a JSON object");
  }
  if (!check(schema, value)) throw new HutchError("invalid", `bad request body: ${firstError(schema, value)}`, "see E2B's API reference");
  return value;
}

const SANDBOX = /^\/(?:v2\/)?sandboxes\/([^/]+)(\/[a-z]+)?$/;

function filter(url: URL): { states?: SandboxState[]; metadata?: Record<string, string> } {
  const out: { states?: SandboxState[]; metadata?: Record<string, string> } = {};
  const state = url.searchParams.getAll("state").flatMap((s) => s.split(","));
  if (state.length > 0) {
    const bad = state.find((s) => s !== "running" && s !== "paused");
    if (bad) throw new HutchError("invalid", `state "${bad}": running or paused`, "filter by running, paused or both");
    out.states = state as SandboxState[];
  }
  const metadata = url.searchParams.get("metadata");
  if (metadata) out.metadata = Object.fromEntries(new URLSearchParams(metadata));
  return out;
}

export async function serveControl(service: SandboxService, p: Principal, req: Request): Promise<Response> {
  const url = new URL(req.url);
  const path = url.pathname.replace(/\/+$/, "");
  try {
    if (req.method !== "GET" && !p.scopes.includes("write") && !p.scopes.includes("admin"))
      throw new HutchError("denied", "this token is read-only", "ask for a token with --scope write");
    if (path === "/sandboxes" || path === "/v2/sandboxes") {
      if (req.method === "POST") return Response.json(await service.create(p.user, await body(req, NewSandbox)), { status: 201 });
      if (req.method === "GET") {
        // v1 lists running sandboxes only; v2 both unless filtered.
        const f = filter(url);
        return Response.json(service.list(p.user, path === "/sandboxes" && !f.states ? { ...f, states: ["running"] } : f));
      }
    }
    const m = SANDBOX.exec(path);
    if (m) {
      const id = decodeURIComponent(m[1]!);
      const action = m[2] ?? "";
      if (action === "" && req.method === "GET") return Response.json(service.describe(service.get(p.user, id), true));
      if (action === "" && req.method === "DELETE") {
        await service.kill(p.user, id);
        return new Response(null, { status: 204 });
      }
      if (action === "/timeout" && req.method === "POST") {
        service.setTimeout(p.user, id, (await body(req, TimeoutBody)).timeout);
        return new Response(null, { status: 204 });
      }
      if (action === "/refreshes" && req.method === "POST") {
        service.get(p.user, id);
        return new Response(null, { status: 204 });
      }
      if (action === "/pause" && req.method === "POST") {
        if (!(await service.pause(p.user, id)))
          throw new HutchError("conflict", `sandbox ${id} is already paused`, "resume it: Sandbox.connect(id)");
        return new Response(null, { status: 204 });
      }
      if ((action === "/connect" || action === "/resume") && req.method === "POST") {
        const b = await body(req, ConnectBody, true);
        const sb = service.get(p.user, id);
        if (action === "/resume" && service.state(sb) === "running")
          throw new HutchError("conflict", `sandbox ${id} is running`, "connect to it: Sandbox.connect(id)");
        const { sandbox, resumed } = await service.connect(p.user, id, b.timeout);
        return Response.json(sandbox, { status: resumed ? 201 : 200 });
      }
    }
    throw new HutchError(
      "not_found",
      `${req.method} ${path} is not part of the E2B API hutch serves`,
      "see the README: Using the E2B SDK with hutch",
    );
  } catch (err) {
    return e2bError(err);
  }
}
