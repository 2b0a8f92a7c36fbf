import { type Bytes, type RequestOptions, type Transport } from "./http.js";
import type { Command, CreateCommandRequest, CreateSandboxRequest, FileInfo, FileList, MoveRequest, Sandbox, SandboxList, StdinRequest } from "./types.js";
/** The path of sandbox id, and more segments under it (already escaped). */
export declare function sbPath(id: string, ...rest: string[]): string;
/** Sandboxes: create, read, list, delete and their lifecycle. */
export declare class Sandboxes {
    private readonly t;
    constructor(t: Transport);
    /** Creates a sandbox (or returns the one named req.name). */
    create(req?: CreateSandboxRequest, opts?: RequestOptions): Promise<Sandbox>;
    /** Returns one sandbox. */
    get(id: string, opts?: RequestOptions): Promise<Sandbox>;
    /** Lists a page of the sandboxes the key sees; next_cursor fetches the next. */
    list(page?: {
        limit?: number;
        cursor?: string;
    }, opts?: RequestOptions): Promise<SandboxList>;
    /** Lists every sandbox the key sees, paging through them. */
    listAll(opts?: RequestOptions): Promise<Sandbox[]>;
    /** Deletes a sandbox and everything in it. */
    delete(id: string, opts?: RequestOptions): Promise<void>;
    /** Freezes a sandbox: memory kept, no CPU. Any later call resumes it. */
    pause(id: string, opts?: RequestOptions): Promise<Sandbox>;
    /** Thaws a paused sandbox. */
    resume(id: string, opts?: RequestOptions): Promise<Sandbox>;
    /** Stops a sandbox's processes and keeps its files; any later call wakes it. */
    hibernate(id: string, opts?: RequestOptions): Promise<Sandbox>;
}
/** Selects what a command read returns. */
export interface CommandQuery {
    /** Long-poll until the command ends or this many milliseconds pass. */
    waitMs?: number;
    stdoutOffset?: number;
    stderrOffset?: number;
    /** Per stream; 0 means the server default. */
    maxBytes?: number;
    /** Output as base64 instead of text. */
    base64?: boolean;
}
/** One event of a command's output stream. */
export type CommandEvent = {
    event: "stdout" | "stderr";
    offset: number;
    data?: string;
    data_base64?: string;
} | {
    event: "exit";
    command: Command;
};
/** Reports whether a command has finished, whatever the outcome. */
export declare function commandDone(c: Command): boolean;
/** Commands: run, wait, read, stream, cancel, and write standard input. */
export declare class Commands {
    private readonly t;
    constructor(t: Transport);
    /** Starts a command and returns its record (running, or failed when it could not start). */
    exec(sandboxId: string, req: CreateCommandRequest, opts?: RequestOptions): Promise<Command>;
    /**
     * Starts a command and waits up to q.waitMs for it to end, in one round
     * trip; the record is final when commandDone says so.
     */
    execWait(sandboxId: string, req: CreateCommandRequest, q: CommandQuery, opts?: RequestOptions): Promise<Command>;
    /** Starts a command and waits for it to finish, returning its record with the first window of its output. */
    run(sandboxId: string, req: CreateCommandRequest, opts?: RequestOptions): Promise<Command>;
    /** Waits until a command has finished and returns its record (q selects the output window). */
    wait(sandboxId: string, id: string, q?: CommandQuery, opts?: RequestOptions): Promise<Command>;
    /** Reads a command record with a window of its output. */
    get(sandboxId: string, id: string, q?: CommandQuery, opts?: RequestOptions): Promise<Command>;
    /** Lists a sandbox's retained commands, newest first. */
    list(sandboxId: string, opts?: RequestOptions): Promise<Command[]>;
    /** Cancels a running command and returns its record. */
    cancel(sandboxId: string, id: string, opts?: RequestOptions): Promise<Command>;
    /** Writes to a command's standard input; eof closes it. */
    stdin(sandboxId: string, id: string, req: StdinRequest, opts?: RequestOptions): Promise<void>;
    /**
     * Follows a command's output from the given offsets (Server-Sent Events)
     * until its exit event, the last one. A stream that ends before the exit
     * event throws a BerthError with code unavailable; break out of the loop
     * (or abort opts.signal) to stop early.
     */
    stream(sandboxId: string, id: string, from?: {
        stdoutOffset?: number;
        stderrOffset?: number;
        base64?: boolean;
    }, opts?: RequestOptions): AsyncGenerator<CommandEvent, Command | undefined>;
}
/** Files of a sandbox's workspace. */
export declare class Files {
    private readonly t;
    constructor(t: Transport);
    /** Lists a directory, one page at a time (next_cursor fetches the next). */
    list(sandboxId: string, dir: string, page?: {
        cursor?: string;
        limit?: number;
    }, opts?: RequestOptions): Promise<FileList>;
    /** Reads a file's bytes. */
    read(sandboxId: string, path: string, opts?: RequestOptions): Promise<Uint8Array>;
    /** Reads a file as UTF-8 text. */
    readText(sandboxId: string, path: string, opts?: RequestOptions): Promise<string>;
    /** Streams a file: the response's body, for files too large to hold. */
    readStream(sandboxId: string, path: string, opts?: RequestOptions): Promise<ReadableStream<Uint8Array>>;
    /**
     * Stores data at path, creating parent directories. mode is octal
     * permission bits such as 0o644 (omitted: the default).
     */
    write(sandboxId: string, path: string, data: Bytes, options?: {
        mode?: number;
    }, opts?: RequestOptions): Promise<FileInfo>;
    /** Creates a directory and its parents. */
    mkdir(sandboxId: string, path: string, opts?: RequestOptions): Promise<void>;
    /** Renames a file or directory. */
    move(sandboxId: string, req: MoveRequest, opts?: RequestOptions): Promise<void>;
    /** Deletes a file, or a directory tree when recursive. */
    remove(sandboxId: string, path: string, options?: {
        recursive?: boolean;
    }, opts?: RequestOptions): Promise<void>;
}
