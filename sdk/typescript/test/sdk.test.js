// @ts-check
// End-to-end tests of @berth/sdk against a real daemon: BERTH_URL and
// BERTH_TOKEN name it (internal/sdktest starts one and runs these with
// `node --test`). BERTH_SDK_BROWSER=1 runs the browser tests and
// BERTH_SDK_JOBS=1 the job test; the Go test sets them when this machine can.
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { WebSocket as WS } from "ws";

import { Berth, BerthError, commandDone, fromBase64, isReason } from "@berth/sdk";

const baseUrl = process.env.BERTH_URL;
const token = process.env.BERTH_TOKEN;
if (!baseUrl || !token) {
  throw new Error("BERTH_URL and BERTH_TOKEN must name a running daemon");
}
const runtime = process.env.BERTH_SDK_RUNTIME || "process";

/** @type {import("@berth/sdk").WebSocketConstructor} */
const WebSocketImpl = /** @type {any} */ (globalThis.WebSocket ?? WS);
const berth = new Berth({ baseUrl, token, WebSocket: WebSocketImpl });
const dec = new TextDecoder();

/** A loopback TCP port nothing listens on now. */
async function freePort() {
  const srv = net.createServer();
  await new Promise((resolve) => srv.listen(0, "127.0.0.1", () => resolve(undefined)));
  const addr = srv.address();
  await new Promise((resolve) => srv.close(() => resolve(undefined)));
  assert.ok(addr && typeof addr === "object");
  return addr.port;
}

/** @param {() => Promise<boolean>} cond @param {string} what */
async function eventually(cond, what, ms = 30000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) {
      assert.fail(`after ${ms} ms: ${what}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("system describes the daemon", async () => {
  await berth.health();
  const sys = await berth.system();
  assert.equal(typeof sys.version, "string");
  assert.ok(sys.runtimes.some((r) => r.name === runtime && r.available), JSON.stringify(sys.runtimes));
});

test("errors are BerthError with status, code and reason", async () => {
  await assert.rejects(berth.sandboxes.get("sbx_doesnotexist"), (err) => {
    assert.ok(err instanceof BerthError, String(err));
    assert.equal(err.status, 404);
    assert.equal(err.code, "not_found");
    assert.equal(err.reason, "sandbox_not_found");
    assert.ok(err.message.length > 0);
    assert.ok(err.requestId.length > 0, "request id");
    assert.ok(isReason(err, "sandbox_not_found"));
    return true;
  });
  await assert.rejects(berth.commands.exec("sbx_doesnotexist", {}), (err) => {
    assert.ok(err instanceof BerthError);
    assert.ok(err.status === 400 || err.status === 404, `status ${err.status}`);
    return true;
  });
  const noKey = new Berth({ baseUrl, token: "" });
  await assert.rejects(noKey.sandboxes.list(), (err) => {
    assert.ok(err instanceof BerthError);
    assert.equal(err.status, 401);
    assert.equal(err.code, "unauthenticated");
    return true;
  });
});

describe("a sandbox", () => {
  /** @type {import("@berth/sdk").Sandbox} */
  let sb;
  before(async () => {
    sb = await berth.sandboxes.create({ runtime, labels: { suite: "sdk" } }, { idempotencyKey: "sdk-test-" + process.pid });
    assert.match(sb.id, /^sbx_/);
    assert.equal(sb.state, "running");
  });
  after(async () => {
    if (sb) {
      await berth.sandboxes.delete(sb.id);
      await assert.rejects(berth.sandboxes.get(sb.id), (err) => isReason(err, "sandbox_not_found"));
    }
  });

  test("create is idempotent under one key, and lists and gets", async () => {
    const again = await berth.sandboxes.create({ runtime, labels: { suite: "sdk" } }, { idempotencyKey: "sdk-test-" + process.pid });
    assert.equal(again.id, sb.id);
    const got = await berth.sandboxes.get(sb.id);
    assert.equal(got.labels?.suite, "sdk");
    const page = await berth.sandboxes.list({ limit: 100 });
    assert.ok(page.sandboxes.some((s) => s.id === sb.id));
    assert.ok((await berth.sandboxes.listAll()).some((s) => s.id === sb.id));
  });

  test("exec and wait", async () => {
    const started = await berth.commands.exec(sb.id, { command: "echo out; echo err >&2; exit 3" });
    assert.match(started.id, /^cmd_/);
    const done = await berth.commands.wait(sb.id, started.id);
    assert.equal(done.status, "exited");
    assert.equal(done.exit_code, 3);
    assert.equal(done.stdout, "out\n");
    assert.equal(done.stderr, "err\n");
    const run = await berth.commands.run(sb.id, { argv: ["printf", "%s|", "a b", "c"] });
    assert.equal(run.stdout, "a b|c|");
    const list = await berth.commands.list(sb.id);
    assert.ok(list.some((c) => c.id === started.id));
  });

  test("stdin and cancel", async () => {
    const c = await berth.commands.exec(sb.id, { command: "tr a-z A-Z", stdin_open: true });
    await berth.commands.stdin(sb.id, c.id, { data: "hello", eof: true });
    const done = await berth.commands.wait(sb.id, c.id);
    assert.equal(done.stdout, "HELLO");
    const long = await berth.commands.exec(sb.id, { command: "sleep 600" });
    const canceled = await berth.commands.cancel(sb.id, long.id);
    const final = commandDone(canceled) ? canceled : await berth.commands.wait(sb.id, long.id);
    assert.equal(final.status, "canceled");
  });

  test("streaming output as an async iterator", async () => {
    const c = await berth.commands.exec(sb.id, { command: "for i in 1 2 3; do echo line$i; sleep 0.2; done; echo bad >&2; exit 2" });
    let stdout = "";
    let stderr = "";
    let chunks = 0;
    /** @type {import("@berth/sdk").Command | undefined} */
    let exit;
    for await (const ev of berth.commands.stream(sb.id, c.id)) {
      if (ev.event === "exit") {
        exit = ev.command;
      } else if (ev.event === "stdout") {
        assert.equal(ev.offset, Buffer.byteLength(stdout));
        stdout += ev.data;
        chunks++;
      } else {
        stderr += ev.data;
      }
    }
    assert.equal(stdout, "line1\nline2\nline3\n");
    assert.ok(chunks >= 2, `stdout came in ${chunks} chunk(s), want it streamed as written`);
    assert.equal(stderr, "bad\n");
    assert.equal(exit?.status, "exited");
    assert.equal(exit?.exit_code, 2);
    // Resuming from an offset replays the rest; base64 carries bytes.
    const rest = [];
    for await (const ev of berth.commands.stream(sb.id, c.id, { stdoutOffset: 6, base64: true })) {
      if (ev.event === "stdout" && ev.data_base64) {
        rest.push(dec.decode(fromBase64(ev.data_base64)));
      }
    }
    assert.equal(rest.join(""), "line2\nline3\n");
  });

  test("files: write, read, list, mkdir, move, remove", async () => {
    const info = await berth.files.write(sb.id, "dir/hello.txt", "hello, sdk\n", { mode: 0o600 });
    assert.equal(info.size, 11);
    assert.equal(await berth.files.readText(sb.id, "dir/hello.txt"), "hello, sdk\n");
    const bytes = new Uint8Array([0, 1, 2, 255]);
    await berth.files.write(sb.id, "dir/bin", bytes);
    assert.deepEqual(await berth.files.read(sb.id, "dir/bin"), bytes);
    await berth.files.mkdir(sb.id, "dir/sub/deeper");
    const list = await berth.files.list(sb.id, "dir");
    assert.deepEqual(
      list.entries.map((e) => `${e.name}:${e.type}`),
      ["bin:file", "hello.txt:file", "sub:dir"],
    );
    assert.equal(list.entries.find((e) => e.name === "hello.txt")?.mode, "-rw-------");
    await berth.files.move(sb.id, { from: "dir/hello.txt", to: "dir/sub/moved.txt" });
    assert.equal(await berth.files.readText(sb.id, "dir/sub/moved.txt"), "hello, sdk\n");
    await assert.rejects(berth.files.read(sb.id, "dir/hello.txt"), (err) => err instanceof BerthError && err.code === "not_found");
    await berth.files.remove(sb.id, "dir", { recursive: true });
    const top = await berth.files.list(sb.id, ".");
    assert.ok(!top.entries.some((e) => e.name === "dir"));
  });

  test("a service and its preview", async () => {
    const port = await freePort();
    await berth.files.write(sb.id, "site/index.html", "<h1>from the sandbox</h1>");
    const svc = await berth.services.put(sb.id, {
      name: "web",
      argv: ["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1"],
      cwd: "site",
      port,
      ready: { http_path: "/" },
      restart: { policy: "always", delay_ms: 100 },
    });
    assert.equal(svc.name, "web");
    await eventually(async () => (await berth.services.get(sb.id, "web")).ready, "service ready");
    assert.ok((await berth.services.list(sb.id)).some((s) => s.name === "web" && s.status === "running"));

    const preview = await berth.previews.get(sb.id, port, { ttlSeconds: 60 });
    assert.equal(preview.port, port);
    assert.ok(preview.path_url.endsWith(`/v1/sandboxes/${sb.id}/ports/${port}/`), preview.path_url);
    const page = await berth.previews.fetch(sb.id, port, "/index.html");
    assert.equal(page.status, 200);
    assert.equal(await page.text(), "<h1>from the sandbox</h1>");
    // The same through path_url with the key, as any HTTP client would.
    const direct = await fetch(preview.path_url, { headers: { Authorization: "Bearer " + token } });
    assert.equal(direct.status, 200);

    const logs = await berth.services.logs(sb.id, "web", { waitMs: 5000 });
    assert.match(logs.data ?? "", /GET \/index.html/);
    const stopped = await berth.services.stop(sb.id, "web");
    assert.equal(stopped.status, "stopped");
    const started = await berth.services.start(sb.id, "web");
    assert.notEqual(started.status, "stopped");
    await berth.services.delete(sb.id, "web");
    await assert.rejects(berth.services.get(sb.id, "web"), (err) => isReason(err, "service_not_found"));
  });

  test("a terminal over WebSocket", async () => {
    const term = await berth.terminals.create(sb.id, { cols: 80, rows: 24 });
    assert.equal(term.status, "running");
    const conn = await berth.terminals.attach(sb.id, term.id);
    conn.resize(100, 30);
    conn.send("stty size; echo marker-$((6*7))\n");
    let out = "";
    for await (const f of conn) {
      if (f.type === "output") {
        out += dec.decode(f.data);
        if (out.includes("marker-42") && out.includes("30 100")) {
          break;
        }
      }
    }
    assert.match(out, /30 100/);
    assert.match(out, /marker-42/);
    await conn.close();

    // The same terminal by HTTP: input, output, resize, list, close.
    const before = await berth.terminals.output(sb.id, term.id);
    await berth.terminals.input(sb.id, term.id, "echo via-$((1+1))-http\n");
    let text = "";
    let offset = before.next_offset;
    await eventually(async () => {
      const o = await berth.terminals.output(sb.id, term.id, { offset, waitMs: 1000 });
      text += dec.decode(fromBase64(o.data_base64));
      offset = o.next_offset;
      return text.includes("via-2-http");
    }, "terminal output over HTTP");
    const resized = await berth.terminals.resize(sb.id, term.id, 120, 40);
    assert.equal(resized.cols, 120);
    assert.ok((await berth.terminals.list(sb.id)).some((t) => t.id === term.id));
    // A terminal whose shell exits sends exit and closes the socket.
    const conn2 = await berth.terminals.attach(sb.id, term.id, { offset });
    conn2.send("exit 5\n");
    /** @type {import("@berth/sdk").TerminalMessage | undefined} */
    let exit;
    for await (const f of conn2) {
      if (f.type === "exit") {
        exit = f;
      }
    }
    assert.equal(exit?.exit_code, 5);
    await berth.terminals.close(sb.id, term.id);
    await assert.rejects(berth.terminals.attach(sb.id, term.id), (err) => err instanceof BerthError && err.code === "not_found");
  });

  test("pause, resume and hibernate", async () => {
    if (runtime === "process") {
      // Pause needs an isolated runtime's cgroup freezer; hibernate works anywhere.
      await assert.rejects(berth.sandboxes.pause(sb.id), BerthError);
    } else {
      assert.equal((await berth.sandboxes.pause(sb.id)).state, "paused");
      assert.equal((await berth.sandboxes.resume(sb.id)).state, "running");
    }
    assert.equal((await berth.sandboxes.hibernate(sb.id)).state, "hibernated");
    // Any call wakes it.
    const c = await berth.commands.run(sb.id, { command: "echo awake" });
    assert.equal(c.stdout, "awake\n");
  });
});

describe("a browser session", { skip: process.env.BERTH_SDK_BROWSER !== "1" && "BERTH_SDK_BROWSER is not 1" }, () => {
  /** @type {http.Server} */
  let site;
  let siteUrl = "";
  before(async () => {
    site = http.createServer((req, res) => {
      res.setHeader("Content-Type", "text/html");
      res.end(`<title>SDK page</title><h1 id="h">Hello from ${req.url}</h1>
        <input id="name"><button id="b" onclick="document.getElementById('h').textContent='clicked '+document.getElementById('name').value">Go</button>`);
    });
    await new Promise((resolve) => site.listen(0, "127.0.0.1", () => resolve(undefined)));
    const addr = site.address();
    assert.ok(addr && typeof addr === "object");
    siteUrl = `http://127.0.0.1:${addr.port}`;
  });
  after(() => new Promise((resolve) => site.close(() => resolve(undefined))));

  test("open, act, screenshot, control, checkpoint, record, close", async () => {
    const s = await berth.browser.open({ viewport: { width: 800, height: 600 } });
    assert.match(s.id, /^brs_/);
    try {
      const nav = await berth.browser.navigate(s.id, siteUrl + "/page");
      assert.equal(nav.status, 200);
      assert.equal(await berth.browser.evaluate(s.id, "document.title"), "SDK page");
      await berth.browser.action(s.id, { op: "fill", selector: "#name", value: "sdk" });
      await berth.browser.action(s.id, { op: "click", target: { by: "role", role: "button", name: "Go" } });
      const waited = await berth.browser.action(s.id, { op: "waitFor", selector: "#h", state: "visible" });
      assert.equal(waited.matched, true);
      assert.equal(await berth.browser.evaluate(s.id, "document.getElementById('h').textContent"), "clicked sdk");
      const snap = await berth.browser.action(s.id, { op: "snapshot" });
      assert.match(snap.yaml, /button "Go"/);
      const pages = await berth.browser.action(s.id, { op: "pages" });
      assert.equal(pages.length, 1);

      const png = await berth.browser.screenshot(s.id);
      assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
      const shot = await berth.browser.action(s.id, { op: "screenshot", format: "jpeg", quality: 50 });
      assert.equal(shot.mime_type, "image/jpeg");
      assert.deepEqual([...fromBase64(shot.base64).subarray(0, 2)], [0xff, 0xd8]);

      const got = await berth.browser.get(s.id);
      assert.equal(got.title, "SDK page");
      assert.ok((await berth.browser.list()).some((x) => x.id === s.id));

      // Human control: while a lease is held only its token acts.
      const lease = await berth.browser.acquireControl(s.id, { ttlMs: 10000 });
      assert.equal((await berth.browser.control(s.id)).mode, "human");
      await assert.rejects(berth.browser.evaluate(s.id, "1"), (err) => isReason(err, "control_held"));
      assert.equal(await berth.browser.action(s.id, { op: "evaluate", expression: "1+1", lease: lease.token }), 2);
      await berth.browser.renewControl(s.id, lease.token, { ttlMs: 5000 });
      await berth.browser.releaseControl(s.id, lease.token);
      assert.equal((await berth.browser.control(s.id)).mode, "automation");

      const journal = await berth.browser.journal(s.id);
      assert.ok(journal.entries.some((e) => e.op === "navigate" && e.outcome === "ok"));

      const cp = await berth.browser.checkpoints.create(s.id);
      assert.deepEqual(cp.urls, [siteUrl + "/page"]);
      assert.equal((await berth.browser.checkpoints.get(cp.id)).id, cp.id);
      assert.ok((await berth.browser.checkpoints.list()).some((c) => c.id === cp.id));
      const resumed = await berth.browser.checkpoints.resume(cp.id);
      assert.notEqual(resumed.id, s.id);
      await berth.browser.close(resumed.id);
      await berth.browser.checkpoints.delete(cp.id);

      const rec = await berth.browser.recordings.start(s.id, { interval_ms: 200 });
      await eventually(async () => (await berth.browser.recordings.get(rec.id)).frames.length >= 2, "two recorded frames");
      const stopped = await berth.browser.recordings.stop(rec.id);
      assert.equal(stopped.state, "stopped");
      const frame = await berth.browser.recordings.frame(rec.id, 0);
      assert.deepEqual([...frame.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
      assert.ok((await berth.browser.recordings.list()).some((r) => r.id === rec.id));
      await berth.browser.recordings.delete(rec.id);
    } finally {
      await berth.browser.close(s.id);
    }
    await assert.rejects(berth.browser.action(s.id, { op: "reload" }), BerthError);
  });
});

test("a job converts HTML to PDF", { skip: process.env.BERTH_SDK_JOBS !== "1" && "BERTH_SDK_JOBS is not 1" }, async () => {
  const health = await berth.jobs.action("html-pdf");
  assert.equal(health.available, true, JSON.stringify(health));
  assert.ok((await berth.jobs.actions()).some((a) => a.name === "html-pdf"));
  const ref = await berth.jobs.uploadFile("<h1>Report</h1><p>from the SDK</p>", { name: "index.html" });
  assert.match(ref.sha256, /^[0-9a-f]{64}$/);
  const job = await berth.jobs.create({ action: "html-pdf", inputs: { "index.html": { sha256: ref.sha256 } }, options: { paper: "A4" } });
  assert.match(job.id, /^job_/);
  const types = [];
  for await (const ev of berth.jobs.events(job.id)) {
    types.push(ev.type);
  }
  assert.equal(types.at(-1), "succeeded", types.join(","));
  const done = await berth.jobs.wait(job.id);
  assert.equal(done.state, "succeeded");
  const pdf = await berth.jobs.downloadFile(done.outputs[0].sha256);
  assert.equal(dec.decode(pdf.subarray(0, 5)), "%PDF-");
  assert.ok((await berth.jobs.list({ action: "html-pdf" })).jobs.some((j) => j.id === job.id));

  const conv = await berth.jobs.convert({ action: "html-pdf", inputs: { "index.html": { content_base64: btoa("<p>sync</p>") } } });
  assert.match(conv.jobId, /^job_/);
  assert.equal(conv.contentType, "application/pdf");
  assert.equal(dec.decode(conv.data.subarray(0, 5)), "%PDF-");

  // Canceling a finished job is refused with a reason.
  await assert.rejects(berth.jobs.cancel(job.id), BerthError);
  await assert.rejects(berth.jobs.action("no-such-action"), (err) => err instanceof BerthError && err.code === "not_found");
});
