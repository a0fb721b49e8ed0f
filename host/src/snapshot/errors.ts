// Every refusal of the snapshot store is a HutchError with the object it is
// about in `data.object` ("packs/3fa4…", "snapshots/…", a path in a tree), so
// a caller can tell a damaged store from bad input and say which object.
import { type ErrorCode, HutchError } from "@hutch/shared/errors";

export class StoreError extends HutchError {
  override name = "StoreError";
  constructor(code: ErrorCode, message: string, hint?: string, object?: string) {
    super(code, message, hint, object === undefined ? undefined : { object });
  }

  get object(): string | undefined {
    return this.data?.object as string | undefined;
  }
}

/** A stored object that fails its hash, its authentication or its format: damage or tampering. */
export function corrupt(object: string, what: string): StoreError {
  return new StoreError(
    "failed",
    `${object}: ${what}`,
    "run check --read-data to list every damaged object; restore from another copy of the store",
    object,
  );
}

/** Input (paths, snapshot names, tree entries made elsewhere) that the store refuses. */
export function invalid(message: string, hint?: string, object?: string): StoreError {
  return new StoreError("invalid", message, hint, object);
}
