import { describe, expect, test } from "bun:test";
import { parseForwardSpec } from "../src/cli/port.ts";

describe("parseForwardSpec", () => {
  const ok: [string, { local: number; remote: number }][] = [
    ["8000", { local: 8000, remote: 8000 }],
    ["9000:8000", { local: 9000, remote: 8000 }],
    ["0:3000", { local: 0, remote: 3000 }],
  ];
  for (const [spec, want] of ok) test(spec, () => expect(parseForwardSpec(spec)).toEqual(want));
  for (const bad of ["", "0", "70000", "a:80", "1:2:3", "-1"])
    test(`refuses ${JSON.stringify(bad)}`, () => expect(() => parseForwardSpec(bad)).toThrow("[LOCAL:]REMOTE"));
});
