import { BerthError } from "./errors.js";
import { type Bytes, type RequestOptions, type Transport, seg } from "./http.js";
import { parseSSE } from "./sse.js";
import type { ActionHealth, Actions, CreateJobRequest, FileRef, Job, JobEvent, JobState, Jobs as JobPage } from "./types.js";

/** Reports whether a job in state s is finished. */
export function jobTerminal(s: string): boolean {
  return s === "succeeded" || s === "failed" || s === "canceled";
}

/** Jobs: document conversions and other actions, run in fresh sandboxes. */
export class Jobs {
  constructor(private readonly t: Transport) {}

  /** Every action's health. */
  async actions(opts?: RequestOptions): Promise<ActionHealth[]> {
    const out = await this.t.json<Actions>("GET", "/v1/actions", {}, opts);
    return out.actions;
  }

  /** One action's health (an unknown action is a not_found BerthError). */
  action(name: string, opts?: RequestOptions): Promise<ActionHealth> {
    return this.t.json("GET", "/v1/actions/" + seg(name), {}, opts);
  }

  /** Stores a job input and returns its reference; name helps the server tell its type. */
  async uploadFile(data: Bytes, options: { name?: string } = {}, opts?: RequestOptions): Promise<FileRef> {
    const resp = await this.t.send("POST", "/v1/files", { query: { name: options.name }, body: data }, opts);
    return (await resp.json()) as FileRef;
  }

  /** A stored file's bytes. */
  downloadFile(sha256: string, opts?: RequestOptions): Promise<Uint8Array> {
    return this.t.bytes("GET", "/v1/files/" + seg(sha256), {}, opts);
  }

  /** Queues a job; a repeat of an earlier request (same business_id and request) returns that job with repeat set. */
  create(req: CreateJobRequest, opts?: RequestOptions): Promise<Job> {
    return this.t.json("POST", "/v1/jobs", { json: req }, opts);
  }

  get(id: string, opts?: RequestOptions): Promise<Job> {
    return this.t.json("GET", "/v1/jobs/" + seg(id), {}, opts);
  }

  /** A page of jobs, newest first (next_cursor fetches the next). */
  list(filter: { state?: JobState; action?: string; limit?: number; cursor?: string } = {}, opts?: RequestOptions): Promise<JobPage> {
    return this.t.json("GET", "/v1/jobs", { query: { ...filter, limit: filter.limit || undefined } }, opts);
  }

  /** Cancels a job and returns it once canceled. */
  cancel(id: string, opts?: RequestOptions): Promise<Job> {
    return this.t.json("POST", "/v1/jobs/" + seg(id) + "/cancel", {}, opts);
  }

  /** A job's events after sequence number after, until the job is finished. */
  async *events(id: string, from: { after?: number } = {}, opts?: RequestOptions): AsyncGenerator<JobEvent> {
    const resp = await this.t.send("GET", "/v1/jobs/" + seg(id) + "/events", { query: { after: from.after || undefined } }, opts);
    if (!resp.body) {
      return;
    }
    for await (const ev of parseSSE(resp.body)) {
      yield JSON.parse(ev.data) as JobEvent;
    }
  }

  /** Waits until the job is finished and returns it. */
  async wait(id: string, opts?: RequestOptions): Promise<Job> {
    for (;;) {
      // The stream ends once the job is finished; a stream cut short is
      // followed again.
      for await (const ev of this.events(id, {}, opts)) {
        if (jobTerminal(ev.type)) {
          break;
        }
      }
      const j = await this.get(id, opts);
      if (jobTerminal(j.state)) {
        return j;
      }
    }
  }

  /**
   * Runs a job synchronously (POST /v1/convert/{action}) and returns its
   * output's bytes and type with the job's ID. A failed job is a BerthError
   * with the job's code and reason.
   */
  async convert(req: CreateJobRequest, opts?: RequestOptions): Promise<{ jobId: string; contentType: string; data: Uint8Array }> {
    if (!req.action) {
      throw new BerthError({ status: 0, code: "invalid", reason: "", message: "convert needs an action", problems: { action: "required" } });
    }
    const resp = await this.t.send("POST", "/v1/convert/" + seg(req.action), { json: req }, opts);
    return {
      jobId: resp.headers.get("Berth-Job-Id") ?? "",
      contentType: resp.headers.get("Content-Type") ?? "",
      data: new Uint8Array(await resp.arrayBuffer()),
    };
  }
}
