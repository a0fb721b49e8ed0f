// The build's progress on stderr: "[n/N] step: detail (elapsed)". On a
// terminal one line is redrawn every second; elsewhere each step is a line and
// details are printed at most every 5 s, so CI logs read top to bottom.

export interface Progress {
  step(title: string): void;
  detail(text: string): void;
  done(summary: string): void;
  stop(): void;
}

export const silentProgress: Progress = { step: () => undefined, detail: () => undefined, done: () => undefined, stop: () => undefined };

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

export function stderrProgress(total: number): Progress {
  const tty = process.stderr.isTTY === true;
  const t0 = performance.now();
  let n = 0;
  let title = "";
  let detail = "";
  let stepStart = t0;
  let lastPrinted = 0;
  const line = () => `[${n}/${total}] ${title}${detail ? `: ${detail}` : ""} (${seconds(performance.now() - stepStart)}, total ${seconds(performance.now() - t0)})`;
  const draw = () => {
    if (tty) process.stderr.write(`\r\x1b[2K${line().slice(0, (process.stderr.columns || 100) - 1)}`);
  };
  const timer = tty ? setInterval(draw, 1000) : undefined;
  const finishStep = () => {
    if (n === 0) return;
    if (tty) process.stderr.write(`\r\x1b[2K[${n}/${total}] ${title} (${seconds(performance.now() - stepStart)})\n`);
    else process.stderr.write(`[${n}/${total}] ${title} done in ${seconds(performance.now() - stepStart)}\n`);
  };
  return {
    step(next) {
      finishStep();
      n += 1;
      title = next;
      detail = "";
      stepStart = performance.now();
      if (tty) draw();
      else process.stderr.write(`[${n}/${total}] ${title}\n`);
    },
    detail(text) {
      detail = text;
      if (tty) draw();
      // debootstrap alone reports hundreds of details: one line per 5 s is enough for a log.
      else if (performance.now() - lastPrinted >= 5000) {
        lastPrinted = performance.now();
        process.stderr.write(`      ${text}\n`);
      }
    },
    done(summary) {
      finishStep();
      n = 0;
      process.stderr.write(`${summary} in ${seconds(performance.now() - t0)}\n`);
    },
    stop() {
      if (timer) clearInterval(timer);
      if (tty && n > 0) process.stderr.write("\n");
    },
  };
}
