// The box side of every gate connection gets a 4 MiB send buffer; as root it
// is asked for with SO_SNDBUFFORCE, so net.core.wmem_max does not cut it down.
import { expect, test } from "bun:test";
import { dlopen, FFIType } from "bun:ffi";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BOX_SEND_BUFFER, growSendBuffer } from "../src/broker/sockopt.ts";

const linuxRoot = process.platform === "linux" && process.getuid?.() === 0;

test.skipIf(!linuxRoot)("a root daemon gets the whole send buffer whatever net.core.wmem_max says", async () => {
  const { i32, ptr } = FFIType;
  const libc = dlopen("libc.so.6", { getsockopt: { args: [i32, i32, i32, ptr, ptr], returns: i32 } });
  const sndbuf = (fd: number) => {
    const v = new Int32Array(1);
    const len = new Uint32Array([4]);
    expect(libc.symbols.getsockopt(fd, 1, 7, v, len)).toBe(0);
    return v[0]!;
  };
  const dir = mkdtempSync(join(tmpdir(), "hutch-sockopt-"));
  let accepted = -1;
  const server = Bun.listen({
    unix: join(dir, "s"),
    socket: {
      open: (s) => {
        accepted = (s as unknown as { fd: number }).fd;
      },
      data: () => undefined,
    },
  });
  const client = await Bun.connect({ unix: join(dir, "s"), socket: { data: () => undefined } });
  try {
    while (accepted < 0) await Bun.sleep(1);
    growSendBuffer(accepted);
    // The kernel doubles what it is asked for (bookkeeping overhead) and reports that.
    // Seen failing with the plain SO_SNDBUF under a stock cap (425,984 reported).
    expect(sndbuf(accepted)).toBe(2 * BOX_SEND_BUFFER);
  } finally {
    client.end();
    server.stop(true);
    libc.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
