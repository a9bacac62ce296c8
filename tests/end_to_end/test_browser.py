"""The HTML report in a real headless Chromium.

A report rendered from results full of hostile strings (script tags, event handlers,
attribute break-outs, external URLs) in the title, run names, example ids, evidence,
claim notes, training info and config is opened in Chromium, and:

- every plot is an embedded ``data:image/png`` that decodes and is painted on screen
  (full-page screenshot, one crop per plot);
- the page makes no request other than its own file and its data: URIs (the DevTools
  protocol's Network events; DNS is also mapped to nowhere, and the net log must not
  mention the payloads' host);
- no payload runs: ``window.__xss`` stays undefined, the title is the escaped text, no
  element or attribute created by a payload exists, and the payloads show as text.

Chromium is a prerequisite of the suite: ``make test`` (and ``.ci/run``) installs it
from Debian's packages when it is missing. When it cannot be found these tests fail;
they are never skipped.
"""

from __future__ import annotations

import base64
import fcntl
import html.parser
import io
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

EXFIL_HOST = "exfil.invalid"
#: Each payload, if it ever ran or parsed as markup, leaves a trace the tests look for:
#: ``window.__xss``, a changed title, an element with id ``xss-node``, a ``data-xss``
#: attribute, an on* handler, an iframe/svg/link/meta, or a request to EXFIL_HOST.
PAYLOADS = {
    "script": '<script>window.__xss="script";document.title="XSS"</script>',
    "img": f'<img src="http://{EXFIL_HOST}/i.png" onerror="window.__xss=\'img\';'
    "document.body.setAttribute('data-xss','img')\">",
    "svg": '"><svg onload="window.__xss=\'svg\'"><div id="xss-node">',
    "attr": "' onmouseover='window.__xss=1' data-xss='attr",
    "iframe": "<iframe srcdoc=\"<script>parent.__xss='iframe'</script>\"></iframe>",
    "breakout": "</pre></td></table></title></style><script>window.__xss='breakout'</script>",
    "node": f'<div id="xss-node" style="background:url(http://{EXFIL_HOST}/bg.png)">x</div>',
    "link": f'<link rel="stylesheet" href="http://{EXFIL_HOST}/s.css">'
    f'<meta http-equiv="refresh" content="0;url=http://{EXFIL_HOST}/">',
}
TITLE = f"Audit {PAYLOADS['script']} {PAYLOADS['breakout']}"

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
    "--host-resolver-rules=MAP * ~NOTFOUND",
]


def chromium_binary() -> str:
    """Chromium's path; a test failure (not a skip) when it is not installed."""
    candidates = [os.environ.get("CHROMIUM"), "chromium", "chromium-browser"]
    candidates += ["google-chrome", "google-chrome-stable"]
    for name in candidates:
        path = shutil.which(name) if name else None
        if path:
            return path
    pytest.fail(
        "Chromium is not installed, so the report cannot be checked in a browser. "
        "Install it (Debian/Ubuntu: apt-get install chromium; `make test` does this when "
        "run as root) or point $CHROMIUM at a Chromium/Chrome binary.",
        pytrace=False,
    )


# --------------------------------------------------------------------------- #
# the hostile report
# --------------------------------------------------------------------------- #
def hostile_results() -> tuple[dict, int]:
    """Results with payloads in every user-controlled string; and the number of plots
    the report must show."""
    from privacy_audit.attacks.base import AttackResult, MetricSettings
    from privacy_audit.audit.results import assemble_results, run_record
    from privacy_audit.defenses.base import PrivacyClaim

    rng = np.random.default_rng(0)
    n = 60
    members = np.r_[np.ones(n, dtype=int), np.zeros(n, dtype=int)]
    payloads = list(PAYLOADS.values())
    ids = [f"{payloads[i % len(payloads)]}#{i}" for i in range(2 * n)]
    settings = MetricSettings(delta=1e-5, n_boot=100, seed=0)

    def attack(name: str, shift: float) -> AttackResult:
        scores = rng.normal(size=2 * n) + shift * members
        return AttackResult.from_scores(name, scores, members, ids, settings, PAYLOADS["iframe"])

    failed = AttackResult(
        "entropy", PAYLOADS["attr"], ["probabilities"], "error", f"surface: {PAYLOADS['node']}"
    )
    run_a = run_record(
        f"{PAYLOADS['svg']} non-private",
        "none",
        PrivacyClaim.none(PAYLOADS["link"]),
        {"metric": "accuracy", "value": 0.8, "ci_low": 0.7, "ci_high": 0.9, "n": 100},
        [attack("loss", 1.5), attack("confidence", 1.0)],
        {"note": PAYLOADS["attr"], "nested": {"k": PAYLOADS["script"]}},
    )
    run_b = run_record(
        PAYLOADS["img"],
        "dp-sgd",
        PrivacyClaim(1.0, 1e-5, "example", "central-dp", "prv", False, PAYLOADS["link"]),
        {"metric": "accuracy", "value": 0.7, "ci_low": 0.6, "ci_high": 0.8, "n": 100},
        [attack("loss", 0.8), failed],
        {"note": PAYLOADS["breakout"]},
    )
    canary_members = np.r_[np.ones(200, dtype=int), np.zeros(200, dtype=int)]
    run_b["epsilon_audit"] = {
        "claimed_epsilon": 1.0,
        "claimed_delta": 1e-5,
        "comparable": True,
        "status": "violated",
        "evidence": [PAYLOADS["node"], f"gradient-canary {PAYLOADS['script']}"],
        "audits": [
            {
                "name": f"gradient-canary {PAYLOADS['attr']}",
                "description": PAYLOADS["iframe"],
                "status": "ok",
                "reason": None,
                "epsilon_lb": 2.5,
                "ceiling": 6.0,
                "point_estimate": 3.0,
                "method": PAYLOADS["svg"],
                "confidence": 0.95,
                "delta": 1e-5,
                "n_in": 200,
                "n_out": 200,
                "exceeds_claim": True,
                "examples": {
                    "scores": (rng.normal(size=400) + 2.0 * canary_members).tolist(),
                    "members": canary_members.tolist(),
                },
            }
        ],
        "tradeoff": None,
    }
    config = {
        "title": TITLE,
        "data": {"members": PAYLOADS["img"], "text_column": PAYLOADS["breakout"]},
        PAYLOADS["svg"]: [PAYLOADS["node"], 1.5],
    }
    results = assemble_results([run_a, run_b], TITLE, 0, config)
    # 3 overview figures; run A: an ROC of its 2 attacks + 2 score histograms; run B: 1
    # score histogram; ε audits: the claimed-vs-audited figure + 1 canary histogram.
    return results, 3 + (1 + 2) + 1 + (1 + 1)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, int]:
    from privacy_audit.reports import write_report

    results, n_plots = hostile_results()
    out = tmp_path_factory.mktemp("hostile-report")
    path = write_report(results, out)
    # The source holds exactly that many <img> tags; the browser checks below must agree.
    assert path.read_text(encoding="utf-8").count("<img ") == n_plots
    return path, n_plots


# --------------------------------------------------------------------------- #
# a minimal DevTools-protocol client over --remote-debugging-pipe (no extra packages)
# --------------------------------------------------------------------------- #
class DevTools:
    """Chromium with ``--remote-debugging-pipe``: commands on fd 3, replies on fd 4,
    each message JSON terminated by a NUL byte."""

    def __init__(self, binary: str, user_data_dir: Path, extra: list[str] | None = None):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Move the child's ends above 4 first, so the dup2 calls below cannot clobber them.
        child_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        child_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
        os.close(to_chrome_r)
        os.close(from_chrome_w)

        def wire_pipes():  # runs in the child, before exec
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        self.proc = subprocess.Popen(
            [
                binary,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={user_data_dir}",
                "--remote-debugging-pipe",
                *(extra or []),
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=wire_pipes,
        )
        os.close(child_r)
        os.close(child_w)
        self._next_id = 0
        self._replies: dict[int, queue.Queue] = {}
        self.events: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                self.events.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        q = self._replies.get(msg["id"])
                    if q is not None:
                        q.put(msg)
                else:
                    self.events.put(msg)

    def send(
        self,
        method: str,
        params: dict | None = None,
        session: str | None = None,
        timeout: float = 60,
    ) -> dict:
        with self._lock:
            self._next_id += 1
            mid = self._next_id
            q = self._replies[mid] = queue.Queue()
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        try:
            reply = q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"Chromium did not answer {method} within {timeout} s") from None
        assert "error" not in reply, (method, reply["error"])
        return reply.get("result", {})

    def wait_for(self, method: str, session: str, timeout: float = 60) -> list[dict]:
        """Collect events until ``method`` arrives on ``session``; return all collected."""
        seen, deadline = [], time.monotonic() + timeout
        while True:
            try:
                ev = self.events.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                ev = None
            if ev is None or time.monotonic() > deadline:
                raise AssertionError(f"no {method} within {timeout} s; saw {len(seen)} events")
            seen.append(ev)
            if ev.get("method") == method and ev.get("sessionId") == session:
                return seen

    def drain(self) -> list[dict]:
        out = []
        while True:
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return out
            if ev is not None:
                out.append(ev)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (AssertionError, OSError):
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass


PAGE_STATE = """(() => {
  const imgs = Array.from(document.images).map(i => {
    const r = i.getBoundingClientRect(), cs = getComputedStyle(i);
    return {src: i.getAttribute('src') || '', complete: i.complete,
            naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight,
            x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height,
            display: cs.display, visibility: cs.visibility, opacity: cs.opacity};
  });
  const handlers = [];
  for (const el of document.querySelectorAll('*'))
    for (const a of el.attributes)
      if (a.name.startsWith('on')) handlers.push(el.tagName + '[' + a.name + ']');
  return {
    xss: window.__xss === undefined ? null : String(window.__xss),
    title: document.title,
    h1: (document.querySelector('h1') || {}).textContent || null,
    scripts: document.scripts.length,
    injected: document.querySelectorAll(
      '#xss-node, [data-xss], svg, iframe, object, embed, link, meta[http-equiv], base, form'
    ).length,
    handlers: handlers,
    text: document.body.innerText,
    width: document.documentElement.scrollWidth,
    height: document.documentElement.scrollHeight,
    location: location.href,
    images: imgs,
    viewport: innerWidth,
    summary: (() => {
      const wrap = document.querySelector('#summary .table-wrap');
      const badges = Array.from(document.querySelectorAll('#summary tbody .badge'));
      return {scroll: wrap ? wrap.scrollWidth : null, client: wrap ? wrap.clientWidth : null,
              badges: badges.map(b => b.getBoundingClientRect().right)};
    })(),
    epsilon: Array.from(document.querySelectorAll('#epsilon-audit td.audit-status')).map(td => {
      const r = td.getBoundingClientRect(), w = td.closest('.table-wrap').getBoundingClientRect();
      return {left: r.left, right: r.right, width: r.width, wrapLeft: w.left, wrapRight: w.right,
              text: td.innerText.trim()};
    }),
    epsilonWrap: (() => {
      const w = document.querySelector('#epsilon-audit .table-wrap');
      return w ? {scroll: w.scrollWidth, client: w.clientWidth} : null;
    })(),
    tables: Array.from(document.querySelectorAll('.table-wrap')).map(w => ({
      id: (w.closest('section') || {}).id || '', scroll: w.scrollWidth, client: w.clientWidth})),
  };
})()"""


@pytest.fixture(scope="module")
def browsed(report, tmp_path_factory) -> dict:
    """Open the report once over the DevTools protocol; what the page did and showed."""
    path, n_plots = report
    binary = chromium_binary()
    work = tmp_path_factory.mktemp("chromium")
    net_log = work / "netlog.json"
    chrome = DevTools(binary, work / "profile", [f"--log-net-log={net_log}"])
    try:
        target = chrome.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = chrome.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Network", "Page", "Runtime"):
            chrome.send(f"{domain}.enable", session=session)
        chrome.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        chrome.drain()
        url = path.resolve().as_uri()
        chrome.send("Page.navigate", {"url": url}, session=session)
        events = chrome.wait_for("Page.loadEventFired", session)
        time.sleep(1.0)  # let any timer, refresh or late handler a payload set up fire
        state = chrome.send(
            "Runtime.evaluate",
            {"expression": PAGE_STATE, "returnByValue": True, "awaitPromise": True},
            session=session,
        )["result"]["value"]
        shot = chrome.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": state["width"],
                    "height": state["height"],
                    "scale": 1,
                },
            },
            session=session,
            timeout=120,
        )
        events += chrome.drain()
    finally:
        chrome.close()
    png = base64.b64decode(shot["data"])
    (work / "report.png").write_bytes(png)
    requests = [
        e["params"]["request"]["url"]
        for e in events
        if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == session
    ]
    other = [
        e["method"]
        for e in events
        if e.get("sessionId") == session
        and e.get("method")
        in ("Network.webSocketCreated", "Network.eventSourceMessageReceived", "Page.windowOpen")
    ]
    return {
        "url": url,
        "n_plots": n_plots,
        "state": state,
        "png": png,
        "screenshot": work / "report.png",
        "requests": requests,
        "other": other,
        "net_log": net_log,
    }


# --------------------------------------------------------------------------- #
# layout at 1280 px (issue 17)
# --------------------------------------------------------------------------- #
def test_summary_verdict_visible_without_scrolling_at_1280px(browsed):
    """Hostile long names included: the Summary table needs no horizontal scrollbar and
    every verdict badge lies inside the 1280 px window."""
    state = browsed["state"]
    assert state["viewport"] == 1280
    summary = state["summary"]
    assert summary["badges"], "no verdict badges in the Summary table"
    assert summary["scroll"] <= summary["client"] + 1, summary
    assert max(summary["badges"]) <= state["viewport"], summary
    wide = [t for t in state["tables"] if t["scroll"] > t["client"] + 1]
    assert not [t for t in wide if t["id"] == "summary"], wide


def test_epsilon_audit_status_visible_without_scrolling_at_1280px(browsed):
    """Issue 26: in "Claimed vs audited ε" (hostile long names and method text included)
    every audit's status cell has a box that lies inside the table's visible area and the
    1280 px window, and the table needs no horizontal scrollbar."""
    state = browsed["state"]
    assert state["viewport"] == 1280
    cells = state["epsilon"]
    assert cells, "no status cells in the Claimed vs audited ε table"
    for c in cells:
        assert c["text"], c
        assert c["width"] > 0, c
        assert c["left"] >= c["wrapLeft"] - 1 and c["right"] <= c["wrapRight"] + 1, c
        assert c["right"] <= state["viewport"], c
    wrap = state["epsilonWrap"]
    assert wrap["scroll"] <= wrap["client"] + 1, wrap


# --------------------------------------------------------------------------- #
# plots
# --------------------------------------------------------------------------- #
def test_every_plot_is_an_embedded_png_that_renders(browsed):
    state = browsed["state"]
    images = state["images"]
    assert len(images) == browsed["n_plots"]
    for img in images:
        assert img["src"].startswith("data:image/png;base64,"), img["src"][:80]
        assert img["complete"] and img["naturalWidth"] > 100 and img["naturalHeight"] > 100, img
        assert img["width"] > 100 and img["height"] > 50, img
        assert img["display"] != "none" and img["visibility"] == "visible", img
        assert float(img["opacity"]) > 0.9, img


def test_screenshot_shows_every_plot(browsed):
    from PIL import Image

    png = browsed["png"]
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert browsed["screenshot"].stat().st_size > 50_000
    shot = Image.open(io.BytesIO(png)).convert("RGB")
    state = browsed["state"]
    assert shot.width >= 1000 and shot.height >= 0.95 * state["height"]
    assert len(shot.getcolors(maxcolors=1 << 20) or []) > 100  # not blank
    for img in state["images"]:
        box = (
            int(img["x"]),
            int(img["y"]),
            int(img["x"] + img["width"]),
            int(img["y"] + img["height"]),
        )
        crop = shot.crop(box)
        colors = crop.getcolors(maxcolors=1 << 16) or []
        # a painted plot: axes, text and data in several colours, not one flat fill
        assert len(colors) > 20, (box, len(colors))
        dominant = max(count for count, _ in colors) / (crop.width * crop.height)
        assert dominant < 0.98, (box, dominant)


# --------------------------------------------------------------------------- #
# no request leaves the page
# --------------------------------------------------------------------------- #
def test_page_requests_nothing_but_itself_and_data_uris(browsed):
    requests = browsed["requests"]
    assert browsed["url"] in requests, requests  # the Network events were recorded
    outside = [u for u in requests if u != browsed["url"] and not u.startswith("data:")]
    assert outside == []
    assert browsed["other"] == []
    assert browsed["state"]["location"] == browsed["url"]  # no redirect or refresh


def test_net_log_never_mentions_the_payload_host(browsed):
    """Chromium's own net log (every socket and URL request of the browser, not just the
    page's) has no trace of the host the payloads would contact."""
    text = browsed["net_log"].read_text(encoding="utf-8", errors="replace")
    assert '"events"' in text  # the log was written
    assert EXFIL_HOST not in text


# --------------------------------------------------------------------------- #
# no payload runs
# --------------------------------------------------------------------------- #
def test_no_payload_executes(browsed):
    state = browsed["state"]
    assert state["xss"] is None
    assert state["title"] == TITLE  # the <title> holds the payload as text
    assert state["h1"] == TITLE
    assert state["scripts"] == 0  # the report has no JavaScript of its own
    assert state["injected"] == 0
    assert state["handlers"] == []


def test_payloads_are_shown_as_text(browsed):
    text = browsed["state"]["text"]
    for name, payload in PAYLOADS.items():
        assert payload in text, name


# --------------------------------------------------------------------------- #
# the same checks from the command line: --dump-dom and --screenshot
# --------------------------------------------------------------------------- #
class _DomScan(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.title = ""
        self._in_title = False
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        self.text.append(data)


def test_dump_dom_and_screenshot_from_the_command_line(report, tmp_path):
    path, n_plots = report
    binary = chromium_binary()
    common = [binary, *CHROMIUM_FLAGS, "--virtual-time-budget=3000"]
    dom = subprocess.run(
        [*common, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom", path.resolve().as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    ).stdout.decode("utf-8")
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            *common,
            f"--user-data-dir={tmp_path / 'p2'}",
            "--window-size=1280,3000",
            f"--screenshot={shot}",
            path.resolve().as_uri(),
        ],
        capture_output=True,
        timeout=180,
        check=True,
    )

    scan = _DomScan()
    scan.feed(dom)
    tags = [t for t, _ in scan.tags]
    imgs = [a for t, a in scan.tags if t == "img"]
    assert len(imgs) == n_plots
    assert all(a.get("src", "").startswith("data:image/png;base64,") for a in imgs)
    assert "script" not in tags and "iframe" not in tags and "svg" not in tags
    assert not [(t, k) for t, a in scan.tags for k in a if k.startswith("on")]
    assert not [t for t, a in scan.tags if a.get("id") == "xss-node" or "data-xss" in a]
    assert scan.title == TITLE
    text = "".join(scan.text)
    for name, payload in PAYLOADS.items():
        assert payload in text, name

    from PIL import Image

    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 50_000
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 3000)
    assert len(image.getcolors(maxcolors=1 << 20) or []) > 100


def test_untrained_weights_banner_is_red_and_visible(tmp_path):
    """A run audited with ``allow_uninitialized`` (weights the checkpoint did not hold)
    shows a red banner at the top of the page, its weight names escaped."""
    from privacy_audit.attacks.base import AttackResult, MetricSettings
    from privacy_audit.audit.results import assemble_results, run_record
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.reports import write_report

    rng = np.random.default_rng(1)
    members = np.r_[np.ones(40, dtype=int), np.zeros(40, dtype=int)]
    scores = rng.normal(size=80)
    result = AttackResult.from_scores(
        "loss", scores, members, None, MetricSettings(n_boot=100), "loss"
    )
    run = run_record("as-is model", "as-is", PrivacyClaim.none(), None, [result])
    run["uninitialized_weights"] = ["score.weight", PAYLOADS["script"]]
    results = assemble_results([run], "Untrained head", 0, {})
    assert results["runs"][0]["verdict"]["level"] == "not-measured"  # never "low"
    path = write_report(results, tmp_path / "report")
    binary = chromium_binary()
    common = [binary, *CHROMIUM_FLAGS, "--virtual-time-budget=3000"]
    dom = subprocess.run(
        [*common, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom", path.resolve().as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    ).stdout.decode("utf-8")
    scan = _DomScan()
    scan.feed(dom)
    banners = [a for t, a in scan.tags if a.get("id") == "uninitialized-weights"]
    assert len(banners) == 1 and "danger" in banners[0].get("class", "")
    text = "".join(scan.text)
    assert "UNTRAINED WEIGHTS" in text and "score.weight" in text
    assert PAYLOADS["script"] in text and "script" not in [t for t, _ in scan.tags]
    shot = tmp_path / "top.png"
    subprocess.run(
        [*common, f"--user-data-dir={tmp_path / 'p2'}", "--window-size=1280,900"]
        + [f"--screenshot={shot}", path.resolve().as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    )
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    red_border = (np.abs(pixels - [0xD0, 0, 0]).sum(1) < 40).sum()
    assert red_border > 500  # the banner's red border is painted in the first screen


# --------------------------------------------------------------------------- #
# the per-record leakage map (issue 28)
# --------------------------------------------------------------------------- #
def _leakage_map_results(aggregate_only: bool) -> tuple[dict, list[str]]:
    """A causal-LM run whose member texts and tokens are the payloads, with extraction
    risk and the leakage map built by the suite's own code from a stand-in release."""
    from types import SimpleNamespace

    from privacy_audit.attacks.base import AttackContext, AttackResult, MetricSettings
    from privacy_audit.attacks.extraction_risk import ExtractionRisk
    from privacy_audit.audit.leakage_map import build_leakage_map
    from privacy_audit.audit.results import assemble_results, run_record
    from privacy_audit.defenses.base import Examples, PrivacyClaim, TokenStats

    payloads = list(PAYLOADS.values())
    n = 8
    texts = [f"{payloads[i % len(payloads)]} member {i}" for i in range(n)]
    texts += [f"non-member {i}" for i in range(n)]
    rng = np.random.default_rng(3)

    def stats(text: str, decoding: bool) -> TokenStats:
        k = 6
        member = text in texts[:n]
        lp = np.log(rng.uniform(0.6 if member else 0.01, 1.0 if member else 0.2, size=k))
        dec = np.full(k, np.nan)
        if decoding:
            dec[2:6] = lp[2:6]
        return TokenStats(np.arange(k), lp, lp - 1, np.ones(k), dec if decoding else None)

    class Release:
        tokenizer = SimpleNamespace(
            hf=SimpleNamespace(decode=lambda ids: payloads[int(ids[0]) % len(payloads)])
        )
        cache: dict = {}

        def token_stats(self, ts):
            return [self.cache.setdefault(t, stats(t, True)) for t in ts]

        def extraction_stats(self, ts, spec):
            return self.token_stats(ts)

    release = Release()
    ids = [f"{payloads[i % len(payloads)]}#{i}" for i in range(2 * n)]
    members = Examples(ids[:n], texts[:n], np.zeros(n, dtype=int))
    nonmembers = Examples(ids[n:], texts[n:], np.zeros(n, dtype=int))
    settings = MetricSettings(n_boot=100)
    risk = ExtractionRisk(prefix_tokens=2, suffix_tokens=4, queries=[1, 10, 100]).run(
        release, AttackContext(members, nonmembers, settings=settings)
    )
    loss = AttackResult.from_scores(
        "lm-loss",
        np.r_[rng.normal(2, 1, n), rng.normal(0, 1, n)],
        np.r_[np.ones(n, dtype=int), np.zeros(n, dtype=int)],
        ids,
        settings,
        "loss",
    )
    run = run_record(
        "users-lm", "as-is", PrivacyClaim.none(), None, [loss], None, aggregate_only, None, [risk]
    )
    if not aggregate_only:
        run["example_texts"] = dict(zip(ids, texts, strict=True))
    build_leakage_map(run, release, members, None, 5, False, aggregate_only)
    return assemble_results([run], "Leakage map", 0, {}, aggregate_only), texts[:n]


def _dump_dom(path: Path, profile: Path) -> str:
    binary = chromium_binary()
    return subprocess.run(
        [binary, *CHROMIUM_FLAGS, "--virtual-time-budget=3000", f"--user-data-dir={profile}"]
        + ["--dump-dom", path.resolve().as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    ).stdout.decode("utf-8")


def test_leakage_map_shows_escaped_tokens_and_nothing_in_aggregate_only(tmp_path):
    from privacy_audit.reports import write_report

    results, member_texts = _leakage_map_results(aggregate_only=False)
    path = write_report(results, tmp_path / "full")
    scan = _DomScan()
    scan.feed(_dump_dom(path, tmp_path / "p1"))
    spans = [a for t, a in scan.tags if t == "span" and a.get("class") == "tok"]
    assert len(spans) == 5 * 6  # 5 listed records x 6 tokens, each one element
    assert all(a.get("style", "").startswith("background:rgba(") for a in spans)
    assert "script" not in [t for t, _ in scan.tags] and "iframe" not in [t for t, _ in scan.tags]
    assert not [(t, k) for t, a in scan.tags for k in a if k.startswith("on")]
    assert not [t for t, a in scan.tags if a.get("id") == "xss-node" or "data-xss" in a]
    text = "".join(scan.text)
    assert "Which records leak, and where" in text
    assert "Extraction risk at your decoding settings" in text
    for payload in PAYLOADS.values():  # tokens, ids and texts are shown as text
        assert payload in text
    shot = tmp_path / "map.png"
    subprocess.run(
        [chromium_binary(), *CHROMIUM_FLAGS, "--virtual-time-budget=3000"]
        + [f"--user-data-dir={tmp_path / 'p2'}", "--window-size=1280,4000"]
        + [f"--screenshot={shot}", path.resolve().as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    )
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    shaded = ((pixels[:, 0] > 200) & (pixels[:, 1] < 200) & (pixels[:, 2] < 200)).sum()
    assert shaded > 500  # the red token shading is painted

    agg, _ = _leakage_map_results(aggregate_only=True)
    apath = write_report(agg, tmp_path / "agg")
    source = apath.read_text(encoding="utf-8")
    dom = _dump_dom(apath, tmp_path / "p3")
    for doc in (source, dom, json.dumps(agg)):
        assert 'class="tok"' not in doc and "Which records leak" not in doc
        for t in member_texts:
            assert t not in doc
    assert "Extraction risk at your decoding settings" in dom  # the aggregates stay
