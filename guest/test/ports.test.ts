import { describe, expect, test } from "bun:test";
import { parseProcNetTcp } from "../src/tools/ports.ts";

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
