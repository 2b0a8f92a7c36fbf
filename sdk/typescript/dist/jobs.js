import { BerthError } from "./errors.js";
import { seg } from "./http.js";
import { parseSSE } from "./sse.js";
/** Reports whether a job in state s is finished. */
export function jobTerminal(s) {
    return s === "succeeded" || s === "failed" || s === "canceled";
}
/** Jobs: document conversions and other actions, run in fresh sandboxes. */
export class Jobs {
    t;
    constructor(t) {
        this.t = t;
    }
    /** Every action's health. */
    async actions(opts) {
        const out = await this.t.json("GET", "/v1/actions", {}, opts);
        return out.actions;
    }
    /** One action's health (an unknown action is a not_found BerthError). */
    action(name, opts) {
        return this.t.json("GET", "/v1/actions/" + seg(name), {}, opts);
    }
    /** Stores a job input and returns its reference; name helps the server tell its type. */
    async uploadFile(data, options = {}, opts) {
        const resp = await this.t.send("POST", "/v1/files", { query: { name: options.name }, body: data }, opts);
        return (await resp.json());
    }
    /** A stored file's bytes. */
    downloadFile(sha256, opts) {
        return this.t.bytes("GET", "/v1/files/" + seg(sha256), {}, opts);
    }
    /** Queues a job; a repeat of an earlier request (same business_id and request) returns that job with repeat set. */
    create(req, opts) {
        return this.t.json("POST", "/v1/jobs", { json: req }, opts);
    }
    get(id, opts) {
        return this.t.json("GET", "/v1/jobs/" + seg(id), {}, opts);
    }
    /** A page of jobs, newest first (next_cursor fetches the next). */
    list(filter = {}, opts) {
        return this.t.json("GET", "/v1/jobs", { query: { ...filter, limit: filter.limit || undefined } }, opts);
    }
    /** Cancels a job and returns it once canceled. */
    cancel(id, opts) {
        return this.t.json("POST", "/v1/jobs/" + seg(id) + "/cancel", {}, opts);
    }
    /** A job's events after sequence number after, until the job is finished. */
    async *events(id, from = {}, opts) {
        const resp = await this.t.send("GET", "/v1/jobs/" + seg(id) + "/events", { query: { after: from.after || undefined } }, opts);
        if (!resp.body) {
            return;
        }
        for await (const ev of parseSSE(resp.body)) {
            yield JSON.parse(ev.data);
        }
    }
    /** Waits until the job is finished and returns it. */
    async wait(id, opts) {
        for (;;) {
            // The stream ends once the job is finished; a stream cut short is
            // followed again.
            for await (const ev of this.events(id, {}, opts)) {
                if (jobTerminal(ev.type)) {
                    break;
                }
            }
            const j = await this.get(id, opts);
            if (jobTerminal(j.state)) {
                return j;
            }
        }
    }
    /**
     * Runs a job synchronously (POST /v1/convert/{action}) and returns its
     * output's bytes and type with the job's ID. A failed job is a BerthError
     * with the job's code and reason.
     */
    async convert(req, opts) {
        if (!req.action) {
            throw new BerthError({ status: 0, code: "invalid", reason: "", message: "convert needs an action", problems: { action: "required" } });
        }
        const resp = await this.t.send("POST", "/v1/convert/" + seg(req.action), { json: req }, opts);
        return {
            jobId: resp.headers.get("Berth-Job-Id") ?? "",
            contentType: resp.headers.get("Content-Type") ?? "",
            data: new Uint8Array(await resp.arrayBuffer()),
        };
    }
}
