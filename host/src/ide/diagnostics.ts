// Diagnostics per file, gathered from every session's anchored annotations,
// published as a whole list per file (LSP replaces a file's list each time).
import type { AnnotationDiagnostic } from "./anchors.ts";

export type PublishDiagnostics = (uri: string, diagnostics: AnnotationDiagnostic[]) => void;

const DEBOUNCE_MS = 20;

export class DiagnosticsStore {
  private readonly byUri = new Map<string, Map<string, AnnotationDiagnostic>>();
  private readonly dirty = new Set<string>();
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly publish: PublishDiagnostics) {}

  add(uri: string, d: AnnotationDiagnostic): void {
    let m = this.byUri.get(uri);
    if (!m) {
      m = new Map();
      this.byUri.set(uri, m);
    }
    if (m.has(d.code)) return;
    m.set(d.code, d);
    this.dirty.add(uri);
    // A replay brings many at once: publish each file once per burst.
    this.timer ??= setTimeout(() => this.flush(), DEBOUNCE_MS);
  }

  /** Publishes what is pending now, without waiting out the burst. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const uri of this.dirty) this.publish(uri, [...this.byUri.get(uri)!.values()]);
    this.dirty.clear();
  }
}
