import { type RequestOptions, type Transport } from "./http.js";
import type { BrowserAction, BrowserActionOf, BrowserCheckpoint, BrowserControl, BrowserControlLease, BrowserJournal, BrowserLiveLink, BrowserOp, BrowserOpResults, BrowserRecording, BrowserSession, CreateBrowserSessionRequest, StartRecordingRequest } from "./types.js";
/** The header that carries a control lease's token on a session's DELETE. */
export declare const CONTROL_LEASE_HEADER = "Berth-Control-Lease";
/** Browser sessions: open, act, look, hand over to a human, checkpoint and record. */
export declare class Browser {
    private readonly t;
    readonly checkpoints: BrowserCheckpoints;
    readonly recordings: BrowserRecordings;
    constructor(t: Transport);
    /** Opens a browser session. */
    open(req?: CreateBrowserSessionRequest, opts?: RequestOptions): Promise<BrowserSession>;
    /** Lists the open (and crashed) sessions. */
    list(opts?: RequestOptions): Promise<BrowserSession[]>;
    /** Returns one session. */
    get(id: string, opts?: RequestOptions): Promise<BrowserSession>;
    /** Closes a session; while a control lease is held, pass its token as lease. */
    close(id: string, options?: {
        lease?: string;
    }, opts?: RequestOptions): Promise<void>;
    /**
     * Runs one action and returns its result, typed by op:
     * `await berth.browser.action(id, { op: "navigate", url })` is `{url, status}`.
     */
    action<O extends BrowserOp>(id: string, action: BrowserActionOf<O>, opts?: RequestOptions): Promise<BrowserOpResults[O]>;
    /** Runs an action given as the untyped wire body. */
    rawAction(id: string, action: BrowserAction, opts?: RequestOptions): Promise<unknown>;
    /** Loads url in the current page. */
    navigate(id: string, url: string, opts?: RequestOptions): Promise<BrowserOpResults["navigate"]>;
    /** Evaluates a JavaScript expression in the page and returns its JSON value. */
    evaluate<T = unknown>(id: string, expression: string, opts?: RequestOptions): Promise<T>;
    /** The current page as image bytes (PNG unless format is jpeg). */
    screenshot(id: string, options?: {
        fullPage?: boolean;
        format?: "png" | "jpeg";
        quality?: number;
        selector?: string;
    }, opts?: RequestOptions): Promise<Uint8Array>;
    /** A PNG of the current page and when it was taken. */
    liveFrame(id: string, opts?: RequestOptions): Promise<{
        png: Uint8Array;
        at: string;
    }>;
    /** Mints a view link: a URL that shows the session live, without the key, for 10 minutes. */
    liveLink(id: string, opts?: RequestOptions): Promise<BrowserLiveLink>;
    /** A session artifact's bytes (a download or a trace). */
    artifact(id: string, artifactId: string, opts?: RequestOptions): Promise<Uint8Array>;
    /** Reports who drives the session (never the token). */
    control(id: string, opts?: RequestOptions): Promise<BrowserControl>;
    /**
     * Takes the session over for ttlMs (default 30000; 1000-120000): until
     * release or expiry only actions carrying the lease's token run.
     */
    acquireControl(id: string, options?: {
        ttlMs?: number;
    }, opts?: RequestOptions): Promise<BrowserControlLease>;
    /** Extends a lease to ttlMs from now (default 30000). */
    renewControl(id: string, token: string, options?: {
        ttlMs?: number;
    }, opts?: RequestOptions): Promise<BrowserControlLease>;
    /** Ends a lease: automation acts again. */
    releaseControl(id: string, token: string, opts?: RequestOptions): Promise<void>;
    /** A page of the session's journal: entries after afterSeq, at most limit. */
    journal(id: string, page?: {
        afterSeq?: number;
        limit?: number;
    }, opts?: RequestOptions): Promise<BrowserJournal>;
}
/** Browser checkpoints: a session's mode, options and pages, to open again. */
export declare class BrowserCheckpoints {
    private readonly t;
    constructor(t: Transport);
    /** Records a session in a checkpoint. */
    create(sessionId: string, opts?: RequestOptions): Promise<BrowserCheckpoint>;
    /** Lists the tenant's checkpoints, oldest first. */
    list(opts?: RequestOptions): Promise<BrowserCheckpoint[]>;
    get(id: string, opts?: RequestOptions): Promise<BrowserCheckpoint>;
    delete(id: string, opts?: RequestOptions): Promise<void>;
    /** Opens a new session like the checkpoint: mode, options, pages, selected page. */
    resume(id: string, opts?: RequestOptions): Promise<BrowserSession>;
}
/** Browser recordings: viewport PNGs captured at an interval. */
export declare class BrowserRecordings {
    private readonly t;
    constructor(t: Transport);
    /** Starts recording a session: a PNG now and every interval_ms. */
    start(sessionId: string, req?: StartRecordingRequest, opts?: RequestOptions): Promise<BrowserRecording>;
    list(opts?: RequestOptions): Promise<BrowserRecording[]>;
    /** A recording's metadata (frames described, not included). */
    get(id: string, opts?: RequestOptions): Promise<BrowserRecording>;
    /** Stops a recording, keeping its frames. */
    stop(id: string, opts?: RequestOptions): Promise<BrowserRecording>;
    delete(id: string, opts?: RequestOptions): Promise<void>;
    /** Frame n as PNG bytes. */
    frame(id: string, n: number, opts?: RequestOptions): Promise<Uint8Array>;
    /** The recording exported: zip (frames and index.json) or mp4 (needs ffmpeg on the daemon's host). */
    export(id: string, format?: "zip" | "mp4", opts?: RequestOptions): Promise<Uint8Array>;
}
