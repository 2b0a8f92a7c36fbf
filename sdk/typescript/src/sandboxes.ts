import { BerthError } from "./errors.js";
import { type Bytes, type RequestOptions, type Transport, seg } from "./http.js";
import { parseSSE } from "./sse.js";
import type {
  Command,
  CommandList,
  CreateCommandRequest,
  CreateSandboxRequest,
  FileInfo,
  FileList,
  MoveRequest,
  Sandbox,
  SandboxList,
  StdinRequest,
  StreamEvent,
} from "./types.js";

/** The path of sandbox id, and more segments under it (already escaped). */
export function sbPath(id: string, ...rest: string[]): string {
  return ["/v1/sandboxes/" + seg(id), ...rest].join("/");
}

/** Sandboxes: create, read, list, delete and their lifecycle. */
export class Sandboxes {
  constructor(private readonly t: Transport) {}

  /** Creates a sandbox (or returns the one named req.name). */
  create(req: CreateSandboxRequest = {}, opts?: RequestOptions): Promise<Sandbox> {
    return this.t.json("POST", "/v1/sandboxes", { json: req }, opts);
  }

  /** Returns one sandbox. */
  get(id: string, opts?: RequestOptions): Promise<Sandbox> {
    return this.t.json("GET", sbPath(id), {}, opts);
  }

  /** Lists a page of the sandboxes the key sees; next_cursor fetches the next. */
  list(page: { limit?: number; cursor?: string } = {}, opts?: RequestOptions): Promise<SandboxList> {
    return this.t.json("GET", "/v1/sandboxes", { query: { limit: page.limit, cursor: page.cursor } }, opts);
  }

  /** Lists every sandbox the key sees, paging through them. */
  async listAll(opts?: RequestOptions): Promise<Sandbox[]> {
    const all: Sandbox[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.list({ cursor }, opts);
      all.push(...page.sandboxes);
      cursor = page.next_cursor;
    } while (cursor);
    return all;
  }

  /** Deletes a sandbox and everything in it. */
  delete(id: string, opts?: RequestOptions): Promise<void> {
    return this.t.call("DELETE", sbPath(id), {}, opts);
  }

  /** Freezes a sandbox: memory kept, no CPU. Any later call resumes it. */
  pause(id: string, opts?: RequestOptions): Promise<Sandbox> {
    return this.t.json("POST", sbPath(id, "pause"), {}, opts);
  }

  /** Thaws a paused sandbox. */
  resume(id: string, opts?: RequestOptions): Promise<Sandbox> {
    return this.t.json("POST", sbPath(id, "resume"), {}, opts);
  }

  /** Stops a sandbox's processes and keeps its files; any later call wakes it. */
  hibernate(id: string, opts?: RequestOptions): Promise<Sandbox> {
    return this.t.json("POST", sbPath(id, "hibernate"), {}, opts);
  }
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

function commandQuery(q: CommandQuery = {}) {
  return {
    wait_ms: q.waitMs && q.waitMs > 0 ? q.waitMs : undefined,
    stdout_offset: q.stdoutOffset && q.stdoutOffset > 0 ? q.stdoutOffset : undefined,
    stderr_offset: q.stderrOffset && q.stderrOffset > 0 ? q.stderrOffset : undefined,
    max_bytes: q.maxBytes && q.maxBytes > 0 ? q.maxBytes : undefined,
    encoding: q.base64 ? "base64" : undefined,
  };
}

/** One event of a command's output stream. */
export type CommandEvent =
  | { event: "stdout" | "stderr"; offset: number; data?: string; data_base64?: string }
  | { event: "exit"; command: Command };

/** Reports whether a command has finished, whatever the outcome. */
export function commandDone(c: Command): boolean {
  return c.status !== undefined && c.status !== "running";
}

/** Commands: run, wait, read, stream, cancel, and write standard input. */
export class Commands {
  constructor(private readonly t: Transport) {}

  /** Starts a command and returns its record (running, or failed when it could not start). */
  exec(sandboxId: string, req: CreateCommandRequest, opts?: RequestOptions): Promise<Command> {
    return this.t.json("POST", sbPath(sandboxId, "commands"), { json: req }, opts);
  }

  /**
   * Starts a command and waits up to q.waitMs for it to end, in one round
   * trip; the record is final when commandDone says so.
   */
  execWait(sandboxId: string, req: CreateCommandRequest, q: CommandQuery, opts?: RequestOptions): Promise<Command> {
    return this.t.json("POST", sbPath(sandboxId, "commands"), { query: commandQuery(q), json: req }, opts);
  }

  /** Starts a command and waits for it to finish, returning its record with the first window of its output. */
  async run(sandboxId: string, req: CreateCommandRequest, opts?: RequestOptions): Promise<Command> {
    const c = await this.execWait(sandboxId, req, { waitMs: 60000 }, opts);
    return commandDone(c) ? c : this.wait(sandboxId, c.id, {}, opts);
  }

  /** Waits until a command has finished and returns its record (q selects the output window). */
  async wait(sandboxId: string, id: string, q: CommandQuery = {}, opts?: RequestOptions): Promise<Command> {
    for (;;) {
      const c = await this.get(sandboxId, id, { waitMs: 60000, ...q }, opts);
      if (commandDone(c)) {
        return c;
      }
    }
  }

  /** Reads a command record with a window of its output. */
  get(sandboxId: string, id: string, q: CommandQuery = {}, opts?: RequestOptions): Promise<Command> {
    return this.t.json("GET", sbPath(sandboxId, "commands", seg(id)), { query: commandQuery(q) }, opts);
  }

  /** Lists a sandbox's retained commands, newest first. */
  async list(sandboxId: string, opts?: RequestOptions): Promise<Command[]> {
    const out = await this.t.json<CommandList>("GET", sbPath(sandboxId, "commands"), {}, opts);
    return out.commands;
  }

  /** Cancels a running command and returns its record. */
  cancel(sandboxId: string, id: string, opts?: RequestOptions): Promise<Command> {
    return this.t.json("POST", sbPath(sandboxId, "commands", seg(id), "cancel"), {}, opts);
  }

  /** Writes to a command's standard input; eof closes it. */
  stdin(sandboxId: string, id: string, req: StdinRequest, opts?: RequestOptions): Promise<void> {
    return this.t.call("POST", sbPath(sandboxId, "commands", seg(id), "stdin"), { json: req }, opts);
  }

  /**
   * Follows a command's output from the given offsets (Server-Sent Events)
   * until its exit event, the last one. A stream that ends before the exit
   * event throws a BerthError with code unavailable; break out of the loop
   * (or abort opts.signal) to stop early.
   */
  async *stream(
    sandboxId: string,
    id: string,
    from: { stdoutOffset?: number; stderrOffset?: number; base64?: boolean } = {},
    opts?: RequestOptions,
  ): AsyncGenerator<CommandEvent, Command | undefined> {
    const q = commandQuery({ stdoutOffset: from.stdoutOffset, stderrOffset: from.stderrOffset, base64: from.base64 });
    const resp = await this.t.send("GET", sbPath(sandboxId, "commands", seg(id), "stream"), { query: q }, opts);
    if (!resp.body) {
      throw new BerthError({ status: resp.status, code: "unavailable", message: "command stream has no body" });
    }
    for await (const ev of parseSSE(resp.body)) {
      const data = JSON.parse(ev.data) as StreamEvent;
      if (ev.event === "exit") {
        if (!data.command) {
          throw new BerthError({ status: resp.status, code: "unavailable", message: "exit event without a command" });
        }
        yield { event: "exit", command: data.command };
        return data.command;
      }
      if (ev.event === "stdout" || ev.event === "stderr") {
        yield { event: ev.event, offset: data.offset, data: data.data, data_base64: data.data_base64 };
      }
    }
    if (opts?.signal?.aborted) {
      throw opts.signal.reason;
    }
    throw new BerthError({ status: resp.status, code: "unavailable", message: "command stream ended before the command exited" });
  }
}

/** Files of a sandbox's workspace. */
export class Files {
  constructor(private readonly t: Transport) {}

  /** Lists a directory, one page at a time (next_cursor fetches the next). */
  list(sandboxId: string, dir: string, page: { cursor?: string; limit?: number } = {}, opts?: RequestOptions): Promise<FileList> {
    return this.t.json("GET", sbPath(sandboxId, "files"), { query: { path: dir, cursor: page.cursor, limit: page.limit } }, opts);
  }

  /** Reads a file's bytes. */
  read(sandboxId: string, path: string, opts?: RequestOptions): Promise<Uint8Array> {
    return this.t.bytes("GET", sbPath(sandboxId, "files", "content"), { query: { path } }, opts);
  }

  /** Reads a file as UTF-8 text. */
  async readText(sandboxId: string, path: string, opts?: RequestOptions): Promise<string> {
    return new TextDecoder().decode(await this.read(sandboxId, path, opts));
  }

  /** Streams a file: the response's body, for files too large to hold. */
  async readStream(sandboxId: string, path: string, opts?: RequestOptions): Promise<ReadableStream<Uint8Array>> {
    const resp = await this.t.send("GET", sbPath(sandboxId, "files", "content"), { query: { path } }, opts);
    if (!resp.body) {
      return new ReadableStream({ start: (c) => c.close() });
    }
    return resp.body;
  }

  /**
   * Stores data at path, creating parent directories. mode is octal
   * permission bits such as 0o644 (omitted: the default).
   */
  async write(sandboxId: string, path: string, data: Bytes, options: { mode?: number } = {}, opts?: RequestOptions): Promise<FileInfo> {
    const query = { path, mode: options.mode ? options.mode.toString(8) : undefined };
    const resp = await this.t.send("PUT", sbPath(sandboxId, "files", "content"), { query, body: data }, opts);
    return (await resp.json()) as FileInfo;
  }

  /** Creates a directory and its parents. */
  mkdir(sandboxId: string, path: string, opts?: RequestOptions): Promise<void> {
    return this.t.call("POST", sbPath(sandboxId, "files", "mkdir"), { json: { path } }, opts);
  }

  /** Renames a file or directory. */
  move(sandboxId: string, req: MoveRequest, opts?: RequestOptions): Promise<void> {
    return this.t.call("POST", sbPath(sandboxId, "files", "move"), { json: req }, opts);
  }

  /** Deletes a file, or a directory tree when recursive. */
  remove(sandboxId: string, path: string, options: { recursive?: boolean } = {}, opts?: RequestOptions): Promise<void> {
    return this.t.call("DELETE", sbPath(sandboxId, "files"), { query: { path, recursive: options.recursive ? "true" : undefined } }, opts);
  }
}
