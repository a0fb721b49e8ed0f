// config.json as the daemon's services read it (host/src/config.ts): absent is
// an empty layer, and what does not fit is refused with the file and the key named.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import { loadConfig } from "../src/config.ts";

const dir = mkdtempSync(join(tmpdir(), "hutch-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe("loadConfig", () => {
  test("an absent file is an empty layer", () => {
    expect(loadConfig(join(dir, "absent.json"))).toEqual({});
  });

  test("a valid file is returned as written", () => {
    const p = file("ok.json", JSON.stringify({ snapshots: { ignoreFile: false } }));
    expect(loadConfig(p)).toEqual({ snapshots: { ignoreFile: false } });
  });

  test.each([
    ["bad.json", "{ not json", "is not valid JSON"],
    ["unknown.json", JSON.stringify({ bindingz: {} }), "bindingz"],
  ])("%s is refused with a config error naming the problem", (name, text, says) => {
    const p = file(name, text);
    let err: unknown;
    try {
      loadConfig(p);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HutchError);
    expect((err as HutchError).code).toBe("config");
    expect((err as HutchError).message).toContain(p);
    expect((err as HutchError).message).toContain(says);
  });
});
