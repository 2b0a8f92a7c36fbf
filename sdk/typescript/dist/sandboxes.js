import { BerthError } from "./errors.js";
import { seg } from "./http.js";
import { parseSSE } from "./sse.js";
/** The path of sandbox id, and more segments under it (already escaped). */
export function sbPath(id, ...rest) {
    return ["/v1/sandboxes/" + seg(id), ...rest].join("/");
}
/** Sandboxes: create, read, list, delete and their lifecycle. */
export class Sandboxes {
    t;
    constructor(t) {
        this.t = t;
    }
    /** Creates a sandbox (or returns the one named req.name). */
    create(req = {}, opts) {
        return this.t.json("POST", "/v1/sandboxes", { json: req }, opts);
    }
    /** Returns one sandbox. */
    get(id, opts) {
        return this.t.json("GET", sbPath(id), {}, opts);
    }
    /** Lists a page of the sandboxes the key sees; next_cursor fetches the next. */
    list(page = {}, opts) {
        return this.t.json("GET", "/v1/sandboxes", { query: { limit: page.limit, cursor: page.cursor } }, opts);
    }
    /** Lists every sandbox the key sees, paging through them. */
    async listAll(opts) {
        const all = [];
        let cursor;
        do {
            const page = await this.list({ cursor }, opts);
            all.push(...page.sandboxes);
            cursor = page.next_cursor;
        } while (cursor);
        return all;
    }
    /** Deletes a sandbox and everything in it. */
    delete(id, opts) {
        return this.t.call("DELETE", sbPath(id), {}, opts);
    }
    /** Freezes a sandbox: memory kept, no CPU. Any later call resumes it. */
    pause(id, opts) {
        return this.t.json("POST", sbPath(id, "pause"), {}, opts);
    }
    /** Thaws a paused sandbox. */
    resume(id, opts) {
        return this.t.json("POST", sbPath(id, "resume"), {}, opts);
    }
    /** Stops a sandbox's processes and keeps its files; any later call wakes it. */
    hibernate(id, opts) {
        return this.t.json("POST", sbPath(id, "hibernate"), {}, opts);
    }
}
function commandQuery(q = {}) {
    return {
        wait_ms: q.waitMs && q.waitMs > 0 ? q.waitMs : undefined,
        stdout_offset: q.stdoutOffset && q.stdoutOffset > 0 ? q.stdoutOffset : undefined,
        stderr_offset: q.stderrOffset && q.stderrOffset > 0 ? q.stderrOffset : undefined,
        max_bytes: q.maxBytes && q.maxBytes > 0 ? q.maxBytes : undefined,
        encoding: q.base64 ? "base64" : undefined,
    };
}
/** Reports whether a command has finished, whatever the outcome. */
export function commandDone(c) {
    return c.status !== undefined && c.status !== "running";
}
/** Commands: run, wait, read, stream, cancel, and write standard input. */
export class Commands {
    t;
    constructor(t) {
        this.t = t;
    }
    /** Starts a command and returns its record (running, or failed when it could not start). */
    exec(sandboxId, req, opts) {
        return this.t.json("POST", sbPath(sandboxId, "commands"), { json: req }, opts);
    }
    /**
     * Starts a command and waits up to q.waitMs for it to end, in one round
     * trip; the record is final when commandDone says so.
     */
    execWait(sandboxId, req, q, opts) {
        return this.t.json("POST", sbPath(sandboxId, "commands"), { query: commandQuery(q), json: req }, opts);
    }
    /** Starts a command and waits for it to finish, returning its record with the first window of its output. */
    async run(sandboxId, req, opts) {
        const c = await this.execWait(sandboxId, req, { waitMs: 60000 }, opts);
        return commandDone(c) ? c : this.wait(sandboxId, c.id, {}, opts);
    }
    /** Waits until a command has finished and returns its record (q selects the output window). */
    async wait(sandboxId, id, q = {}, opts) {
        for (;;) {
            const c = await this.get(sandboxId, id, { waitMs: 60000, ...q }, opts);
            if (commandDone(c)) {
                return c;
            }
        }
    }
    /** Reads a command record with a window of its output. */
    get(sandboxId, id, q = {}, opts) {
        return this.t.json("GET", sbPath(sandboxId, "commands", seg(id)), { query: commandQuery(q) }, opts);
    }
    /** Lists a sandbox's retained commands, newest first. */
    async list(sandboxId, opts) {
        const out = await this.t.json("GET", sbPath(sandboxId, "commands"), {}, opts);
        return out.commands;
    }
    /** Cancels a running command and returns its record. */
    cancel(sandboxId, id, opts) {
        return this.t.json("POST", sbPath(sandboxId, "commands", seg(id), "cancel"), {}, opts);
    }
    /** Writes to a command's standard input; eof closes it. */
    stdin(sandboxId, id, req, opts) {
        return this.t.call("POST", sbPath(sandboxId, "commands", seg(id), "stdin"), { json: req }, opts);
    }
    /**
     * Follows a command's output from the given offsets (Server-Sent Events)
     * until its exit event, the last one. A stream that ends before the exit
     * event throws a BerthError with code unavailable; break out of the loop
     * (or abort opts.signal) to stop early.
     */
    async *stream(sandboxId, id, from = {}, opts) {
        const q = commandQuery({ stdoutOffset: from.stdoutOffset, stderrOffset: from.stderrOffset, base64: from.base64 });
        const resp = await this.t.send("GET", sbPath(sandboxId, "commands", seg(id), "stream"), { query: q }, opts);
        if (!resp.body) {
            throw new BerthError({ status: resp.status, code: "unavailable", message: "command stream has no body" });
        }
        for await (const ev of parseSSE(resp.body)) {
            const data = JSON.parse(ev.data);
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
    t;
    constructor(t) {
        this.t = t;
    }
    /** Lists a directory, one page at a time (next_cursor fetches the next). */
    list(sandboxId, dir, page = {}, opts) {
        return this.t.json("GET", sbPath(sandboxId, "files"), { query: { path: dir, cursor: page.cursor, limit: page.limit } }, opts);
    }
    /** Reads a file's bytes. */
    read(sandboxId, path, opts) {
        return this.t.bytes("GET", sbPath(sandboxId, "files", "content"), { query: { path } }, opts);
    }
    /** Reads a file as UTF-8 text. */
    async readText(sandboxId, path, opts) {
        return new TextDecoder().decode(await this.read(sandboxId, path, opts));
    }
    /** Streams a file: the response's body, for files too large to hold. */
    async readStream(sandboxId, path, opts) {
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
    async write(sandboxId, path, data, options = {}, opts) {
        const query = { path, mode: options.mode ? options.mode.toString(8) : undefined };
        const resp = await this.t.send("PUT", sbPath(sandboxId, "files", "content"), { query, body: data }, opts);
        return (await resp.json());
    }
    /** Creates a directory and its parents. */
    mkdir(sandboxId, path, opts) {
        return this.t.call("POST", sbPath(sandboxId, "files", "mkdir"), { json: { path } }, opts);
    }
    /** Renames a file or directory. */
    move(sandboxId, req, opts) {
        return this.t.call("POST", sbPath(sandboxId, "files", "move"), { json: req }, opts);
    }
    /** Deletes a file, or a directory tree when recursive. */
    remove(sandboxId, path, options = {}, opts) {
        return this.t.call("DELETE", sbPath(sandboxId, "files"), { query: { path, recursive: options.recursive ? "true" : undefined } }, opts);
    }
}
