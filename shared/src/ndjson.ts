// NDJSON over a byte stream (the change feed, operations): the lines as they
// arrive, each parsed. Web streams only, so it runs in any runtime.

/**
 * Ends when the body does; a body cut short ends early (its last, unfinished
 * line is dropped) or throws, so the caller decides what a missing last line
 * means.
 */
export async function* ndjson(body: ReadableStream<Uint8Array>): AsyncGenerator<unknown> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line) yield JSON.parse(line);
      }
    }
  } finally {
    // A reader that stops early (it found the last line it wanted) lets the body go.
    void reader.cancel().catch(() => undefined);
  }
}
