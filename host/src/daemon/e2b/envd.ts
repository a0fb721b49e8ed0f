// The in-box API (envd) of one sandbox: the process and filesystem services
// over Connect, and the HTTP endpoints the SDK calls beside them (/health,
// /files). The handlers hold no logic: the work is in host/src/e2b/.
import {
  CloseStdinRequest,
  ConnectRequest,
  HutchError,
  ListDirRequest,
  ListRequest,
  MoveRequest,
  PathRequest,
  SendInputRequest,
  SendSignalRequest,
  StartRequest,
  UpdateRequest,
  WatchDirRequest,
  type ProcessEvent,
  type WrittenFile,
} from "@hutch/shared";
import * as files from "../../e2b/files.ts";
import type { SandboxService, Sandbox } from "../../e2b/sandboxes.ts";
import type { Subscriber } from "../../e2b/processes.ts";
import { ConnectError, errorResponse, serverStream, streamMessage, unaryMessage, type ServerStream } from "./connect.ts";

const PROCESS_KEEPALIVE = { event: { keepalive: {} } };
const WATCH_KEEPALIVE = { keepalive: {} };
const fromB64 = (s: string) => new Uint8Array(Buffer.from(s, "base64"));

/** The user a request asks to act as: envd's Basic auth names it ("root" is root; anyone else the box's user). */
function userOf(req: Request): "root" | undefined {
  const m = /^Basic (\S+)$/.exec(req.headers.get("authorization") ?? "");
  if (!m) return undefined;
  return Buffer.from(m[1]!, "base64").toString().split(":")[0] === "root" ? "root" : undefined;
}

/** Streams a process's events to the client until it ends or the client goes; the subscriber is dropped then. */
function follow(s: ServerStream, subscribe: (fn: Subscriber) => { off(): void } | Promise<{ off(): void }>): Promise<void> {
  const fn: Subscriber = (e: ProcessEvent) => {
    s.send({ event: e });
    if ("end" in e) s.end();
  };
  return Promise.resolve(subscribe(fn)).then(({ off }) => s.signal.addEventListener("abort", off, { once: true }));
}

async function processCall(service: SandboxService, sb: Sandbox, method: string, req: Request): Promise<Response> {
  const procs = sb.processes;
  switch (method) {
    case "Start":
      return serverStream(req, PROCESS_KEEPALIVE, async (s) => {
        const m = await streamMessage(req, StartRequest, "process.Start");
        const channel = service.channel(sb);
        const user = userOf(req);
        await follow(s, async (fn) => {
          const pid = await procs.start(
            channel,
            {
              config: m.process,
              envs: sb.envs,
              stdin: m.stdin === true,
              ...(m.pty ? { pty: { cols: m.pty.size.cols, rows: m.pty.size.rows } } : {}),
              ...(m.tag ? { tag: m.tag } : {}),
              ...(user ? { user } : {}),
            },
            fn,
          );
          return { off: () => procs.unsubscribe(pid, fn) };
        });
      });
    case "Connect":
      return serverStream(req, PROCESS_KEEPALIVE, async (s) => {
        const m = await streamMessage(req, ConnectRequest, "process.Connect");
        await follow(s, (fn) => {
          const c = procs.connect(m.process, fn);
          s.send({ event: { start: { pid: c.pid } } });
          return c;
        });
      });
    case "List":
      await unaryMessage(req, ListRequest, "process.List");
      return Response.json({ processes: procs.list() });
    case "SendInput": {
      const m = await unaryMessage(req, SendInputRequest, "process.SendInput");
      await procs.input(m.process, fromB64("stdin" in m.input ? m.input.stdin : m.input.pty));
      return Response.json({});
    }
    case "CloseStdin": {
      const m = await unaryMessage(req, CloseStdinRequest, "process.CloseStdin");
      procs.closeStdin(m.process);
      return Response.json({});
    }
    case "SendSignal": {
      const m = await unaryMessage(req, SendSignalRequest, "process.SendSignal");
      procs.signal(m.process, m.signal === "SIGNAL_SIGTERM" || m.signal === 15 ? "TERM" : "KILL");
      return Response.json({});
    }
    case "Update": {
      const m = await unaryMessage(req, UpdateRequest, "process.Update");
      if (m.pty) procs.resize(m.process, m.pty.size.cols, m.pty.size.rows);
      return Response.json({});
    }
    default:
      throw new ConnectError("unimplemented", `process.${method} is not served by hutch`);
  }
}

async function filesystemCall(service: SandboxService, sb: Sandbox, method: string, req: Request): Promise<Response> {
  if (method === "WatchDir")
    return serverStream(req, WATCH_KEEPALIVE, async (s) => {
      const m = await streamMessage(req, WatchDirRequest, "filesystem.WatchDir");
      await files.watch(
        service.channel(sb),
        m.path,
        m.recursive === true,
        s.signal,
        (name, type) => s.send({ filesystem: { name, type } }),
        (err) => s.end(err),
      );
      s.send({ start: {} });
    });
  const channel = () => service.channel(sb);
  switch (method) {
    case "Stat": {
      const m = await unaryMessage(req, PathRequest, "filesystem.Stat");
      return Response.json({ entry: await files.entry(channel(), m.path) });
    }
    case "ListDir": {
      const m = await unaryMessage(req, ListDirRequest, "filesystem.ListDir");
      return Response.json({ entries: await files.list(channel(), m.path, m.depth || 1) });
    }
    case "MakeDir": {
      const m = await unaryMessage(req, PathRequest, "filesystem.MakeDir");
      const made = await files.makeDir(channel(), m.path);
      if (!made) throw new ConnectError("already_exists", `${m.path} already exists`);
      return Response.json({ entry: made });
    }
    case "Remove": {
      const m = await unaryMessage(req, PathRequest, "filesystem.Remove");
      await files.remove(channel(), m.path);
      return Response.json({});
    }
    case "Move": {
      const m = await unaryMessage(req, MoveRequest, "filesystem.Move");
      return Response.json({ entry: await files.move(channel(), m.source, m.destination) });
    }
    default:
      throw new ConnectError("unimplemented", `filesystem.${method} is not served by hutch`);
  }
}

/** envd's HTTP errors: a status the SDK maps to its error classes, and {message}. */
function httpError(err: unknown): Response {
  const e = err instanceof HutchError ? err : new HutchError("failed", String(err));
  const status =
    e.code === "invalid" ? 400 : e.code === "unauthorized" ? 401 : e.code === "not_found" ? 404 : e.code === "not_ready" ? 502 : e.status;
  return Response.json({ code: status, message: e.hint ? `${e.message} (${e.hint})` : e.message }, { status });
}

async function filesHttp(service: SandboxService, sb: Sandbox, req: Request, url: URL): Promise<Response> {
  try {
    const path = url.searchParams.get("path");
    if (req.method === "GET") {
      if (!path) throw new HutchError("invalid", "GET /files needs ?path=", "name the file to read");
      const body = await files.read(service.channel(sb), path);
      return new Response(body, { headers: { "content-type": "application/octet-stream" } });
    }
    if (req.method !== "POST") throw new HutchError("invalid", `${req.method} /files: only GET and POST`, "read with GET, write with POST");
    const channel = service.channel(sb);
    const written: WrittenFile[] = [];
    const type = req.headers.get("content-type") ?? "";
    if (type.startsWith("multipart/form-data")) {
      const form = await req.formData();
      for (const part of form.getAll("file")) {
        if (typeof part === "string") throw new HutchError("invalid", "a file part carries no file", "send each file as a file part");
        const target = path ?? part.name;
        if (!target) throw new HutchError("invalid", "a file part names no path", "pass ?path= or a file name");
        await files.write(channel, target, new Uint8Array(await part.arrayBuffer()));
        written.push({ name: target.split("/").pop() ?? target, type: "file", path: target });
      }
    } else {
      if (!path) throw new HutchError("invalid", "POST /files needs ?path=", "name the file to write");
      if (req.headers.get("content-encoding"))
        throw new HutchError("invalid", "compressed uploads are not supported", "write without gzip");
      await files.write(channel, path, req.body ?? new Uint8Array(0));
      written.push({ name: path.split("/").pop() ?? path, type: "file", path });
    }
    return Response.json(written);
  } catch (err) {
    return httpError(err);
  }
}

/** Serves one in-box request; `sb` was found and its access token checked. */
export async function serveEnvd(service: SandboxService, sb: Sandbox, req: Request): Promise<Response> {
  const url = new URL(req.url);
  if (url.pathname === "/health") {
    // envd's own answer while it runs; 502 is what the SDK takes as a sandbox that is gone or asleep.
    try {
      service.channel(sb);
      return new Response(null, { status: 204 });
    } catch (err) {
      return httpError(err);
    }
  }
  if (url.pathname === "/files") return filesHttp(service, sb, req, url);
  const m = /^\/(process\.Process|filesystem\.Filesystem)\/([A-Za-z]+)$/.exec(url.pathname);
  try {
    if (!m || req.method !== "POST") throw new ConnectError("unimplemented", `${req.method} ${url.pathname} is not an envd method`);
    return await (m[1] === "process.Process" ? processCall : filesystemCall)(service, sb, m[2]!, req);
  } catch (err) {
    return errorResponse(err);
  }
}

/** What a request that fails before its sandbox is known gets: a Connect error for RPCs, envd's HTTP error otherwise. */
export function envdRefusal(req: Request, err: unknown): Response {
  return new URL(req.url).pathname.includes(".") ? errorResponse(err) : httpError(err);
}
