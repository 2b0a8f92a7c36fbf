/**
 * @berth/sdk: the TypeScript SDK of Berth's HTTP API.
 *
 *     import { Berth } from "@berth/sdk";
 *     const berth = new Berth({ baseUrl: "http://127.0.0.1:7070", token: process.env.BERTH_TOKEN });
 *     const sb = await berth.sandboxes.create({ runtime: "process" });
 *     const cmd = await berth.commands.run(sb.id, { command: "echo hi" });
 *
 * Failures the daemon reports are thrown as BerthError (status, code,
 * reason, message, requestId, problems).
 */
import { Browser } from "./browser.js";
import { Transport } from "./http.js";
import { Jobs } from "./jobs.js";
import { Commands, Files, Sandboxes } from "./sandboxes.js";
import { Previews, Services } from "./services.js";
import { Terminals } from "./terminals.js";
export { BerthError, isCode, isReason } from "./errors.js";
export { Browser, BrowserCheckpoints, BrowserRecordings, CONTROL_LEASE_HEADER } from "./browser.js";
export { fromBase64, toBase64 } from "./http.js";
export { Jobs, jobTerminal } from "./jobs.js";
export { Commands, Files, Sandboxes, commandDone } from "./sandboxes.js";
export { Previews, Services } from "./services.js";
export { parseSSE } from "./sse.js";
export { TerminalConnection, Terminals } from "./terminals.js";
function env(name) {
    const p = globalThis.process;
    return p?.env?.[name];
}
/** A client of one Berth daemon. Its groups mirror the API's. */
export class Berth {
    sandboxes;
    commands;
    files;
    terminals;
    services;
    previews;
    browser;
    jobs;
    t;
    constructor(options = {}) {
        const f = options.fetch ?? globalThis.fetch;
        if (!f) {
            throw new Error("no fetch: use Node 18 or newer, or pass the fetch option");
        }
        const headers = { ...options.headers };
        if (options.user) {
            headers["Berth-User"] = options.user;
        }
        this.t = new Transport({
            baseUrl: options.baseUrl ?? env("BERTH_URL") ?? "http://127.0.0.1:7070",
            token: options.token ?? env("BERTH_TOKEN") ?? "",
            headers,
            fetch: f.bind(globalThis),
            WebSocket: options.WebSocket ?? globalThis.WebSocket,
        });
        this.sandboxes = new Sandboxes(this.t);
        this.commands = new Commands(this.t);
        this.files = new Files(this.t);
        this.terminals = new Terminals(this.t);
        this.services = new Services(this.t);
        this.previews = new Previews(this.t);
        this.browser = new Browser(this.t);
        this.jobs = new Jobs(this.t);
    }
    /** The daemon's URL. */
    get baseUrl() {
        return this.t.baseUrl;
    }
    /** Calls /healthz; throws when the daemon is not healthy. */
    health(opts) {
        return this.t.call("GET", "/healthz", {}, opts);
    }
    /** Describes the daemon: version, runtimes, limits, browser and jobs. */
    system(opts) {
        return this.t.json("GET", "/v1/system", {}, opts);
    }
    /**
     * Sends any request the groups do not cover and returns the response
     * (statuses of 400 and up are thrown as BerthError).
     */
    request(method, path, init = {}, opts) {
        return this.t.send(method, path, init, opts);
    }
}
