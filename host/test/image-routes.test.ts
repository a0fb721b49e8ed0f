// The image routes in-process (app.handle, no socket), with server mode's
// access rules: the list and a verify for any authenticated user (a
// read-only token too), an import (upload in chunks, then install) for the
// admin only; a bad or corrupt archive is refused in words and leaves nothing
// in the image store. Archives are small crafted images: a qcow2 header made
// here, kernel and initramfs as text; no VM.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { check, IMAGE_LIMITS, ImageImportResult, ImageVerifyResult, OpLine, type TSchema } from "@hutch/shared";
import { openDb } from "../src/store/db.ts";
import { ProcessEngine } from "../src/engine/process/index.ts";
import { buildApp } from "../src/daemon/app.ts";
import { createServices } from "../src/daemon/services.ts";
import { setPrincipal } from "../src/daemon/actor.ts";
import type { Principal } from "../src/auth/service.ts";
import { ImageImports } from "../src/image/uploads.ts";
import { manifestFor, qcow2Header, sha } from "./image-fixtures.ts";

const home = mkdtempSync(join(tmpdir(), "hutch-image-routes-"));
const db = openDb(join(home, "hutch.db"));
const services = await createServices(home, db, { process: new ProcessEngine(home) });
const app = buildApp({ ...services, home });
afterAll(() => {
  db.close();
  rmSync(home, { recursive: true, force: true });
});

const user = (name: string, scopes: Principal["scopes"]): Principal => ({ user: name, scopes, remote: true, token: "tok_000000000000" });
const ADMIN = user("root", ["read", "write", "admin"]);
const ALICE = user("alice", ["read", "write"]);
const READER = user("rita", ["read"]);
services.auth.store.addUser("alice");
services.auth.store.addUser("rita");

async function handle(
  method: string,
  path: string,
  who: Principal | undefined,
  body?: string | Uint8Array,
  type?: string,
): Promise<Response> {
  const req = new Request(`http://hutch${path}`, { method, headers: type ? { "content-type": type } : {}, body });
  if (who) setPrincipal(req, who);
  return app.handle(req);
}
// biome-ignore lint/suspicious/noExplicitAny: answers of many shapes, each read field by field in its asserts
async function call(method: string, path: string, who: Principal | undefined, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await handle(
    method,
    path,
    who,
    body === undefined ? undefined : JSON.stringify(body),
    body === undefined ? undefined : "application/json",
  );
  return { status: res.status, body: await res.json() };
}
// biome-ignore lint/suspicious/noExplicitAny: answers of many shapes, each read field by field in its asserts
const json = (res: Response): Promise<any> => res.json();
/** An operation's answer: its lines, each checked against the op's schema. */
// biome-ignore lint/suspicious/noExplicitAny: lines of several kinds, each read field by field in its asserts
async function opLines(res: Response, result: TSchema = ImageImportResult): Promise<any[]> {
  expect(res.headers.get("content-type")).toBe("application/x-ndjson");
  const lines = (await res.text())
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  for (const l of lines) expect(check(OpLine(result), l), JSON.stringify(l)).toBe(true);
  return lines;
}

/** A .tar of an image directory `name` (its manifest vouching for `files`, or for `vouch` when given). */
function archive(name: string, files: Record<string, string | Uint8Array>, vouch = files): Uint8Array {
  const src = mkdtempSync(join(tmpdir(), "hutch-image-src-"));
  try {
    mkdirSync(join(src, name));
    for (const [f, body] of Object.entries(files)) writeFileSync(join(src, name, f), body);
    writeFileSync(join(src, name, "manifest.json"), JSON.stringify(manifestFor(name, vouch)));
    const r = Bun.spawnSync(["tar", "-C", src, "-cf", "-", name]);
    expect(r.exitCode).toBe(0);
    return new Uint8Array(r.stdout);
  } finally {
    rmSync(src, { recursive: true, force: true });
  }
}
const GOOD = { vmlinuz: "kernel bytes", "initramfs.img": "initramfs bytes", "root.qcow2": qcow2Header() };

/** Starts an upload of `bytes` as `who`, sends them in `pieces` chunks, and answers the install's lines. */
async function importAs(who: Principal, bytes: Uint8Array, opts: { name?: string; file?: string; pieces?: number } = {}) {
  const start = await call("POST", "/v1/images/imports", who, {
    bytes: bytes.byteLength,
    ...(opts.name ? { name: opts.name } : {}),
    ...(opts.file ? { file: opts.file } : {}),
  });
  expect(start.status).toBe(201);
  const id = start.body.id as string;
  const step = Math.ceil(bytes.byteLength / (opts.pieces ?? 2));
  for (let at = 0; at < bytes.byteLength; at += step) {
    const res = await handle("PATCH", `/v1/images/imports/${id}?offset=${at}`, who, bytes.slice(at, at + step), "application/octet-stream");
    const body = await json(res);
    if (res.status !== 200) return { id, refused: { status: res.status, body }, lines: [] };
    expect(body.received).toBe(Math.min(at + step, bytes.byteLength));
  }
  return { id, refused: null, lines: await opLines(await handle("POST", `/v1/images/imports/${id}/install`, who)) };
}

const staging = () => readdirSync(join(home, "images")).filter((n) => n.startsWith(".tmp-"));
const builds = () => readdirSync(join(home, "images", ".store"));

describe("image import through the daemon", () => {
  test("the admin uploads an archive in chunks; the install verifies it with counts, installs it, and the list shows it", async () => {
    const r = await importAs(ADMIN, archive("default", GOOD), { pieces: 3 });
    expect(r.refused).toBeNull();
    const types = r.lines.map((l) => l.type);
    expect(types[0]).toBe("step");
    expect(types).toContain("counts");
    const result: { type: "result"; value: ImageImportResult } = r.lines.at(-1);
    expect(result.type).toBe("result");
    expect(result.value.manifest.name).toBe("default");
    expect(result.value.manifest.files.vmlinuz.sha256).toBe(sha("kernel bytes"));
    const list = await call("GET", "/v1/images", READER);
    expect(list.status).toBe(200);
    expect(list.body.map((i: { name: string; problem?: string }) => [i.name, i.problem])).toEqual([["default", undefined]]);
    expect(staging()).toEqual([]);
    expect(builds()).toHaveLength(1);
  });

  test("a name that exists is refused before any byte is sent, unless forced; --name installs a copy under another", async () => {
    const taken = await call("POST", "/v1/images/imports", ADMIN, { bytes: 10, name: "default" });
    expect(taken.status).toBe(409);
    expect(taken.body.error.message).toBe('image "default" exists');
    const other = await importAs(ADMIN, archive("default", GOOD), { name: "other" });
    expect(other.lines.at(-1)).toMatchObject({ type: "result", value: { manifest: { name: "other" } } });
    const names = (await call("GET", "/v1/images", ALICE)).body.map((i: { name: string }) => i.name);
    expect(names).toEqual(["default", "other"]);
  });

  test("chunks must come in order: one at another offset is refused naming where to continue", async () => {
    const bytes = archive("ordered", GOOD);
    const { body } = await call("POST", "/v1/images/imports", ADMIN, { bytes: bytes.byteLength });
    const skip = await handle("PATCH", `/v1/images/imports/${body.id}?offset=512`, ADMIN, bytes.slice(512), "application/octet-stream");
    expect(skip.status).toBe(409);
    expect((await json(skip)).error).toMatchObject({
      message: `import ${body.id} has 0 bytes; this chunk starts at 512`,
      data: { received: 0 },
    });
    const early = await call("POST", `/v1/images/imports/${body.id}/install`, ADMIN);
    expect(early.status).toBe(400);
    expect(early.body.error.message).toBe(`import ${body.id} has 0 of its ${bytes.byteLength} bytes`);
    expect((await call("DELETE", `/v1/images/imports/${body.id}`, ADMIN)).body).toEqual({ id: body.id, dropped: true });
    expect(staging()).toEqual([]);
  });

  test("a file that is not a tar is refused at its first chunk, in words, and the upload and its staging are gone", async () => {
    const junk = new TextEncoder().encode("this is not a tar archive at all".repeat(40));
    const r = await importAs(ADMIN, junk, { pieces: 1 });
    expect(r.refused?.status).toBe(400);
    expect(r.refused?.body.error.message).toStartWith(`import ${r.id} is not a hutch image archive:`);
    const again = await handle("PATCH", `/v1/images/imports/${r.id}?offset=0`, ADMIN, junk, "application/octet-stream");
    expect(again.status).toBe(404);
    expect(staging()).toEqual([]);
  });

  test("a tampered file, or a root disk backed by a file of the server's, fails the install and installs nothing", async () => {
    const before = builds();
    const tampered = await importAs(ADMIN, archive("bad", { ...GOOD, "root.qcow2": "root disk bytez" }, GOOD), { file: "bad.tar" });
    expect(tampered.lines.at(-1)).toMatchObject({ type: "error", error: { code: "invalid" } });
    expect(String(tampered.lines.at(-1).error.message)).toMatch(/^bad\.tar: root\.qcow2 has sha256 [0-9a-f]{64}, the manifest says/);
    const backed = qcow2Header();
    new DataView(backed.buffer).setBigUint64(8, 112n);
    const hostile = await importAs(ADMIN, archive("bad", { ...GOOD, "root.qcow2": backed }));
    expect(hostile.lines.at(-1)).toMatchObject({
      type: "error",
      error: { message: expect.stringContaining("root.qcow2 names a backing file; an image's root disk must stand alone") },
    });
    expect((await call("GET", "/v1/images", ADMIN)).body.map((i: { name: string }) => i.name)).not.toContain("bad");
    expect(builds()).toEqual(before);
    expect(staging()).toEqual([]);
  });

  test("more bytes than declared, or a chunk over the bound, drop the upload", async () => {
    const { body } = await call("POST", "/v1/images/imports", ADMIN, { bytes: 100 });
    const over = await handle("PATCH", `/v1/images/imports/${body.id}?offset=0`, ADMIN, new Uint8Array(1024), "application/octet-stream");
    expect(over.status).toBe(400);
    expect((await json(over)).error.message).toBe(`import ${body.id} brought more than the 100 bytes it declared`);
    expect((await call("DELETE", `/v1/images/imports/${body.id}`, ADMIN)).status).toBe(404);
    const big = await call("POST", "/v1/images/imports", ADMIN, { bytes: IMAGE_LIMITS.chunkBytes * 2 });
    const huge = await handle(
      "PATCH",
      `/v1/images/imports/${big.body.id}?offset=0`,
      ADMIN,
      new Uint8Array(IMAGE_LIMITS.chunkBytes + 1),
      "application/octet-stream",
    );
    expect(huge.status).toBe(400);
    expect((await json(huge)).error.message).toBe(`a chunk is over ${IMAGE_LIMITS.chunkBytes} bytes`);
    expect(staging()).toEqual([]);
  });
});

test("an upload that sits idle is dropped with its staging, and says so when it is next used", async () => {
  const imports = new ImageImports(home, () => () => [], 50);
  const up = imports.start({ bytes: 4096 });
  await imports.write(up.id, 0, new Blob([new Uint8Array(512)]).stream());
  expect(staging()).toHaveLength(1);
  // Waits for the drop itself (bounded), not for a guessed time.
  for (let i = 0; i < 500 && staging().length > 0; i++) await Bun.sleep(10);
  expect(staging()).toEqual([]);
  await expect(imports.write(up.id, 512, null)).rejects.toThrow(`no image import ${up.id} under way (it finished, failed or sat idle)`);
});

describe("who may do what with images", () => {
  test("any user lists and verifies (a read-only token too); importing, building and removing are the admin's", async () => {
    expect((await call("GET", "/v1/images", READER)).status).toBe(200);
    const verified = await opLines(await handle("GET", "/v1/images/default/verify", READER), ImageVerifyResult);
    expect(verified.map((l) => l.type)).toContain("counts");
    expect(verified.at(-1)).toEqual({ type: "result", value: { name: "default", ok: true } });
    for (const [method, path, body] of [
      ["POST", "/v1/images/imports", { bytes: 10 }],
      ["PATCH", "/v1/images/imports/upl_00000000000000000000?offset=0", undefined],
      ["POST", "/v1/images/imports/upl_00000000000000000000/install", undefined],
      ["POST", "/v1/images/build", {}],
      ["DELETE", "/v1/images/default", undefined],
    ] as const) {
      const r = await call(method, path, ALICE, body);
      expect(r.status, `${method} ${path}`).toBe(403);
      expect(r.body.error.message).toBe(`${path.split("?")[0]} is the server admin's`);
    }
    expect((await call("POST", "/v1/images/imports", READER, { bytes: 10 })).status).toBe(403);
  });

  test("verify of a missing image is a 404 before any answer streams; a changed file fails it naming the file", async () => {
    const missing = await call("GET", "/v1/images/nope/verify", READER);
    expect(missing.status).toBe(404);
    expect(missing.body.error.message).toBe('no image "nope"');
    // Same size, other bytes: loadImage's size check passes, the hash does not.
    writeFileSync(join(home, "images", "other", "vmlinuz"), "kernel bytez");
    const lines = await opLines(await handle("GET", "/v1/images/other/verify", ALICE), ImageVerifyResult);
    expect(lines.at(-1)).toMatchObject({ type: "error", error: { code: "invalid" } });
    expect(String(lines.at(-1).error.message)).toMatch(/^image "other": vmlinuz has sha256 [0-9a-f]{64}/);
  });
});
