/**
 * Every refusal by the tar reader or writer. The message names the offending
 * entry and the rule it broke, so a user can tell a hostile archive from a
 * damaged one without reading code.
 */
export class TarError extends Error {
  override name = "TarError";
}

/** Wraps a filesystem failure so callers catch one error type, keeping the cause. */
export function fsFailure(entry: string, action: string, err: unknown): TarError {
  if (err instanceof TarError) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new TarError(`entry "${entry}": ${action} failed: ${detail}`, { cause: err });
}
