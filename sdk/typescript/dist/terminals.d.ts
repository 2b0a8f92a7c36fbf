import { type RequestOptions, type Transport } from "./http.js";
import type { CreateTerminalRequest, Terminal, TerminalMessage, TerminalOutput } from "./types.js";
/** A message read from a terminal's WebSocket: output bytes, or a control message. */
export type TerminalFrame = {
    type: "output";
    data: Uint8Array;
} | TerminalMessage;
/** Terminals: processes on pseudo-terminals inside a sandbox. */
export declare class Terminals {
    private readonly t;
    constructor(t: Transport);
    /** Starts a terminal: req.command on a pseudo-terminal, or an interactive shell. */
    create(sandboxId: string, req: CreateTerminalRequest, opts?: RequestOptions): Promise<Terminal>;
    /** Lists a sandbox's terminals, running and exited, newest first. */
    list(sandboxId: string, opts?: RequestOptions): Promise<Terminal[]>;
    /** Reads a window of a terminal's replay buffer (data_base64), with its status. */
    output(sandboxId: string, tid: string, q?: {
        offset?: number;
        waitMs?: number;
        maxBytes?: number;
    }, opts?: RequestOptions): Promise<TerminalOutput>;
    /** Types data into a terminal. */
    input(sandboxId: string, tid: string, data: string | Uint8Array, opts?: RequestOptions): Promise<void>;
    /** Sets a terminal's size (1-1000 columns and rows). */
    resize(sandboxId: string, tid: string, cols: number, rows: number, opts?: RequestOptions): Promise<Terminal>;
    /** Hangs a terminal up (SIGHUP, then SIGKILL) and forgets it. */
    close(sandboxId: string, tid: string, opts?: RequestOptions): Promise<void>;
    /**
     * Opens a WebSocket to a terminal, replaying its output from offset. The
     * key travels in the handshake's Authorization header, which Node's
     * WebSocket (22 and newer) and the ws package take; a browser's cannot
     * send it.
     */
    attach(sandboxId: string, tid: string, from?: {
        offset?: number;
    }, opts?: RequestOptions): Promise<TerminalConnection>;
}
/**
 * A terminal's WebSocket. Iterate it for output (binary) and control
 * messages (truncated, exit, error); send input with send() and a new size
 * with resize(). The iteration ends when the connection closes.
 */
export declare class TerminalConnection implements AsyncIterable<TerminalFrame> {
    private readonly ws;
    private readonly queue;
    private waiter;
    private ended;
    private failure;
    /** Settles when the connection has closed, with its close code and reason. */
    readonly closed: Promise<{
        code: number;
        reason: string;
    }>;
    private constructor();
    /** Waits for ws to open; rejects when it fails or signal aborts first. */
    static open(ws: WebSocket, signal?: AbortSignal): Promise<TerminalConnection>;
    private wake;
    /** Reads the next frame; undefined once the connection has closed. */
    next(): Promise<TerminalFrame | undefined>;
    [Symbol.asyncIterator](): AsyncIterator<TerminalFrame>;
    /** Sends input: a binary message. */
    send(data: string | Uint8Array): void;
    /** Sets the terminal's size: a resize control message. */
    resize(cols: number, rows: number): void;
    /** Closes the connection (the terminal keeps running) and waits for the close. */
    close(): Promise<void>;
}
