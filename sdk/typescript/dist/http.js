import { BerthError } from "./errors.js";
/** The connection settings every API group shares. */
export class Transport {
    baseUrl;
    token;
    headers;
    fetch;
    WebSocket;
    constructor(init) {
        this.baseUrl = init.baseUrl.replace(/\/+$/, "");
        this.token = init.token;
        this.headers = init.headers;
        this.fetch = init.fetch;
        this.WebSocket = init.WebSocket;
    }
    /** The URL of path with query q. */
    url(path, q) {
        let u = this.baseUrl + path;
        const qs = encodeQuery(q);
        if (qs !== "") {
            u += "?" + qs;
        }
        return u;
    }
    /** The headers of a call: the key, the client's and the call's. */
    requestHeaders(opts, contentType) {
        const h = { ...this.headers };
        if (this.token !== "") {
            h["Authorization"] = "Bearer " + this.token;
        }
        if (opts?.idempotencyKey) {
            h["Idempotency-Key"] = opts.idempotencyKey;
        }
        Object.assign(h, opts?.headers);
        if (contentType) {
            h["Content-Type"] = contentType;
        }
        return h;
    }
    /**
     * Sends a request and returns the response for statuses below 400;
     * others are thrown as BerthError. The caller reads the body.
     */
    async send(method, path, init = {}, opts) {
        let body;
        let contentType = init.contentType;
        if (init.json !== undefined) {
            body = JSON.stringify(init.json);
            contentType = "application/json";
        }
        else if (init.body !== undefined) {
            body = init.body;
            contentType ??= "application/octet-stream";
        }
        const req = {
            method,
            headers: this.requestHeaders(opts, contentType),
            body,
            signal: opts?.signal,
        };
        if (typeof ReadableStream !== "undefined" && body instanceof ReadableStream) {
            req.duplex = "half"; // fetch streams a request body only half-duplex
        }
        let resp;
        try {
            resp = await this.fetch(this.url(path, init.query), req);
        }
        catch (err) {
            if (opts?.signal?.aborted) {
                throw err;
            }
            throw new BerthError({
                status: 0,
                code: "unavailable",
                message: `cannot reach ${this.baseUrl}: ${err instanceof Error ? err.message : String(err)}`,
            });
        }
        if (resp.status >= 400) {
            throw await BerthError.fromResponse(resp);
        }
        return resp;
    }
    /** Sends json (when given) and decodes the JSON answer. */
    async json(method, path, init = {}, opts) {
        const resp = await this.send(method, path, init, opts);
        const text = await resp.text();
        if (text === "") {
            return undefined;
        }
        try {
            return JSON.parse(text);
        }
        catch (err) {
            throw new Error(`decoding the response of ${method} ${path}: ${err.message}`);
        }
    }
    /** Sends a request and drops the answer. */
    async call(method, path, init = {}, opts) {
        const resp = await this.send(method, path, init, opts);
        await resp.body?.cancel().catch(() => { });
    }
    /** Sends a request and returns the answer's bytes. */
    async bytes(method, path, init = {}, opts) {
        const resp = await this.send(method, path, init, opts);
        return new Uint8Array(await resp.arrayBuffer());
    }
    /** The WebSocket URL of path: http becomes ws, https wss. */
    wsUrl(path, q) {
        return this.url(path, q).replace(/^http/, "ws");
    }
}
/** Encodes q, leaving out undefined, false and "" values. */
export function encodeQuery(q) {
    if (!q) {
        return "";
    }
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) {
        if (v === undefined || v === false || v === "") {
            continue;
        }
        p.set(k, String(v));
    }
    return p.toString();
}
/** Escapes one path segment. */
export function seg(s) {
    return encodeURIComponent(String(s));
}
const utf8 = new TextEncoder();
/** Encodes bytes (or a string, as UTF-8) as base64. */
export function toBase64(data) {
    const b = typeof data === "string" ? utf8.encode(data) : data;
    let s = "";
    for (let i = 0; i < b.length; i += 0x8000) {
        s += String.fromCharCode(...b.subarray(i, i + 0x8000));
    }
    return btoa(s);
}
/** Decodes base64 into bytes. */
export function fromBase64(s) {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) {
        out[i] = bin.charCodeAt(i);
    }
    return out;
}
