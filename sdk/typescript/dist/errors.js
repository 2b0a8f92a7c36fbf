/** Maps HTTP statuses back to codes for error bodies that are not Berth's (a proxy in between, say), as internal/wire does. */
const codeForStatus = {
    400: "invalid",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    409: "conflict",
    413: "payload_too_large",
    422: "unprocessable",
    429: "resource_exhausted",
    431: "payload_too_large",
    499: "canceled",
    500: "internal",
    501: "unimplemented",
    503: "unavailable",
    504: "deadline_exceeded",
};
/**
 * An error the daemon answered: the HTTP status, the coarse `code`, the
 * specific `reason` a program branches on (docs/api.md lists them all), the
 * message for people, the request's ID and per-field problems.
 */
export class BerthError extends Error {
    /** The HTTP status (0 when no response came). */
    status;
    code;
    /** The specific cause, such as `sandbox_not_found`; "" when the server gave none. */
    reason;
    requestId;
    /** Validation failures by field. */
    problems;
    constructor(init) {
        super(init.message);
        this.name = "BerthError";
        this.status = init.status;
        this.code = init.code;
        this.reason = init.reason ?? "";
        this.requestId = init.requestId ?? "";
        this.problems = init.problems ?? {};
    }
    /** Decodes an error response (status 400 and up). */
    static async fromResponse(resp) {
        const text = await resp.text().catch(() => "");
        return BerthError.fromBody(resp.status, text);
    }
    /** Decodes an error body of the given status. */
    static fromBody(status, text) {
        try {
            const body = JSON.parse(text);
            const d = body.error;
            if (d && typeof d === "object" && typeof d.code === "string" && d.code !== "") {
                return new BerthError({
                    status,
                    code: d.code,
                    reason: d.reason,
                    message: d.message ?? "",
                    requestId: d.request_id,
                    problems: d.problems,
                });
            }
        }
        catch {
            // Not JSON: described below by its status.
        }
        let message = `HTTP ${status}`;
        if (text.length > 0 && text.length < 512) {
            message += `: ${text}`;
        }
        const code = codeForStatus[status] ?? (status >= 500 ? "unavailable" : "invalid");
        return new BerthError({ status, code, message });
    }
}
/** Reports whether err is a BerthError with the given reason. */
export function isReason(err, reason) {
    return err instanceof BerthError && err.reason === reason;
}
/** Reports whether err is a BerthError with the given code. */
export function isCode(err, code) {
    return err instanceof BerthError && err.code === code;
}
