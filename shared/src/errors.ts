// Named errors shared by the daemon (HTTP status) and the CLI (exit code).
// One table, so the mapping lives in one place.
export const ErrorCodes = {
  invalid: { status: 400, exit: 2 },
  config: { status: 400, exit: 3 },
  unauthorized: { status: 401, exit: 3 },
  not_found: { status: 404, exit: 4 },
  not_ready: { status: 409, exit: 4 },
  conflict: { status: 409, exit: 1 },
  denied: { status: 403, exit: 1 },
  limited: { status: 429, exit: 1 },
  failed: { status: 500, exit: 1 },
  unavailable: { status: 503, exit: 4 },
} as const;
export type ErrorCode = keyof typeof ErrorCodes;

export interface ErrorBody {
  error: { code: ErrorCode; message: string; hint?: string; data?: Record<string, unknown> };
}

export class HutchError extends Error {
  override name = "HutchError";
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** The next command to run, shown after the message. */
    readonly hint?: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }

  get status(): number {
    return ErrorCodes[this.code].status;
  }

  get exitCode(): number {
    return ErrorCodes[this.code].exit;
  }

  toBody(): ErrorBody {
    return { error: { code: this.code, message: this.message, hint: this.hint, data: this.data } };
  }

  static fromBody(body: unknown, fallbackStatus: number): HutchError {
    const e = (body as Partial<ErrorBody> | undefined)?.error;
    if (e && typeof e.message === "string" && typeof e.code === "string" && e.code in ErrorCodes) {
      return new HutchError(e.code, e.message, e.hint, e.data);
    }
    return new HutchError(fallbackStatus === 404 ? "not_found" : "failed", `daemon answered ${fallbackStatus}`);
  }
}
