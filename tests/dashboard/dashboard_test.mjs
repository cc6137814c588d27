// spoold's dashboard in headless Chromium, through playwright-core.
//
//   node dashboard_test.mjs URL TOKEN OUTDIR
//
// Environment: PLAYWRIGHT_DIR, the folder whose node_modules holds
// playwright-core (npm ci of tests/dashboard/package.json); HOOK_URL, a
// local server that answers /down with 503 and /evil with a 404 whose body
// is HTML; CHROMIUM (default /usr/bin/chromium).
//
// Started by dashboard_test.py, which runs spoold. To restart spoold the
// script prints "@@restart" and waits for a line on stdin. Tasks are
// enqueued through curl; the page is used the way a person would: the
// token typed into its dialog, buttons clicked. Every wait is bounded.
// Exits 0 when every check passed; the screenshot is OUTDIR/dashboard.png.

import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const [URL, TOKEN, OUTDIR] = process.argv.slice(2);
if (!OUTDIR) {
  console.error("usage: node dashboard_test.mjs URL TOKEN OUTDIR");
  process.exit(2);
}
const HOOK_URL = process.env.HOOK_URL;
const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), "package.json"));
const { chromium } = require("playwright-core");

const WAIT_MS = 15000;
// The backstop: the whole run, whatever hangs.
setTimeout(() => { console.error("FAIL: the test took over 150 s"); process.exit(1); }, 150000).unref();

const stdin = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
let step = "start";
const log = (text) => console.log(`[${(performance.now() / 1000).toFixed(1)} s] ${text}`);
function begin(name) { step = name; log(name); }

// curl, as a person at a shell would: (HTTP status, parsed body).
function curl(method, urlPath, body) {
  const args = ["-s", "-S", "--max-time", "10", "-X", method, "-w", "\n%{http_code}",
                "-H", `Authorization: Bearer ${TOKEN}`];
  if (body !== undefined) args.push("-H", "Content-Type: application/json", "--data-binary", JSON.stringify(body));
  args.push(URL + urlPath);
  const out = execFileSync("curl", args, { encoding: "utf8", timeout: 15000 });
  const nl = out.lastIndexOf("\n");
  const text = out.slice(0, nl);
  let parsed = text;
  try { parsed = JSON.parse(text); } catch (_) { /* not JSON */ }
  return { code: Number(out.slice(nl + 1)), body: parsed };
}
function enqueue(task) {
  const r = curl("POST", "/v1/tasks", task);
  if (r.code !== 201) throw new Error(`enqueue ${JSON.stringify(task)}: ${r.code} ${JSON.stringify(r.body)}`);
  return r.body.id;
}
function check(condition, what) { if (!condition) throw new Error(`check failed: ${what}`); }

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],  // needed as root; the only page is spoold's own
  timeout: 60000,
});
const problems = [];
let status = 0;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  page.setDefaultTimeout(WAIT_MS);
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  // The wrong token's 401 is this test's doing, and so are a refused
  // connection and a 503 (stopping or not yet ready) while spoold restarts:
  // a slow restart, as under ASan, lets the page's reconnect find the port
  // closed or the server busy. Any other error is not.
  let restarting = false;
  page.on("console", (m) => {
    if (m.type() !== "error" || /status of 401/.test(m.text())) return;
    if (restarting && /ERR_CONNECTION_REFUSED|status of 503/.test(m.text())) return;
    problems.push(`console error: ${m.text()}`);
  });
  // Nothing but spoold itself: no CDN, no font, no library.
  page.on("request", (r) => { if (!r.url().startsWith(URL)) problems.push(`request outside spoold: ${r.url()}`); });

  async function until(what, fn, arg) {
    try {
      await page.waitForFunction(fn, arg, { timeout: WAIT_MS, polling: 100 });
    } catch (e) {
      throw new Error(`timed out after ${WAIT_MS} ms waiting for ${what}`);
    }
  }
  const tile = (s) => page.evaluate((s) => Number(document.querySelector(`#tiles [data-status="${s}"] .n`).textContent), s);
  const untilTile = (s, n) => until(`the ${s} count to reach ${n}`,
    ([s, n]) => Number(document.querySelector(`#tiles [data-status="${s}"] .n`)?.textContent) >= n, [s, n]);
  const row = (id) => page.locator(`#problems tbody tr[data-id="${id}"]`);
  const untilRow = (id, st) => until(`task ${id} in the list as ${st}`,
    ([id, st]) => document.querySelector(`#problems tbody tr[data-id="${id}"]`)?.dataset.status === st, [id, st]);

  begin("the page asks for the token before it shows anything");
  await page.goto(URL + "/", { timeout: WAIT_MS });
  await page.locator("#token-dialog[open]").waitFor();
  check(await page.evaluate(() => !document.querySelector('#tiles [data-status]')), "nothing shown without a token");

  begin("a wrong token is refused and asked again");
  await page.locator("#token-input").fill("not-the-token");
  await page.locator('#token-dialog button[value="ok"]').click();
  await until("the dialog to ask again", () => document.getElementById("token-dialog").open &&
    document.getElementById("token-input").value === "");
  check(!(await page.locator("#conn").getAttribute("class")).includes("live"), "not live with a wrong token");

  begin("with the token the page goes live");
  await page.locator("#token-input").fill(TOKEN);
  await page.locator("#token-input").press("Enter");
  await page.locator("#conn.live").waitFor();
  check((await page.locator("#token-state").textContent()) === "token set", "token kept");
  await page.locator('#tiles [data-status="succeeded"]').waitFor();

  begin("tasks enqueued through curl show in the counts");
  const before = await tile("succeeded");
  for (let i = 0; i < 5; i++) enqueue({ type: "noop", payload: `n${i}` });
  await untilTile("succeeded", before + 5);
  await until("the noop row of the type table", () =>
    Number(document.querySelector('#types tr[data-type="noop"] td[data-status="succeeded"]')?.textContent) >= 5);

  begin("a task that fails shows in the list with its error");
  const evilPayload = 'not a number <img src=x onerror="window.__xss=1">';
  const failing = enqueue({ type: "sleep", payload: evilPayload });
  await untilRow(failing, "failed");
  check((await row(failing).locator("td.err").textContent()).includes("the payload must be the milliseconds"),
        "the last error is shown");
  const failedBefore = await tile("failed");

  begin("Retry (the token is not asked again) moves the task out of the failed list");
  check(curl("POST", "/v1/types/sleep/pause").code === 200, "pause sleep");  // so the retried task waits
  await row(failing).locator('button[data-action="retry"]').click();
  await until("the task to leave the list", (id) => !document.querySelector(`#problems tbody tr[data-id="${id}"]`), failing);
  await until("the failed count to drop", (n) => Number(document.querySelector('#tiles [data-status="failed"] .n').textContent) === n - 1, failedBefore);
  check(curl("GET", `/v1/tasks/${failing}`).body.status === "pending", "pending through REST");
  check((await page.locator("#token-state").textContent()) === "token set", "token kept");

  begin("resumed, it fails again; the detail shows both failures");
  check(curl("POST", "/v1/types/sleep/resume").code === 200, "resume sleep");
  await untilRow(failing, "failed");
  await row(failing).locator("button.link").click();
  await until("the detail with two failures", () =>
    !document.getElementById("detail").hidden &&
    document.querySelectorAll("#history tbody tr td.err").length === 2);
  const history = await page.locator("#history tbody").textContent();
  check(history.includes("the payload must be the milliseconds"), "history shows the error");
  check((await page.locator("#detail-payload").textContent()) === evilPayload, "payload shown as text");
  check((await page.locator("#detail-json").textContent()).includes(`"id": ${failing}`), "task JSON shown");

  begin("Cancel a retrying task");
  const retrying = enqueue({ type: "http.post", payload: { url: HOOK_URL + "/down", body: "x" },
                             retry: { kind: "fixed", max_attempts: 5, initial_delay_ms: 600000 } });
  await untilRow(retrying, "retry_scheduled");
  await row(retrying).locator('button[data-action="cancel"]').click();
  await untilRow(retrying, "cancelled");
  check(!(await page.locator("#token-dialog").evaluate((d) => d.open)), "no token dialog");
  await row(retrying).locator("button.link").click();
  await until("the cancelled task's detail with its 503", (id) =>
    document.getElementById("detail").dataset.id === String(id) &&
    document.getElementById("detail").dataset.status === "cancelled" &&
    /HTTP 503 from/.test(document.querySelector("#history tbody").textContent), retrying);

  begin("an error holding HTML is shown as text");
  const evil = enqueue({ type: "http.post", payload: { url: HOOK_URL + "/evil", body: "x" } });
  await untilRow(evil, "failed");
  check((await row(evil).locator("td.err").textContent()).includes("<img src=x onerror="), "HTML shown literally");
  await page.locator("#open-id").fill(String(evil));
  await page.locator("#open-id").press("Enter");
  await until("the detail of the task opened by id", (id) =>
    document.getElementById("detail").dataset.id === String(id) &&
    /<script>window.__xss=2<\/script>/.test(document.querySelector("#history tbody").textContent), evil);
  check(await page.evaluate(() => window.__xss === undefined && !document.querySelector("main img, main script")),
        "no markup from data ran or was inserted");

  begin("the throughput chart counted the events");
  await until("the chart's last minute", () => Number(document.getElementById("rates").dataset.succeeded) >= 5 &&
    Number(document.getElementById("rates").dataset.enqueued) >= 8 &&
    Number(document.getElementById("rates").dataset.failed) >= 3);
  await page.screenshot({ path: path.join(OUTDIR, "dashboard.png"), fullPage: true });

  begin("spoold restarts: the page reconnects and reloads");
  const reloads = await page.evaluate(() => {
    window.__connStates = [];
    new MutationObserver(() => window.__connStates.push(document.getElementById("conn").className))
      .observe(document.getElementById("conn"), { attributes: true });
    return Number(document.body.dataset.reloads || 0);
  });
  restarting = true;
  console.log("@@restart");
  const answer = await Promise.race([stdin.next(), new Promise((r) => setTimeout(r, 40000, null))]);
  check(answer && !answer.done, "the driver restarted spoold");
  const succeeded = await tile("succeeded");
  await until("the page to see the stream drop and come back", () =>
    window.__connStates.includes("down") && document.getElementById("conn").className === "live");
  restarting = false;
  // Either a resume refused with `event: reset` or a new stream: both reload.
  await until("the state to be reloaded from REST", (n) => Number(document.body.dataset.reloads) > n, reloads);
  enqueue({ type: "noop", payload: "after restart" });
  await untilTile("succeeded", succeeded + 1);
  await untilRow(evil, "failed");
  await page.screenshot({ path: path.join(OUTDIR, "dashboard.png"), fullPage: true });

  check(problems.length === 0, problems.join("; "));
  log("PASS");
} catch (e) {
  console.error(`FAIL at "${step}": ${e.message}`);
  if (problems.length) console.error(problems.join("\n"));
  status = 1;
  try {
    const [page] = browser.contexts().flatMap((c) => c.pages());
    if (page) await page.screenshot({ path: path.join(OUTDIR, "dashboard-failure.png"), fullPage: true, timeout: 5000 });
  } catch (_) { /* the failure is reported already */ }
} finally {
  await browser.close();
}
process.exit(status);
