import { BerthError } from "./errors.js";

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
export type WebSocketConstructor = new (url: string, options?: { headers?: Record<string, string> } | string[]) => WebSocket;

/** The connection settings every API group shares. */
export class Transport {
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
  }) {
    this.baseUrl = init.baseUrl.replace(/\/+$/, "");
    this.token = init.token;
    this.headers = init.headers;
    this.fetch = init.fetch;
    this.WebSocket = init.WebSocket;
  }

  /** The URL of path with query q. */
  url(path: string, q?: Query): string {
    let u = this.baseUrl + path;
    const qs = encodeQuery(q);
    if (qs !== "") {
      u += "?" + qs;
    }
    return u;
  }

  /** The headers of a call: the key, the client's and the call's. */
  requestHeaders(opts?: RequestOptions, contentType?: string): Record<string, string> {
    const h: Record<string, string> = { ...this.headers };
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
  async send(
    method: string,
    path: string,
    init: { query?: Query; json?: unknown; body?: Bytes; contentType?: string } = {},
    opts?: RequestOptions,
  ): Promise<Response> {
    let body: BodyInit | undefined;
    let contentType = init.contentType;
    if (init.json !== undefined) {
      body = JSON.stringify(init.json);
      contentType = "application/json";
    } else if (init.body !== undefined) {
      body = init.body as BodyInit;
      contentType ??= "application/octet-stream";
    }
    const req: RequestInit & { duplex?: "half" } = {
      method,
      headers: this.requestHeaders(opts, contentType),
      body,
      signal: opts?.signal,
    };
    if (typeof ReadableStream !== "undefined" && body instanceof ReadableStream) {
      req.duplex = "half"; // fetch streams a request body only half-duplex
    }
    let resp: Response;
    try {
      resp = await this.fetch(this.url(path, init.query), req);
    } catch (err) {
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
  async json<T>(method: string, path: string, init: { query?: Query; json?: unknown } = {}, opts?: RequestOptions): Promise<T> {
    const resp = await this.send(method, path, init, opts);
    const text = await resp.text();
    if (text === "") {
      return undefined as T;
    }
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new Error(`decoding the response of ${method} ${path}: ${(err as Error).message}`);
    }
  }

  /** Sends a request and drops the answer. */
  async call(method: string, path: string, init: { query?: Query; json?: unknown } = {}, opts?: RequestOptions): Promise<void> {
    const resp = await this.send(method, path, init, opts);
    await resp.body?.cancel().catch(() => {});
  }

  /** Sends a request and returns the answer's bytes. */
  async bytes(method: string, path: string, init: { query?: Query } = {}, opts?: RequestOptions): Promise<Uint8Array> {
    const resp = await this.send(method, path, init, opts);
    return new Uint8Array(await resp.arrayBuffer());
  }

  /** The WebSocket URL of path: http becomes ws, https wss. */
  wsUrl(path: string, q?: Query): string {
    return this.url(path, q).replace(/^http/, "ws");
  }
}

/** Encodes q, leaving out undefined, false and "" values. */
export function encodeQuery(q?: Query): string {
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
export function seg(s: string | number): string {
  return encodeURIComponent(String(s));
}

const utf8 = new TextEncoder();

/** Encodes bytes (or a string, as UTF-8) as base64. */
export function toBase64(data: string | Uint8Array): string {
  const b = typeof data === "string" ? utf8.encode(data) : data;
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) {
    s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

/** Decodes base64 into bytes. */
export function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) {
    out[i] = bin.charCodeAt(i);
  }
  return out;
}
