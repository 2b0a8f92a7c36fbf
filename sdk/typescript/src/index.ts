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
import { type RequestOptions, Transport, type WebSocketConstructor } from "./http.js";
import { Jobs } from "./jobs.js";
import { Commands, Files, Sandboxes } from "./sandboxes.js";
import { Previews, Services } from "./services.js";
import { Terminals } from "./terminals.js";
import type { System } from "./types.js";

export { BerthError, isCode, isReason } from "./errors.js";
export { Browser, BrowserCheckpoints, BrowserRecordings, CONTROL_LEASE_HEADER } from "./browser.js";
export { type Bytes, type Query, type RequestOptions, type WebSocketConstructor, fromBase64, toBase64 } from "./http.js";
export { Jobs, jobTerminal } from "./jobs.js";
export { type CommandEvent, type CommandQuery, Commands, Files, Sandboxes, commandDone } from "./sandboxes.js";
export { Previews, Services } from "./services.js";
export { type SSEEvent, parseSSE } from "./sse.js";
export { type TerminalFrame, TerminalConnection, Terminals } from "./terminals.js";
export type * from "./types.js";

/** How a Berth client reaches its daemon. */
export interface BerthOptions {
  /** The daemon's URL; default $BERTH_URL, else http://127.0.0.1:7070. */
  baseUrl?: string;
  /** The API key; default $BERTH_TOKEN. */
  token?: string;
  /** The end user every request acts for (the Berth-User header): jobs count capacity per user. */
  user?: string;
  /** More headers every request carries. */
  headers?: Record<string, string>;
  /** The fetch to use; default globalThis.fetch. */
  fetch?: typeof fetch;
  /**
   * The WebSocket constructor for terminals; default globalThis.WebSocket
   * (Node 22 and newer). On Node 20 pass the ws package's.
   */
  WebSocket?: WebSocketConstructor;
}

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name];
}

/** A client of one Berth daemon. Its groups mirror the API's. */
export class Berth {
  readonly sandboxes: Sandboxes;
  readonly commands: Commands;
  readonly files: Files;
  readonly terminals: Terminals;
  readonly services: Services;
  readonly previews: Previews;
  readonly browser: Browser;
  readonly jobs: Jobs;
  private readonly t: Transport;

  constructor(options: BerthOptions = {}) {
    const f = options.fetch ?? globalThis.fetch;
    if (!f) {
      throw new Error("no fetch: use Node 18 or newer, or pass the fetch option");
    }
    const headers: Record<string, string> = { ...options.headers };
    if (options.user) {
      headers["Berth-User"] = options.user;
    }
    this.t = new Transport({
      baseUrl: options.baseUrl ?? env("BERTH_URL") ?? "http://127.0.0.1:7070",
      token: options.token ?? env("BERTH_TOKEN") ?? "",
      headers,
      fetch: f.bind(globalThis),
      WebSocket: options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket,
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
  get baseUrl(): string {
    return this.t.baseUrl;
  }

  /** Calls /healthz; throws when the daemon is not healthy. */
  health(opts?: RequestOptions): Promise<void> {
    return this.t.call("GET", "/healthz", {}, opts);
  }

  /** Describes the daemon: version, runtimes, limits, browser and jobs. */
  system(opts?: RequestOptions): Promise<System> {
    return this.t.json("GET", "/v1/system", {}, opts);
  }

  /**
   * Sends any request the groups do not cover and returns the response
   * (statuses of 400 and up are thrown as BerthError).
   */
  request(method: string, path: string, init: { query?: Record<string, string | number | boolean | undefined>; json?: unknown } = {}, opts?: RequestOptions): Promise<Response> {
    return this.t.send(method, path, init, opts);
  }
}
