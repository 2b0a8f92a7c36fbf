/** Per-call options every method takes last. */
export interface RequestOptions {
    /** Aborts the call. */
    signal?: AbortSignal;
    /**
     * Sent as Idempotency-Key: a create (sandbox, browser session, job)
     * retried with the same key returns the first answer and makes nothing new.
     */
    idempotencyKey?: string;
    /** More headers for this call. */
    headers?: Record<string, string>;
}
/** Query parameters; undefined, false and "" values are left out. */
export type Query = Record<string, string | number | boolean | undefined>;
/** A request body: JSON (any object), or bytes sent as application/octet-stream. */
export type Bytes = string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;
/** What a WebSocket constructor must accept: the URL and, for auth, {headers}. */
export type WebSocketConstructor = new (url: string, options?: {
    headers?: Record<string, string>;
} | string[]) => WebSocket;
/** The connection settings every API group shares. */
export declare class Transport {
    readonly baseUrl: string;
    readonly token: string;
    readonly headers: Record<string, string>;
    readonly fetch: typeof fetch;
    readonly WebSocket: WebSocketConstructor | undefined;
    constructor(init: {
        baseUrl: string;
        token: string;
        headers: Record<string, string>;
        fetch: typeof fetch;
        WebSocket: WebSocketConstructor | undefined;
    });
    /** The URL of path with query q. */
    url(path: string, q?: Query): string;
    /** The headers of a call: the key, the client's and the call's. */
    requestHeaders(opts?: RequestOptions, contentType?: string): Record<string, string>;
    /**
     * Sends a request and returns the response for statuses below 400;
     * others are thrown as BerthError. The caller reads the body.
     */
    send(method: string, path: string, init?: {
        query?: Query;
        json?: unknown;
        body?: Bytes;
        contentType?: string;
    }, opts?: RequestOptions): Promise<Response>;
    /** Sends json (when given) and decodes the JSON answer. */
    json<T>(method: string, path: string, init?: {
        query?: Query;
        json?: unknown;
    }, opts?: RequestOptions): Promise<T>;
    /** Sends a request and drops the answer. */
    call(method: string, path: string, init?: {
        query?: Query;
        json?: unknown;
    }, opts?: RequestOptions): Promise<void>;
    /** Sends a request and returns the answer's bytes. */
    bytes(method: string, path: string, init?: {
        query?: Query;
    }, opts?: RequestOptions): Promise<Uint8Array>;
    /** The WebSocket URL of path: http becomes ws, https wss. */
    wsUrl(path: string, q?: Query): string;
}
/** Encodes q, leaving out undefined, false and "" values. */
export declare function encodeQuery(q?: Query): string;
/** Escapes one path segment. */
export declare function seg(s: string | number): string;
/** Encodes bytes (or a string, as UTF-8) as base64. */
export declare function toBase64(data: string | Uint8Array): string;
/** Decodes base64 into bytes. */
export declare function fromBase64(s: string): Uint8Array;
