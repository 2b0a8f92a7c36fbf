import { seg } from "./http.js";
/** The header that carries a control lease's token on a session's DELETE. */
export const CONTROL_LEASE_HEADER = "Berth-Control-Lease";
function brsPath(id, ...rest) {
    return ["/v1/browser/sessions/" + seg(id), ...rest].join("/");
}
/** Browser sessions: open, act, look, hand over to a human, checkpoint and record. */
export class Browser {
    t;
    checkpoints;
    recordings;
    constructor(t) {
        this.t = t;
        this.checkpoints = new BrowserCheckpoints(t);
        this.recordings = new BrowserRecordings(t);
    }
    /** Opens a browser session. */
    open(req = {}, opts) {
        return this.t.json("POST", "/v1/browser/sessions", { json: req }, opts);
    }
    /** Lists the open (and crashed) sessions. */
    async list(opts) {
        const out = await this.t.json("GET", "/v1/browser/sessions", {}, opts);
        return out.sessions;
    }
    /** Returns one session. */
    get(id, opts) {
        return this.t.json("GET", brsPath(id), {}, opts);
    }
    /** Closes a session; while a control lease is held, pass its token as lease. */
    close(id, options = {}, opts) {
        const o = options.lease ? { ...opts, headers: { ...opts?.headers, [CONTROL_LEASE_HEADER]: options.lease } } : opts;
        return this.t.call("DELETE", brsPath(id), {}, o);
    }
    /**
     * Runs one action and returns its result, typed by op:
     * `await berth.browser.action(id, { op: "navigate", url })` is `{url, status}`.
     */
    async action(id, action, opts) {
        const out = await this.t.json("POST", brsPath(id, "actions"), { json: action }, opts);
        return out.result;
    }
    /** Runs an action given as the untyped wire body. */
    async rawAction(id, action, opts) {
        const out = await this.t.json("POST", brsPath(id, "actions"), { json: action }, opts);
        return out.result;
    }
    /** Loads url in the current page. */
    navigate(id, url, opts) {
        return this.action(id, { op: "navigate", url }, opts);
    }
    /** Evaluates a JavaScript expression in the page and returns its JSON value. */
    async evaluate(id, expression, opts) {
        return (await this.action(id, { op: "evaluate", expression }, opts));
    }
    /** The current page as image bytes (PNG unless format is jpeg). */
    screenshot(id, options = {}, opts) {
        const query = { full_page: options.fullPage ? "true" : undefined, format: options.format, quality: options.quality, selector: options.selector };
        return this.t.bytes("GET", brsPath(id, "screenshot"), { query }, opts);
    }
    /** A PNG of the current page and when it was taken. */
    async liveFrame(id, opts) {
        const resp = await this.t.send("GET", brsPath(id, "live", "frame"), {}, opts);
        return { png: new Uint8Array(await resp.arrayBuffer()), at: resp.headers.get("Berth-Frame-Time") ?? "" };
    }
    /** Mints a view link: a URL that shows the session live, without the key, for 10 minutes. */
    liveLink(id, opts) {
        return this.t.json("POST", brsPath(id, "live", "links"), {}, opts);
    }
    /** A session artifact's bytes (a download or a trace). */
    artifact(id, artifactId, opts) {
        return this.t.bytes("GET", brsPath(id, "artifacts", seg(artifactId)), {}, opts);
    }
    /** Reports who drives the session (never the token). */
    control(id, opts) {
        return this.t.json("GET", brsPath(id, "control"), {}, opts);
    }
    /**
     * Takes the session over for ttlMs (default 30000; 1000-120000): until
     * release or expiry only actions carrying the lease's token run.
     */
    acquireControl(id, options = {}, opts) {
        return this.t.json("POST", brsPath(id, "control"), { json: { ttl_ms: options.ttlMs || undefined } }, opts);
    }
    /** Extends a lease to ttlMs from now (default 30000). */
    renewControl(id, token, options = {}, opts) {
        return this.t.json("POST", brsPath(id, "control", "renew"), { json: { token, ttl_ms: options.ttlMs || undefined } }, opts);
    }
    /** Ends a lease: automation acts again. */
    releaseControl(id, token, opts) {
        return this.t.call("POST", brsPath(id, "control", "release"), { json: { token } }, opts);
    }
    /** A page of the session's journal: entries after afterSeq, at most limit. */
    journal(id, page = {}, opts) {
        return this.t.json("GET", brsPath(id, "journal"), { query: { after_seq: page.afterSeq || undefined, limit: page.limit || undefined } }, opts);
    }
}
/** Browser checkpoints: a session's mode, options and pages, to open again. */
export class BrowserCheckpoints {
    t;
    constructor(t) {
        this.t = t;
    }
    /** Records a session in a checkpoint. */
    create(sessionId, opts) {
        return this.t.json("POST", brsPath(sessionId, "checkpoints"), {}, opts);
    }
    /** Lists the tenant's checkpoints, oldest first. */
    async list(opts) {
        const out = await this.t.json("GET", "/v1/browser/checkpoints", {}, opts);
        return out.checkpoints;
    }
    get(id, opts) {
        return this.t.json("GET", "/v1/browser/checkpoints/" + seg(id), {}, opts);
    }
    delete(id, opts) {
        return this.t.call("DELETE", "/v1/browser/checkpoints/" + seg(id), {}, opts);
    }
    /** Opens a new session like the checkpoint: mode, options, pages, selected page. */
    resume(id, opts) {
        return this.t.json("POST", "/v1/browser/checkpoints/" + seg(id) + "/resume", {}, opts);
    }
}
/** Browser recordings: viewport PNGs captured at an interval. */
export class BrowserRecordings {
    t;
    constructor(t) {
        this.t = t;
    }
    /** Starts recording a session: a PNG now and every interval_ms. */
    start(sessionId, req = {}, opts) {
        return this.t.json("POST", brsPath(sessionId, "recordings"), { json: req }, opts);
    }
    async list(opts) {
        const out = await this.t.json("GET", "/v1/browser/recordings", {}, opts);
        return out.recordings;
    }
    /** A recording's metadata (frames described, not included). */
    get(id, opts) {
        return this.t.json("GET", "/v1/browser/recordings/" + seg(id), {}, opts);
    }
    /** Stops a recording, keeping its frames. */
    stop(id, opts) {
        return this.t.json("POST", "/v1/browser/recordings/" + seg(id) + "/stop", {}, opts);
    }
    delete(id, opts) {
        return this.t.call("DELETE", "/v1/browser/recordings/" + seg(id), {}, opts);
    }
    /** Frame n as PNG bytes. */
    frame(id, n, opts) {
        return this.t.bytes("GET", "/v1/browser/recordings/" + seg(id) + "/frames/" + seg(n), {}, opts);
    }
    /** The recording exported: zip (frames and index.json) or mp4 (needs ffmpeg on the daemon's host). */
    export(id, format = "zip", opts) {
        return this.t.bytes("GET", "/v1/browser/recordings/" + seg(id) + "/export", { query: { format } }, opts);
    }
}
