import { type RequestOptions, type Transport } from "./http.js";
import type { Preview, Service, ServiceLogs, ServiceSpec } from "./types.js";
/** Services: long-running processes a sandbox supervises. */
export declare class Services {
    private readonly t;
    constructor(t: Transport);
    /** Starts a service, or replaces the one of the same name (an identical spec changes nothing). */
    put(sandboxId: string, spec: ServiceSpec, opts?: RequestOptions): Promise<Service>;
    /** Lists a sandbox's services. */
    list(sandboxId: string, opts?: RequestOptions): Promise<Service[]>;
    /** Returns one service's spec and state. */
    get(sandboxId: string, name: string, opts?: RequestOptions): Promise<Service>;
    /** Stops a service; it stays stopped, also across wakes, until start. */
    stop(sandboxId: string, name: string, opts?: RequestOptions): Promise<Service>;
    /** Starts a stopped, exited or failed service again. */
    start(sandboxId: string, name: string, opts?: RequestOptions): Promise<Service>;
    /** Stops a service and forgets it. */
    delete(sandboxId: string, name: string, opts?: RequestOptions): Promise<void>;
    /** Reads a window of a service's log from q.offset; pass next_offset back to follow it. */
    logs(sandboxId: string, name: string, q?: {
        offset?: number;
        maxBytes?: number;
        waitMs?: number;
    }, opts?: RequestOptions): Promise<ServiceLogs>;
}
/** Previews: reaching a sandbox's ports from a browser, or through the API. */
export declare class Previews {
    private readonly t;
    constructor(t: Transport);
    /**
     * Says how to reach a port from a browser: the host-based URL, the
     * preview token, and a signed link that sets the preview cookie (valid
     * for ttlSeconds; default 15 minutes).
     */
    get(sandboxId: string, port: number, options?: {
        ttlSeconds?: number;
    }, opts?: RequestOptions): Promise<Preview>;
    /**
     * Sends an HTTP request to a port of the sandbox through the API
     * (/v1/sandboxes/{id}/ports/{port}/{path}) with the key, and returns the
     * app's response whatever its status. path may carry a query.
     */
    fetch(sandboxId: string, port: number, path?: string, init?: RequestInit, opts?: RequestOptions): Promise<Response>;
}
