#!/usr/bin/env python3
"""spoold's dashboard in a real browser: starts the real spoold on a free
loopback port (tests/server/spoold_test.py's Spoold) with a local http.post
target, then runs dashboard_test.mjs (playwright-core driving headless
Chromium) against it, restarting spoold when the script asks.

  dashboard_test.py SPOOLD OUTDIR

OUTDIR receives node_modules (npm ci of package.json, when missing or of
another version), spoold's log and the screenshot dashboard.png. Needs
node, npm and chromium (scripts/install-deps). Every wait is bounded.
"""

import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
import spoold_test  # noqa: E402  (Spoold, free_port)

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
EVIL = b'<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


class Hook(spoold_test.Hook):
    """The http.post target, with /evil: a 404 whose body is HTML."""
    routes = dict(spoold_test.Hook.routes, **{"/evil": (404, EVIL)})


def install_playwright(outdir):
    """npm ci into OUTDIR unless the pinned playwright-core is there."""
    with open(os.path.join(HERE, "package.json")) as f:
        wanted = json.load(f)["dependencies"]["playwright-core"]
    installed = os.path.join(outdir, "node_modules", "playwright-core", "package.json")
    try:
        with open(installed) as f:
            if json.load(f)["version"] == wanted:
                return
    except (OSError, ValueError, KeyError):
        pass
    for name in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(HERE, name), outdir)
    print("dashboard_test: npm ci (playwright-core %s) in %s" % (wanted, outdir), flush=True)
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--prefix", outdir],
                   check=True, timeout=300)


def main():
    spoold, outdir = sys.argv[1], os.path.abspath(sys.argv[2])
    for tool in ("node", "npm", "curl", CHROMIUM):
        if shutil.which(tool) is None:
            sys.exit("dashboard_test: %s is missing; run scripts/install-deps" % tool)
    os.makedirs(outdir, exist_ok=True)
    install_playwright(outdir)
    spoold_test.SPOOLD = spoold

    directory = tempfile.mkdtemp(prefix="spoold-dashboard-")
    spoold_test.write_token(directory)
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    # A browser keeps idle connections open: the default header timeout.
    server = spoold_test.Spoold(directory, spoold_test.free_port(), hook.server_address[1],
                                settings=["server.header_timeout_ms=10000",
                                          "server.max_connections=64"])
    start = time.monotonic()
    rc = 1
    node = None
    try:
        server.start()
        url = "http://127.0.0.1:%d" % server.port
        env = dict(os.environ, PLAYWRIGHT_DIR=outdir, CHROMIUM=CHROMIUM,
                   HOOK_URL="http://127.0.0.1:%d" % hook.server_address[1])
        node = subprocess.Popen(["node", os.path.join(HERE, "dashboard_test.mjs"), url,
                                 spoold_test.TOKEN, outdir],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        # The script bounds itself at 150 s; this is the backstop.
        watchdog = threading.Timer(200, node.kill)
        watchdog.start()
        for line in node.stdout:
            if line.strip() == "@@restart":
                print("dashboard_test: restarting spoold", flush=True)
                server.stop()
                server.start()
                node.stdin.write("restarted\n")
                node.stdin.flush()
            else:
                print(line, end="", flush=True)
        rc = node.wait()
        watchdog.cancel()
    finally:
        if node is not None and node.poll() is None:
            node.kill()
        if server.process is not None and server.process.poll() is None:
            server.stop(signal.SIGTERM)
        hook.shutdown()
        if rc != 0:
            with open(os.path.join(directory, "spoold.log"), errors="replace") as f:
                print("--- spoold.log ---\n" + f.read()[-4000:])
        shutil.rmtree(directory, ignore_errors=True)
    print("dashboard_test: %s in %.1f s; screenshot %s" %
          ("passed" if rc == 0 else "FAILED", time.monotonic() - start,
           os.path.join(outdir, "dashboard.png")))
    sys.exit(rc)


if __name__ == "__main__":
    main()
