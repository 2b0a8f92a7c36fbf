import { seg } from "./http.js";
import { sbPath } from "./sandboxes.js";
function svcPath(sandboxId, name, ...rest) {
    return sbPath(sandboxId, "services", seg(name), ...rest);
}
/** Services: long-running processes a sandbox supervises. */
export class Services {
    t;
    constructor(t) {
        this.t = t;
    }
    /** Starts a service, or replaces the one of the same name (an identical spec changes nothing). */
    put(sandboxId, spec, opts) {
        return this.t.json("POST", sbPath(sandboxId, "services"), { json: spec }, opts);
    }
    /** Lists a sandbox's services. */
    async list(sandboxId, opts) {
        const out = await this.t.json("GET", sbPath(sandboxId, "services"), {}, opts);
        return out.services;
    }
    /** Returns one service's spec and state. */
    get(sandboxId, name, opts) {
        return this.t.json("GET", svcPath(sandboxId, name), {}, opts);
    }
    /** Stops a service; it stays stopped, also across wakes, until start. */
    stop(sandboxId, name, opts) {
        return this.t.json("POST", svcPath(sandboxId, name, "stop"), {}, opts);
    }
    /** Starts a stopped, exited or failed service again. */
    start(sandboxId, name, opts) {
        return this.t.json("POST", svcPath(sandboxId, name, "start"), {}, opts);
    }
    /** Stops a service and forgets it. */
    delete(sandboxId, name, opts) {
        return this.t.call("DELETE", svcPath(sandboxId, name), {}, opts);
    }
    /** Reads a window of a service's log from q.offset; pass next_offset back to follow it. */
    logs(sandboxId, name, q = {}, opts) {
        const query = { offset: q.offset ?? 0, max_bytes: q.maxBytes || undefined, wait_ms: q.waitMs || undefined };
        return this.t.json("GET", svcPath(sandboxId, name, "logs"), { query }, opts);
    }
}
/** Previews: reaching a sandbox's ports from a browser, or through the API. */
export class Previews {
    t;
    constructor(t) {
        this.t = t;
    }
    /**
     * Says how to reach a port from a browser: the host-based URL, the
     * preview token, and a signed link that sets the preview cookie (valid
     * for ttlSeconds; default 15 minutes).
     */
    get(sandboxId, port, options = {}, opts) {
        return this.t.json("GET", sbPath(sandboxId, "previews", seg(port)), { query: { ttl_s: options.ttlSeconds || undefined } }, opts);
    }
    /**
     * Sends an HTTP request to a port of the sandbox through the API
     * (/v1/sandboxes/{id}/ports/{port}/{path}) with the key, and returns the
     * app's response whatever its status. path may carry a query.
     */
    async fetch(sandboxId, port, path = "/", init = {}, opts) {
        const url = this.t.url(sbPath(sandboxId, "ports", seg(port))) + "/" + path.replace(/^\/+/, "");
        const headers = { ...this.t.requestHeaders(opts), ...init.headers };
        return this.t.fetch(url, { ...init, headers, signal: init.signal ?? opts?.signal });
    }
}
