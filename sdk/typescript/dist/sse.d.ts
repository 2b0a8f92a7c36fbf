/** One Server-Sent Event. */
export interface SSEEvent {
    /** The event name ("message" when the server gave none). */
    event: string;
    data: string;
    id?: string;
}
/**
 * Parses a text/event-stream body into events. Comment lines (keep-alives)
 * are skipped; a multi-line data field is joined with newlines.
 */
export declare function parseSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEEvent>;
