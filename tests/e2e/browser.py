"""Headless Chromium for the end-to-end tests, driven through the DevTools
protocol over a pipe (--remote-debugging-pipe: no port, no websocket, only
the Python standard library).  Network access is off: the browser gets no
proxy-free route (--proxy-server to a closed port) and every request the page
makes is recorded, so a test can check that a page loads nothing.

    from browser import Browser
    with Browser(tmpdir) as b:
        b.open("file:///path/page.html")
        b.eval("document.title")
        b.click(x, y)
        b.screenshot("page.png")
"""
import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
    # no network: any request that is not for a local file fails
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
]


def find_chromium():
    for c in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
              shutil.which("chromium-browser")):
        if c and os.access(c, os.X_OK):
            return c
    return None


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, tmpdir, width=1400, height=1000, timeout=60):
        self.tmpdir = tmpdir
        self.width, self.height = width, height
        self.timeout = timeout
        self.exe = find_chromium()
        if not self.exe:
            raise BrowserError("no chromium found (install Debian's chromium)")
        self.requests = []
        self.console = []
        self.errors = []
        self._events = []

    def __enter__(self):
        self.profile = tempfile.mkdtemp(prefix="chromium-", dir=self.tmpdir)
        to_r, to_w = os.pipe()      # we write, chromium reads on fd 3
        from_r, from_w = os.pipe()  # chromium writes on fd 4, we read

        def child():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)
        self.log = open(os.path.join(self.tmpdir, "chromium.log"), "wb")
        self.proc = subprocess.Popen(
            [self.exe] + CHROMIUM_ARGS + ["--user-data-dir=" + self.profile, "--remote-debugging-pipe",
                                          "--window-size=%d,%d" % (self.width, self.height), "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, pass_fds=(3, 4), preexec_fn=child)
        os.close(to_r)
        os.close(from_w)
        self.wfd, self.rfd = to_w, from_r
        self.buf = b""
        self.mid = 0
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for dom in ("Page.enable", "Network.enable", "Runtime.enable", "Log.enable"):
            self.call(dom)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        return self

    def __exit__(self, *exc):
        try:
            self._call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.wfd, self.rfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    # -- the protocol --
    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("chromium did not answer in time")
            r, _, _ = select.select([self.rfd], [], [], left)
            if not r:
                continue
            d = os.read(self.rfd, 1 << 20)
            if not d:
                raise BrowserError("chromium exited (see chromium.log)")
            self.buf += d
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def _event(self, m):
        meth, p = m.get("method"), m.get("params", {})
        if meth == "Network.requestWillBeSent":
            self.requests.append(p["request"]["url"])
        elif meth == "Runtime.consoleAPICalled":
            self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif meth == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append(d.get("exception", {}).get("description") or d.get("text"))
        elif meth == "Log.entryAdded":
            e = p.get("entry", {})
            if e.get("level") == "error":
                self.errors.append(e.get("text"))
        self._events.append(m)

    def _call(self, method, params=None, session=None, timeout=None):
        self.mid += 1
        m = {"id": self.mid, "method": method, "params": params or {}}
        if session:
            m["sessionId"] = session
        os.write(self.wfd, json.dumps(m).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            r = self._read(deadline)
            if r.get("id") == self.mid:
                if "error" in r:
                    raise BrowserError("%s: %s" % (method, r["error"].get("message")))
                return r.get("result", {})
            if "method" in r:
                self._event(r)

    def call(self, method, params=None):
        return self._call(method, params, self.session)

    def send(self, method, params=None):
        """Sends without waiting for the answer (for input that opens a
        dialog, whose answer comes only once the dialog is closed)."""
        self.mid += 1
        m = {"id": self.mid, "method": method, "params": params or {}, "sessionId": self.session}
        os.write(self.wfd, json.dumps(m).encode() + b"\0")
        return self.mid

    def answer_prompt(self, text, timeout=None):
        """Waits for a prompt() (or alert/confirm) and answers it with text;
        returns the dialog's message."""
        d = self.wait_event("Page.javascriptDialogOpening", timeout)
        self.call("Page.handleJavaScriptDialog", {"accept": True, "promptText": text})
        return d.get("message")

    def click_async(self, x, y):
        for t in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": t, "x": x, "y": y, "button": "left", "clickCount": 1})

    def hover(self, x, y):
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def wait_event(self, method, timeout=None):
        for i, m in enumerate(self._events):
            if m.get("method") == method:
                del self._events[i]
                return m.get("params", {})
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            m = self._read(deadline)
            if "method" in m:
                self._event(m)
                if m["method"] == method:
                    self._events.pop()
                    return m.get("params", {})

    # -- what tests use --
    def open(self, url):
        self._events = []
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise BrowserError("in page: %s" % (d.get("exception", {}).get("description") or d.get("text")))
        return r["result"].get("value")

    def click(self, x, y):
        for t in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": t, "x": x, "y": y, "button": "left", "clickCount": 1})

    def screenshot(self, path, full=True, clip=None):
        """The page (full: all of it, else the viewport; clip: x, y, w, h of
        the page) as a PNG file."""
        p = {"format": "png"}
        if clip:
            p["clip"] = {"x": clip[0], "y": clip[1], "width": clip[2], "height": clip[3], "scale": 1}
            p["captureBeyondViewport"] = True
        elif full:
            m = self.call("Page.getLayoutMetrics")
            size = m.get("cssContentSize") or m["contentSize"]
            p["clip"] = {"x": 0, "y": 0, "width": min(size["width"], 4000), "height": min(size["height"], 8000),
                         "scale": 1}
            p["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", p)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path


def png_pixels(path):
    """(width, height, rows) of an 8-bit RGB or RGBA PNG (what Chromium's
    screenshots are); rows is a list of bytes objects of width * channels."""
    import struct
    import zlib
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("%s is not a PNG file" % path)
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError("%s: only 8-bit RGB(A) non-interlaced PNGs are read here" % path)
            ch = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = w * ch
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows


def count_pixels(path, pred, step=2):
    """How many pixels (sampling every step-th in each direction) satisfy pred(r, g, b)."""
    w, h, ch, rows = png_pixels(path)
    n = 0
    for y in range(0, h, step):
        row = rows[y]
        for x in range(0, w, step):
            i = x * ch
            if pred(row[i], row[i + 1], row[i + 2]):
                n += 1
    return n


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["check"]:
        # whether the tests can run: a chromium that starts and answers
        tmp = tempfile.mkdtemp(prefix="tally-browser-check-")
        try:
            with Browser(tmp) as b:
                b.open("about:blank")
            print(find_chromium())
        except (BrowserError, OSError) as e:
            print("headless chromium does not work here: %s" % e)
            sys.exit(1)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        sys.exit("usage: browser.py check")
