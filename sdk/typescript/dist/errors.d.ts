import type { ErrorCode } from "./types.js";
/**
 * An error the daemon answered: the HTTP status, the coarse `code`, the
 * specific `reason` a program branches on (docs/api.md lists them all), the
 * message for people, the request's ID and per-field problems.
 */
export declare class BerthError extends Error {
    /** The HTTP status (0 when no response came). */
    readonly status: number;
    readonly code: ErrorCode;
    /** The specific cause, such as `sandbox_not_found`; "" when the server gave none. */
    readonly reason: string;
    readonly requestId: string;
    /** Validation failures by field. */
    readonly problems: Record<string, string>;
    constructor(init: {
        status: number;
        code: ErrorCode;
        reason?: string;
        message: string;
        requestId?: string;
        problems?: Record<string, string>;
    });
    /** Decodes an error response (status 400 and up). */
    static fromResponse(resp: Response): Promise<BerthError>;
    /** Decodes an error body of the given status. */
    static fromBody(status: number, text: string): BerthError;
}
/** Reports whether err is a BerthError with the given reason. */
export declare function isReason(err: unknown, reason: string): boolean;
/** Reports whether err is a BerthError with the given code. */
export declare function isCode(err: unknown, code: ErrorCode): boolean;
