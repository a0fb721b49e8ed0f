// A minimal QMP client: one connection per command (QMP sockets survive the
// daemon, so nothing is held open across restarts). QEMU's answers are
// trusted no more than they must be: parsed as JSON lines, bounded in size.
const MAX_BUFFER = 1024 * 1024;

export class QmpError extends Error {
  override name = "QmpError";
}

export async function qmp<T = unknown>(socket: string, command: string, args?: Record<string, unknown>, timeoutMs = 5000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let buf = "";
    let stage: "greeting" | "caps" | "command" = "greeting";
    let sock: Awaited<ReturnType<typeof Bun.connect>> | undefined;
    const timer = setTimeout(() => finish(new QmpError(`QMP ${command} timed out after ${timeoutMs} ms`)), timeoutMs);
    let settled = false;
    const finish = (err: Error | null, value?: T) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // Settle before end(): end() runs the close handler synchronously.
      if (err) reject(err);
      else resolve(value as T);
      sock?.end();
    };
    const send = (obj: unknown) => sock!.write(`${JSON.stringify(obj)}\n`);
    const onLine = (line: string) => {
      let msg: { QMP?: unknown; return?: unknown; error?: { desc?: string }; event?: string };
      try {
        msg = JSON.parse(line);
      } catch {
        return finish(new QmpError(`QMP sent something that is not JSON: ${line.slice(0, 80)}`));
      }
      if (msg.event) return; // asynchronous events are not answers
      if (stage === "greeting") {
        if (!msg.QMP) return finish(new QmpError("no QMP greeting"));
        stage = "caps";
        send({ execute: "qmp_capabilities" });
        return;
      }
      if (msg.error) return finish(new QmpError(`QMP ${stage === "caps" ? "qmp_capabilities" : command}: ${msg.error.desc ?? "failed"}`));
      if (stage === "caps") {
        stage = "command";
        send({ execute: command, ...(args ? { arguments: args } : {}) });
        return;
      }
      finish(null, msg.return as T);
    };
    Bun.connect({
      unix: socket,
      socket: {
        open(s) {
          sock = s;
        },
        data(_s, data) {
          buf += data.toString();
          if (buf.length > MAX_BUFFER) return finish(new QmpError("QMP answer too large"));
          for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
            const line = buf.slice(0, i).trim();
            buf = buf.slice(i + 1);
            if (line) onLine(line);
          }
        },
        close() {
          // quit closes the socket before or instead of answering: that is its success.
          if (command === "quit") finish(null);
          else finish(new QmpError(`QMP closed during ${command}`));
        },
        error(_s, err) {
          finish(err);
        },
        connectError(_s, err) {
          finish(err);
        },
      },
    }).catch((err: Error) => finish(err));
  });
}

export interface QmpStatus {
  status: string;
  running: boolean;
}
