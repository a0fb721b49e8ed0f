// The daemon's stored secrets found in text leaving it (a transcript written
// home), in-process (app.handle, a real sqlite file, a real sealed secret):
// positions and names come back, never a value; the conversation redaction
// built on it replaces a short stored key, raw and base64, with its name.
import { afterAll, describe, expect, test } from "bun:test";
import type { SecretFindResult } from "@hutch/shared";
import { ask, testApp } from "./app-helpers.ts";
import { findSecrets, secretForms } from "../src/broker/find.ts";
import { redactStored } from "../src/workspace/conversation/stored.ts";

const { app, services, close } = await testApp("hutch-find-");
const { broker } = services;
afterAll(close);

/** 17 characters, no known token shape: only the stored value can find it. */
const CANARY = `cn${crypto.randomUUID().replaceAll("-", "").slice(0, 15)}`;
const b64 = Buffer.from(CANARY).toString("base64");

const json = (method: string, path: string, body: unknown) => ask(app, method, path, { body });
const find = async (texts: string[]) => {
  const res = await json("POST", "/v1/secrets/find", { texts });
  expect(res.status).toBe(200);
  expect(res.text).not.toContain(CANARY);
  return (res.body as SecretFindResult).found;
};

describe("stored secrets found in text", () => {
  test("a 17-character stored key, raw and as base64: positions and the name, never the value", async () => {
    expect(CANARY).toHaveLength(17);
    expect((await json("PUT", "/v1/secrets/canary", { value: CANARY })).status).toBe(200);
    const found = await find([`key=${CANARY}!`, "nothing here", `Authorization: Basic ${b64}`]);
    expect(found).toContainEqual({ text: 0, at: 4, length: 17, secret: "canary" });
    expect(found).toContainEqual({ text: 2, at: 21, length: b64.length, secret: "canary" });
    // Only those two places (the unpadded base64 is found inside the padded one, for the caller to merge).
    expect(new Set(found.map((f) => `${f.text}:${f.at}`))).toEqual(new Set(["0:4", "2:21"]));
  });

  test("another user's request finds none of the local user's secrets", async () => {
    expect((await broker.findSecrets([CANARY], "bob")).found).toEqual([]);
  });

  test("forms: raw, base64 padded and not, URL-safe; values under 8 characters are not looked for", () => {
    expect(secretForms("abcdefgh?>")).toEqual(["abcdefgh?>", "YWJjZGVmZ2g/Pg==", "YWJjZGVmZ2g/Pg", "YWJjZGVmZ2g_Pg==", "YWJjZGVmZ2g_Pg"]);
    expect(findSecrets(["short1 short1"], [{ name: "s", value: "short1" }])).toEqual([]);
  });

  test("a conversation's strings redacted through the daemon, at any depth, across piece boundaries of a long string", async () => {
    const long = `${"x".repeat(1024 * 1024 - 10)}${CANARY}${"y".repeat(100)}`;
    const records = [
      { type: "user", message: { content: [{ text: `my key is ${CANARY}, base64 ${b64}` }] } },
      { type: "tool", output: long, keep: 7 },
    ];
    const r = await redactStored(records, find);
    const text = JSON.stringify(r.records);
    expect(text).not.toContain(CANARY);
    expect(text).not.toContain(b64);
    expect((r.records[0] as { message: { content: { text: string }[] } }).message.content[0]!.text).toBe(
      "my key is [secret:canary], base64 [secret:canary]",
    );
    expect((r.records[1] as { output: string }).output).toBe(`${"x".repeat(1024 * 1024 - 10)}[secret:canary]${"y".repeat(100)}`);
    expect(r.counts).toEqual({ canary: 3 });
  });
});
