import { type Bytes, type RequestOptions, type Transport } from "./http.js";
import type { ActionHealth, CreateJobRequest, FileRef, Job, JobEvent, JobState, Jobs as JobPage } from "./types.js";
/** Reports whether a job in state s is finished. */
export declare function jobTerminal(s: string): boolean;
/** Jobs: document conversions and other actions, run in fresh sandboxes. */
export declare class Jobs {
    private readonly t;
    constructor(t: Transport);
    /** Every action's health. */
    actions(opts?: RequestOptions): Promise<ActionHealth[]>;
    /** One action's health (an unknown action is a not_found BerthError). */
    action(name: string, opts?: RequestOptions): Promise<ActionHealth>;
    /** Stores a job input and returns its reference; name helps the server tell its type. */
    uploadFile(data: Bytes, options?: {
        name?: string;
    }, opts?: RequestOptions): Promise<FileRef>;
    /** A stored file's bytes. */
    downloadFile(sha256: string, opts?: RequestOptions): Promise<Uint8Array>;
    /** Queues a job; a repeat of an earlier request (same business_id and request) returns that job with repeat set. */
    create(req: CreateJobRequest, opts?: RequestOptions): Promise<Job>;
    get(id: string, opts?: RequestOptions): Promise<Job>;
    /** A page of jobs, newest first (next_cursor fetches the next). */
    list(filter?: {
        state?: JobState;
        action?: string;
        limit?: number;
        cursor?: string;
    }, opts?: RequestOptions): Promise<JobPage>;
    /** Cancels a job and returns it once canceled. */
    cancel(id: string, opts?: RequestOptions): Promise<Job>;
    /** A job's events after sequence number after, until the job is finished. */
    events(id: string, from?: {
        after?: number;
    }, opts?: RequestOptions): AsyncGenerator<JobEvent>;
    /** Waits until the job is finished and returns it. */
    wait(id: string, opts?: RequestOptions): Promise<Job>;
    /**
     * Runs a job synchronously (POST /v1/convert/{action}) and returns its
     * output's bytes and type with the job's ID. A failed job is a BerthError
     * with the job's code and reason.
     */
    convert(req: CreateJobRequest, opts?: RequestOptions): Promise<{
        jobId: string;
        contentType: string;
        data: Uint8Array;
    }>;
}
