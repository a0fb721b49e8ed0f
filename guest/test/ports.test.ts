import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import type { ListeningPort } from "@hutch/shared/wire";
import { listPorts, parseProcNetTcp, socketOwners } from "../src/tools/ports.ts";

const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F40 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 20 4 30 10 -1
`;
const TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5 1 0000000000000000 100 0 0 10 0
`;

describe("parseProcNetTcp", () => {
  test("listening sockets only, addresses decoded", () => {
    expect(parseProcNetTcp(TCP, "ipv4")).toEqual([
      { port: 8000, address: "127.0.0.1", family: "ipv4" },
      { port: 22, address: "0.0.0.0", family: "ipv4" },
    ]);
    expect(parseProcNetTcp(TCP6, "ipv6")).toEqual([
      { port: 3000, address: "::1", family: "ipv6" },
      { port: 8080, address: "::", family: "ipv6" },
    ]);
  });
  test("garbage lines are skipped", () => expect(parseProcNetTcp("header\nnot a line\n 0: zz:zz 0 0A\n", "ipv4")).toEqual([]));
});

describe("the process of a listener", () => {
  test("each listener's socket inode is kept for the lookup", () => {
    const inodes = new Map<ListeningPort, string>();
    const ports = parseProcNetTcp(TCP, "ipv4", inodes);
    expect(ports.map((p) => inodes.get(p))).toEqual(["1", "2"]);
  });

  test("a socket this process listens on is named with its pid and name", async () => {
    const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      const mine = (await listPorts(new Set())).find((p) => p.port === server.port && p.address === "127.0.0.1");
      expect(mine?.process?.pid).toBe(process.pid);
      expect(mine?.process?.name).toBe(readFileSync("/proc/self/comm", "utf8").trim());
    } finally {
      server.stop(true);
    }
  });

  test("no inodes asked, nothing read; unknown inodes are not found", async () => {
    expect((await socketOwners(new Set())).size).toBe(0);
    expect((await socketOwners(new Set(["999999999999"]))).size).toBe(0);
  });
});
