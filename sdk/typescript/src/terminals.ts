import { BerthError } from "./errors.js";
import { type RequestOptions, type Transport, seg, toBase64 } from "./http.js";
import { sbPath } from "./sandboxes.js";
import type { CreateTerminalRequest, Terminal, TerminalList, TerminalMessage, TerminalOutput } from "./types.js";

function termPath(sandboxId: string, tid: string, ...rest: string[]): string {
  return sbPath(sandboxId, "terminals", seg(tid), ...rest);
}

/** A message read from a terminal's WebSocket: output bytes, or a control message. */
export type TerminalFrame = { type: "output"; data: Uint8Array } | TerminalMessage;

/** Terminals: processes on pseudo-terminals inside a sandbox. */
export class Terminals {
  constructor(private readonly t: Transport) {}

  /** Starts a terminal: req.command on a pseudo-terminal, or an interactive shell. */
  create(sandboxId: string, req: CreateTerminalRequest, opts?: RequestOptions): Promise<Terminal> {
    return this.t.json("POST", sbPath(sandboxId, "terminals"), { json: req }, opts);
  }

  /** Lists a sandbox's terminals, running and exited, newest first. */
  async list(sandboxId: string, opts?: RequestOptions): Promise<Terminal[]> {
    const out = await this.t.json<TerminalList>("GET", sbPath(sandboxId, "terminals"), {}, opts);
    return out.terminals;
  }

  /** Reads a window of a terminal's replay buffer (data_base64), with its status. */
  output(
    sandboxId: string,
    tid: string,
    q: { offset?: number; waitMs?: number; maxBytes?: number } = {},
    opts?: RequestOptions,
  ): Promise<TerminalOutput> {
    const query = { offset: q.offset ?? 0, wait_ms: q.waitMs || undefined, max_bytes: q.maxBytes || undefined };
    return this.t.json("GET", termPath(sandboxId, tid, "output"), { query }, opts);
  }

  /** Types data into a terminal. */
  input(sandboxId: string, tid: string, data: string | Uint8Array, opts?: RequestOptions): Promise<void> {
    return this.t.call("POST", termPath(sandboxId, tid, "input"), { json: { data_base64: toBase64(data) } }, opts);
  }

  /** Sets a terminal's size (1-1000 columns and rows). */
  resize(sandboxId: string, tid: string, cols: number, rows: number, opts?: RequestOptions): Promise<Terminal> {
    return this.t.json("POST", termPath(sandboxId, tid, "resize"), { json: { cols, rows } }, opts);
  }

  /** Hangs a terminal up (SIGHUP, then SIGKILL) and forgets it. */
  close(sandboxId: string, tid: string, opts?: RequestOptions): Promise<void> {
    return this.t.call("DELETE", termPath(sandboxId, tid), {}, opts);
  }

  /**
   * Opens a WebSocket to a terminal, replaying its output from offset. The
   * key travels in the handshake's Authorization header, which Node's
   * WebSocket (22 and newer) and the ws package take; a browser's cannot
   * send it.
   */
  async attach(sandboxId: string, tid: string, from: { offset?: number } = {}, opts?: RequestOptions): Promise<TerminalConnection> {
    const WS = this.t.WebSocket;
    if (!WS) {
      throw new Error("no WebSocket: pass the WebSocket option to new Berth() (Node before 22 has none; the ws package has one)");
    }
    const url = this.t.wsUrl(termPath(sandboxId, tid, "ws"), { offset: from.offset ?? 0 });
    const headers = this.t.requestHeaders(opts);
    try {
      return await TerminalConnection.open(new WS(url, { headers }), opts?.signal);
    } catch (err) {
      if (opts?.signal?.aborted) {
        throw err;
      }
      // A WebSocket does not tell why its handshake failed; the same
      // terminal's output route answers the daemon's error.
      await this.output(sandboxId, tid, { maxBytes: 1 }, opts);
      throw err;
    }
  }
}

/**
 * A terminal's WebSocket. Iterate it for output (binary) and control
 * messages (truncated, exit, error); send input with send() and a new size
 * with resize(). The iteration ends when the connection closes.
 */
export class TerminalConnection implements AsyncIterable<TerminalFrame> {
  private readonly queue: TerminalFrame[] = [];
  private waiter: (() => void) | undefined;
  private ended = false;
  private failure: Error | undefined;
  /** Settles when the connection has closed, with its close code and reason. */
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(private readonly ws: WebSocket) {
    ws.binaryType = "arraybuffer";
    this.closed = new Promise((resolve) => {
      ws.addEventListener("close", (ev) => {
        this.ended = true;
        this.wake();
        resolve({ code: ev.code, reason: ev.reason });
      });
    });
    ws.addEventListener("message", (ev) => {
      const d: unknown = ev.data;
      if (typeof d === "string") {
        try {
          this.queue.push(JSON.parse(d) as TerminalMessage);
        } catch {
          this.queue.push({ type: "error", message: "undecodable control message: " + d });
        }
      } else if (d instanceof ArrayBuffer) {
        this.queue.push({ type: "output", data: new Uint8Array(d) });
      } else if (ArrayBuffer.isView(d)) {
        this.queue.push({ type: "output", data: new Uint8Array(d.buffer, d.byteOffset, d.byteLength) });
      }
      this.wake();
    });
    ws.addEventListener("error", () => {
      this.failure ??= new BerthError({ status: 0, code: "unavailable", message: "terminal WebSocket failed" });
      this.wake();
    });
  }

  /** Waits for ws to open; rejects when it fails or signal aborts first. */
  static open(ws: WebSocket, signal?: AbortSignal): Promise<TerminalConnection> {
    const conn = new TerminalConnection(ws);
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        ws.close();
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      ws.addEventListener("open", () => {
        signal?.removeEventListener("abort", onAbort);
        resolve(conn);
      });
      const fail = () => {
        signal?.removeEventListener("abort", onAbort);
        reject(
          new BerthError({
            status: 0,
            code: "unavailable",
            message: "terminal WebSocket handshake failed (unknown terminal or sandbox, or the key was refused)",
          }),
        );
      };
      ws.addEventListener("error", fail);
      ws.addEventListener("close", fail);
    });
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** Reads the next frame; undefined once the connection has closed. */
  async next(): Promise<TerminalFrame | undefined> {
    for (;;) {
      const f = this.queue.shift();
      if (f) {
        return f;
      }
      if (this.failure) {
        throw this.failure;
      }
      if (this.ended) {
        return undefined;
      }
      await new Promise<void>((r) => (this.waiter = r));
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<TerminalFrame> {
    for (;;) {
      const f = await this.next();
      if (!f) {
        return;
      }
      yield f;
    }
  }

  /** Sends input: a binary message. */
  send(data: string | Uint8Array): void {
    this.ws.send((typeof data === "string" ? new TextEncoder().encode(data) : data) as Uint8Array<ArrayBuffer>);
  }

  /** Sets the terminal's size: a resize control message. */
  resize(cols: number, rows: number): void {
    this.ws.send(JSON.stringify({ type: "resize", cols, rows }));
  }

  /** Closes the connection (the terminal keeps running) and waits for the close. */
  async close(): Promise<void> {
    if (this.ws.readyState !== this.ws.CLOSED) {
      this.ws.close(1000);
    }
    await this.closed;
  }
}
