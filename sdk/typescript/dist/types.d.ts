/** The one shape of every error response. */
export interface ErrorBody {
    error: ErrorDetail;
}
/** An error: `code` is coarse and stable, `reason` the specific cause. */
export interface ErrorDetail {
    code: ErrorCode;
    reason?: string;
    message: string;
    request_id?: string;
    problems?: Record<string, string>;
}
/** The coarse error codes of internal/errcode. */
export type ErrorCode = "invalid" | "unauthenticated" | "permission_denied" | "not_found" | "conflict" | "resource_exhausted" | "payload_too_large" | "unimplemented" | "unavailable" | "deadline_exceeded" | "canceled" | "internal" | "unprocessable";
/** GET /v1/system. */
export interface System {
    version: string;
    data_dir?: string;
    runtimes: RuntimeInfo[];
    limits: Limits;
    counts: Counts;
    pools: Pool[];
    browser: BrowserInfo;
    jobs: JobsInfo;
}
export interface RuntimeInfo {
    name: string;
    available: boolean;
    default?: boolean;
    isolated: boolean;
    reason?: string;
    fix?: string;
}
export interface Limits {
    max_sandboxes: number;
    max_concurrent_commands: number;
    max_command_history: number;
    output_cap_bytes: number;
    max_upload_bytes: number;
    default_timeout_ms: number;
    max_timeout_ms: number;
    max_json_body_bytes: number;
    max_download_bytes: number;
    max_list_page_entries: number;
    default_list_page_entries: number;
    default_resources: Resources;
    max_resources: Resources;
}
export interface Counts {
    sandboxes: number;
    pooled: number;
}
export interface Pool {
    template: string;
    runtime: string;
    size: number;
    ready: number;
    reason?: string;
    message?: string;
    failures?: number;
}
export interface BrowserInfo {
    available: boolean;
    chromium?: string;
    reason?: string;
    sessions: number;
    max_sessions: number;
    isolated_available: boolean;
    isolated_reason?: string;
    isolated_ready: number;
    isolated_warm: number;
    providers?: string[];
}
export interface JobsInfo {
    runtime: string;
    pools: JobPoolInfo[];
    sandboxes: number;
    active: number;
}
export interface JobPoolInfo {
    profile: string;
    size: number;
    ready: number;
}
export type SandboxState = "pending" | "starting" | "running" | "paused" | "hibernated" | "stopping" | "terminated" | "failed";
/** The body of POST /v1/sandboxes. */
export interface CreateSandboxRequest {
    runtime?: string;
    name?: string;
    env?: Record<string, string>;
    labels?: Record<string, string>;
    resources?: Resources;
    /** Return at once with a pending sandbox; the first call provisions it. */
    lazy?: boolean;
    idle?: Idle;
    template?: string;
    network?: Network;
}
/** A sandbox's idle policy; 0 disables a step. */
export interface Idle {
    pause_after_ms: number;
    hibernate_after_ms: number;
    delete_after_ms: number;
}
export interface Resources {
    cpus?: number;
    memory_mb?: number;
    pids?: number;
    disk_mb?: number;
    shm_mb?: number;
}
export interface Sandbox {
    id: string;
    name?: string;
    runtime: string;
    state: SandboxState;
    reason?: string;
    labels?: Record<string, string>;
    env_keys?: string[];
    resources?: Resources;
    template: string;
    idle: Idle;
    workspace: string;
    network: Network;
    created_at: string;
    updated_at: string;
}
/** GET /v1/sandboxes. */
export interface SandboxList {
    sandboxes: Sandbox[];
    next_cursor?: string;
}
/** A sandbox's network policy (docs/network.md). */
export interface Network {
    mode: string;
    allow?: string[];
    deny?: string[];
    allow_only?: string[];
    ports?: number[];
}
export type CommandStatus = "running" | "exited" | "failed" | "canceled" | "timed_out" | "interrupted";
/** The body of POST /v1/sandboxes/{id}/commands: exactly one of command and argv. */
export interface CreateCommandRequest {
    command?: string;
    argv?: string[];
    cwd?: string;
    env?: Record<string, string>;
    timeout_ms?: number;
    stdin?: string;
    stdin_open?: boolean;
}
/** A command record with a window of its output. */
export interface Command {
    id: string;
    sandbox_id?: string;
    status: CommandStatus;
    reason?: string;
    command?: string;
    argv?: string[];
    cwd?: string;
    timeout_ms: number;
    exit_code?: number;
    signal?: string;
    pid?: number;
    started_at: string;
    finished_at?: string;
    stdout: string;
    stderr: string;
    encoding?: string;
    stdout_offset: number;
    stderr_offset: number;
    next_stdout_offset: number;
    next_stderr_offset: number;
    stdout_bytes: number;
    stderr_bytes: number;
    stdout_truncated: boolean;
    stderr_truncated: boolean;
}
/** GET /v1/sandboxes/{id}/commands. */
export interface CommandList {
    commands: Command[];
}
/** The body of POST .../commands/{cid}/stdin. */
export interface StdinRequest {
    data?: string;
    data_base64?: string;
    eof?: boolean;
}
/** The data of one Server-Sent Event of a command stream. */
export interface StreamEvent {
    offset: number;
    data?: string;
    data_base64?: string;
    command?: Command;
}
export interface FileInfo {
    name: string;
    path: string;
    type: "file" | "dir" | "symlink" | "other";
    size: number;
    mode: string;
    modified_at: string;
}
/** GET /v1/sandboxes/{id}/files. */
export interface FileList {
    path: string;
    entries: FileInfo[];
    next_cursor?: string;
}
export interface MkdirRequest {
    path: string;
}
export interface MoveRequest {
    from: string;
    to: string;
    overwrite?: boolean;
}
export type TerminalStatus = "running" | "exited";
/** The body of POST /v1/sandboxes/{id}/terminals; without command, a shell. */
export interface CreateTerminalRequest {
    cols: number;
    rows: number;
    command?: string;
    cwd?: string;
    env?: Record<string, string>;
}
export interface ResizeTerminalRequest {
    cols: number;
    rows: number;
}
export interface TerminalInputRequest {
    data?: string;
    data_base64?: string;
}
export interface Terminal {
    id: string;
    status: TerminalStatus;
    command?: string;
    cwd?: string;
    cols: number;
    rows: number;
    pid?: number;
    exit_code?: number;
    signal?: string;
    output_bytes: number;
    started_at: string;
    finished_at?: string;
}
export interface TerminalList {
    terminals: Terminal[];
}
/** GET .../terminals/{tid}/output: bytes from offset to next_offset, base64. */
export interface TerminalOutput {
    data_base64: string;
    offset: number;
    next_offset: number;
    truncated: boolean;
    status: TerminalStatus;
    exit_code?: number;
    signal?: string;
}
/** A JSON control message on a terminal's WebSocket (a text frame). */
export interface TerminalMessage {
    type: "resize" | "truncated" | "exit" | "error";
    cols?: number;
    rows?: number;
    offset?: number;
    status?: string;
    exit_code?: number;
    signal?: string;
    message?: string;
}
export type ServiceStatus = "starting" | "running" | "backoff" | "exited" | "failed" | "stopped";
/** The body of POST /v1/sandboxes/{id}/services. */
export interface ServiceSpec {
    name: string;
    command?: string;
    argv?: string[];
    cwd?: string;
    env?: Record<string, string>;
    restart?: RestartPolicy;
    port?: number;
    ready?: Readiness;
}
export interface RestartPolicy {
    policy?: "never" | "on-failure" | "always";
    max_restarts?: number;
    delay_ms?: number;
}
export interface Readiness {
    tcp?: boolean;
    http_path?: string;
    timeout_ms?: number;
}
export interface ServiceExit {
    exit_code?: number;
    signal?: string;
    reason?: string;
    at: string;
}
export interface Service {
    name: string;
    sandbox_id?: string;
    spec: ServiceSpec;
    status: ServiceStatus;
    reason?: string;
    pid?: number;
    ready: boolean;
    restarts: number;
    started_at?: string;
    last_exit?: ServiceExit;
    log_bytes: number;
}
export interface ServiceList {
    services: Service[];
}
/** A window of a service's log. */
export interface ServiceLogs {
    data?: string;
    data_base64?: string;
    offset: number;
    next_offset: number;
    truncated: boolean;
    done: boolean;
}
/** GET /v1/sandboxes/{id}/previews/{port}. */
export interface Preview {
    sandbox_id: string;
    port: number;
    url?: string;
    auth_url?: string;
    token?: string;
    expires_at: string;
    path_url: string;
}
export type BrowserMode = "context" | "process" | "remote" | "isolated";
export type BrowserState = "open" | "crashed" | "closed";
export interface Viewport {
    width: number;
    height: number;
}
/** The body of POST /v1/browser/sessions. */
export interface CreateBrowserSessionRequest {
    mode?: BrowserMode;
    cdp_url?: string;
    provider?: string;
    viewport?: Viewport;
    user_agent?: string;
    locale?: string;
    timezone?: string;
    profile?: string;
    idle_timeout_ms?: number;
    max_duration_ms?: number;
    capture_console?: boolean;
}
export interface BrowserSession {
    id: string;
    mode: BrowserMode;
    profile?: string;
    state: BrowserState;
    reason?: string;
    url: string;
    title: string;
    pages: number;
    viewport: Viewport;
    created_at: string;
    last_used_at: string;
    expires_at: string;
    provider?: string;
    provider_session_id?: string;
    sandbox_id?: string;
}
export interface BrowserSessionList {
    sessions: BrowserSession[];
}
/** Selects one element: a CSS selector, or a semantic query. */
export interface BrowserTarget {
    selector?: string;
    by?: "role" | "text" | "label" | "test_id" | "ref";
    value?: string;
    role?: string;
    name?: string;
    exact?: boolean;
    nth?: number;
    frame?: string[];
}
/** A file an upload puts in a file input. */
export interface BrowserFile {
    name: string;
    content_base64: string;
}
/**
 * The body of POST /v1/browser/sessions/{id}/actions, every field any op
 * reads. {@link BrowserActionOf} narrows it per op.
 */
export interface BrowserAction {
    op: BrowserOp;
    url?: string;
    expression?: string;
    value?: string;
    values?: string[];
    selector?: string;
    target?: BrowserTarget;
    state?: "attached" | "visible" | "hidden" | "detached";
    load_state?: "load" | "domcontentloaded";
    timeout_ms?: number;
    per_key?: boolean;
    full_page?: boolean;
    format?: "png" | "jpeg";
    quality?: number;
    delta_x?: number;
    delta_y?: number;
    x?: number;
    y?: number;
    to_x?: number;
    to_y?: number;
    action?: "list" | "new" | "select" | "close";
    index?: number;
    accept?: boolean;
    prompt_text?: string;
    max_elements?: number;
    files?: BrowserFile[];
    to?: BrowserTarget;
    ttl_ms?: number;
    console_text?: boolean;
    clear?: boolean;
    max_text_length?: number;
    depth?: number;
    boxes?: boolean;
    artifact_id?: string;
    /** The human-control lease's token, while a lease is held. */
    lease?: string;
}
/** A target given either way: `selector` (CSS) or `target`. */
export interface Targeted {
    selector?: string;
    target?: BrowserTarget;
}
/** Fields every op takes. */
export interface ActionCommon {
    timeout_ms?: number;
    lease?: string;
}
/** What each op takes besides `op` (docs/api.md, the actions table). */
export interface BrowserOpParams {
    navigate: {
        url: string;
    };
    back: {};
    forward: {};
    reload: {};
    evaluate: {
        expression: string;
    };
    click: Targeted;
    dblclick: Targeted;
    hover: Targeted;
    focus: Targeted;
    type: Targeted & {
        value: string;
        per_key?: boolean;
    };
    fill: Targeted & {
        value: string;
    };
    press: Targeted & {
        value: string;
    };
    select: Targeted & {
        value?: string;
        values?: string[];
    };
    check: Targeted;
    uncheck: Targeted;
    scroll: Targeted & {
        delta_x?: number;
        delta_y?: number;
    };
    waitFor: Targeted & {
        state?: "attached" | "visible" | "hidden" | "detached";
        url?: string;
        load_state?: "load" | "domcontentloaded";
    };
    content: {};
    screenshot: Targeted & {
        full_page?: boolean;
        format?: "png" | "jpeg";
        quality?: number;
    };
    snapshot: {
        max_elements?: number;
    };
    pages: {
        action?: "list" | "new" | "select" | "close";
        url?: string;
        index?: number;
    };
    dialog: {
        accept?: boolean;
        prompt_text?: string;
        ttl_ms?: number;
    };
    mouseClick: {
        x: number;
        y: number;
    };
    mouseMove: {
        x: number;
        y: number;
    };
    drag: Targeted & {
        to: BrowserTarget;
    };
    dragCoordinates: {
        x: number;
        y: number;
        to_x: number;
        to_y: number;
    };
    upload: Targeted & {
        files: BrowserFile[];
    };
    download: Targeted & {
        url?: string;
    };
    inspect: Targeted & {
        max_elements?: number;
        max_text_length?: number;
    };
    diagnostics: {
        console_text?: boolean;
        clear?: boolean;
    };
    accessibility: {
        depth?: number;
        boxes?: boolean;
        max_elements?: number;
    };
    traceStart: {};
    traceStop: {};
    downloadRead: {
        artifact_id?: string;
    };
    downloadDelete: {
        artifact_id: string;
    };
}
/** What each op answers (the `result` of the response). */
export interface BrowserOpResults {
    navigate: {
        url: string;
        status: number;
    };
    back: null;
    forward: null;
    reload: null;
    evaluate: unknown;
    click: null;
    dblclick: null;
    hover: null;
    focus: null;
    type: null;
    fill: null;
    press: null;
    select: {
        selected: string[];
    };
    check: {
        checked: boolean;
    };
    uncheck: {
        checked: boolean;
    };
    scroll: null;
    waitFor: {
        matched: boolean;
    };
    content: {
        html: string;
        truncated: boolean;
    };
    screenshot: Image;
    snapshot: BrowserSnapshot;
    pages: BrowserPage[];
    dialog: {
        accept: boolean;
        expires_in_ms: number;
    };
    mouseClick: null;
    mouseMove: null;
    drag: null;
    dragCoordinates: null;
    upload: {
        files: number;
        bytes: number;
    };
    download: BrowserDownload;
    inspect: BrowserInspect;
    diagnostics: BrowserDiagnostics;
    accessibility: BrowserAccessibility;
    traceStart: {
        started_at: string;
        max_duration_ms: number;
        max_bytes: number;
    };
    traceStop: BrowserTrace;
    downloadRead: BrowserArtifactList | BrowserArtifactContent;
    downloadDelete: {
        deleted: boolean;
    };
}
/** The browser ops. */
export type BrowserOp = keyof BrowserOpParams;
/** The body of one op: `op`, its fields, and the common ones. */
export type BrowserActionOf<O extends BrowserOp> = {
    op: O;
} & BrowserOpParams[O] & ActionCommon;
/** The answer of an action. */
export interface BrowserActionResult<T = unknown> {
    result: T;
}
/** An image result, as a screenshot's. */
export interface Image {
    mime_type: string;
    base64: string;
}
export interface BrowserPage {
    index: number;
    url: string;
    title: string;
    current: boolean;
}
/** The snapshot op's result: YAML lines with refs for targets ({by: "ref"}). */
export interface BrowserSnapshot {
    url: string;
    title: string;
    yaml: string;
    refs: number;
    truncated: boolean;
}
export interface BrowserAccessibility extends BrowserSnapshot {
    depth: number;
    max_bytes: number;
    boxes?: Record<string, [number, number, number, number]>;
    boxes_truncated?: boolean;
    coordinate_space?: string;
}
export interface BrowserInspectNode {
    depth: number;
    tag: string;
    attributes?: Record<string, string>;
    text?: string;
    value?: string;
    box?: [number, number, number, number];
    visible: boolean;
    children?: number;
}
export interface BrowserInspect {
    nodes: BrowserInspectNode[];
    truncated: boolean;
    coordinate_space: string;
    max_elements: number;
    max_text_length: number;
}
export interface BrowserDiagnostics {
    events: BrowserEvent[];
    dropped: number;
    console_text: boolean;
    max_events: number;
}
/** A file a download op caught. */
export interface BrowserDownload {
    filename: string;
    url: string;
    size: number;
    base64: string;
    artifact_id: string;
}
/** One entry of a session's diagnostics ring. */
export interface BrowserEvent {
    at: string;
    kind: "console" | "request_failed" | "response" | "dialog" | "blocked";
    level?: string;
    text?: string;
    url?: string;
    status?: number;
    method?: string;
    action?: string;
}
export interface BrowserArtifact {
    id: string;
    kind: "download" | "trace";
    filename: string;
    mime_type: string;
    size: number;
    sha256: string;
    created_at: string;
}
export interface BrowserArtifactList {
    artifacts: BrowserArtifact[];
    files: number;
    bytes: number;
    max_files: number;
    max_bytes: number;
}
export interface BrowserArtifactContent extends BrowserArtifact {
    base64: string;
}
export interface BrowserTrace extends BrowserArtifact {
    actions: number;
    screenshots: number;
}
/** The body of POST .../control, .../control/renew and .../control/release. */
export interface BrowserControlRequest {
    ttl_ms?: number;
    token?: string;
}
/** An acquire's or renew's answer; the token is shown only here. */
export interface BrowserControlLease {
    token: string;
    expires_at: string;
}
/** GET .../control: who drives the session. */
export interface BrowserControl {
    mode: "automation" | "human";
    expires_at?: string;
}
export interface BrowserLiveLink {
    url: string;
    expires_at: string;
}
export interface BrowserJournalEntry {
    seq: number;
    op: string;
    summary?: string;
    outcome: "ok" | "error" | "running" | "unknown";
    reason?: string;
    started_at: string;
    finished_at?: string;
}
export interface BrowserJournal {
    session_id: string;
    entries: BrowserJournalEntry[];
    next_after_seq?: number;
}
export interface BrowserCheckpoint {
    id: string;
    mode: BrowserMode;
    options: CreateBrowserSessionRequest;
    selected: number;
    urls: string[];
    created_at: string;
}
export interface BrowserCheckpointList {
    checkpoints: BrowserCheckpoint[];
}
export interface StartRecordingRequest {
    /** Time between captures: 0 (the daemon's default, 5000) or 100-60000. */
    interval_ms?: number;
}
export interface BrowserRecording {
    id: string;
    session_id: string;
    state: "recording" | "stopped";
    stopped_by?: string;
    interval_ms: number;
    created_at: string;
    stopped_at?: string;
    expires_at?: string;
    skipped: number;
    failed: number;
    bytes: number;
    frames: RecordingFrame[];
}
export interface RecordingFrame {
    index: number;
    at: string;
    bytes: number;
    width: number;
    height: number;
}
export interface BrowserRecordingList {
    recordings: BrowserRecording[];
}
export type JobState = "queued" | "waiting" | "starting" | "running" | "succeeded" | "failed" | "canceled";
/** A stored, content-addressed file. */
export interface FileRef {
    name?: string;
    sha256: string;
    size: number;
    mime: string;
    pages?: number;
}
/** One input of a job: inline bytes or an uploaded file's sha256. */
export interface JobInput {
    content_base64?: string;
    sha256?: string;
}
/** The body of POST /v1/jobs (and of POST /v1/convert/{action}). */
export interface CreateJobRequest {
    action: string;
    business_id?: string;
    user?: string;
    inputs: Record<string, JobInput>;
    options?: Record<string, unknown>;
}
export interface JobError {
    code: string;
    reason: string;
    message: string;
    retryable: boolean;
}
export interface Job {
    id: string;
    action: string;
    action_version: string;
    state: JobState;
    business_id?: string;
    request_sha256: string;
    inputs: FileRef[];
    options?: Record<string, unknown>;
    outputs: FileRef[];
    error?: JobError;
    attempt: number;
    max_attempts: number;
    blocked?: string[];
    created_at: string;
    updated_at: string;
    started_at?: string;
    finished_at?: string;
    repeat?: boolean;
}
/** One entry of a job's event log. */
export interface JobEvent {
    seq: number;
    type: JobState | "progress";
    at: string;
    attempt?: number;
    message?: string;
    percent?: number;
    error?: JobError;
}
/** A page of GET /v1/jobs. */
export interface Jobs {
    jobs: Job[];
    next_cursor?: string;
}
export interface ActionHealth {
    name: string;
    version: string;
    profile: string;
    base: string;
    builtin: boolean;
    description?: string;
    output?: string;
    extensions?: string[];
    available: boolean;
    reason?: string;
    message?: string;
    hint?: string;
    options?: ActionOption[];
    options_schema?: Record<string, unknown>;
}
export interface ActionOption {
    name: string;
    type: "string" | "number" | "integer" | "boolean";
    default?: unknown;
    enum?: string[];
    minimum?: number;
    maximum?: number;
    max_length?: number;
    description: string;
}
export interface Actions {
    actions: ActionHealth[];
}
