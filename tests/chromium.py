"""Headless Debian Chromium driven over the DevTools protocol, for the tests of the matrix
page (and benchmarks/matrix_page.py). Standard library only.

Chromium is started with ``--remote-debugging-pipe``: it reads the protocol's commands on
its fd 3 and writes answers and events on its fd 4, each message JSON ended by a NUL
byte (as Puppeteer's pipe transport does). So no websocket client, no browser download:
the browser is the ``chromium`` the system has (Debian's package; scripts/run-tests
installs it where missing).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import signal
import tempfile
import time

#: Debian's package, else what PATH offers.
BINARY = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
         "--disable-extensions", "--disable-background-networking", "--disable-sync", "--disable-dev-shm-usage",
         "--remote-debugging-pipe")


class DevToolsError(RuntimeError):
    pass


def _high(fd: int) -> int:
    """``fd`` moved above the standard and the pipe's own slots (3, 4), close-on-exec."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Chromium:
    """One headless browser and one page (a target attached in flat mode)."""

    def __init__(self, width: int = 1600, height: int = 1000, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="flagos-chromium-")
        to_child_r, self._to_child = (_high(fd) for fd in os.pipe())
        self._from_child, from_child_w = (_high(fd) for fd in os.pipe())
        devnull = os.open(os.devnull, os.O_RDWR)
        actions = [(os.POSIX_SPAWN_DUP2, to_child_r, 3), (os.POSIX_SPAWN_DUP2, from_child_w, 4),
                   (os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
                   (os.POSIX_SPAWN_DUP2, devnull, 2)]
        argv = [BINARY, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"]
        self.pid = os.posix_spawn(BINARY, argv, os.environ, file_actions=actions, setpgroup=0)
        for fd in (to_child_r, from_child_w, devnull):
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        self.opened_at = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page.enable", "Network.enable", "Runtime.enable"):
            self.send(domain)

    # -- the protocol ----------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise DevToolsError("chromium answered nothing in time")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise DevToolsError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, session: str | None = None, **params) -> dict:
        """Send ``method`` (to the page's session with :meth:`send`) and wait for its answer;
        events met meanwhile are kept in :attr:`events`."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise DevToolsError(f"{method}: {answer['error']}")
                return answer.get("result") or {}
            self.events.append(answer)

    def send(self, method: str, **params) -> dict:
        return self.call(method, session=self.session, **params)

    def wait_for(self, method: str, since: int = 0) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for event in self.events[since:]:
                if event.get("method") == method:
                    return event
            since = len(self.events)
            self.events.append(self._read_message(deadline))

    # -- what the tests do -----------------------------------------------------------------
    def open(self, path: str) -> None:
        """Load the file ``path`` and wait for its load event."""
        mark = self.opened_at = len(self.events)
        self.send("Page.navigate", url="file://" + os.path.abspath(path))
        self.wait_for("Page.loadEventFired", mark)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (pressed and released) at the middle of the element ``selector``."""
        box = self.evaluate(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            e.scrollIntoView({{block: "center", inline: "center"}}); const r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def type_into(self, selector: str, text: str) -> None:
        """Focus ``selector``, clear it and type ``text`` as keyboard input."""
        self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.focus(); e.select(); }})()")
        self.send("Input.dispatchKeyEvent", type="keyDown", key="Backspace", code="Backspace", windowsVirtualKeyCode=8)
        self.send("Input.dispatchKeyEvent", type="keyUp", key="Backspace", code="Backspace", windowsVirtualKeyCode=8)
        if text:
            self.send("Input.insertText", text=text)

    def requests(self) -> list[str]:
        """The URL of every request the page sent since it was opened."""
        return [e["params"]["request"]["url"] for e in self.events[self.opened_at:]
                if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == self.session]

    def screenshot(self, path: str) -> None:
        shot = self.send("Page.captureScreenshot", format="png")
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (DevToolsError, OSError):
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, _status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.killpg(self.pid, signal.SIGKILL)  # the group started with it, nothing else
            os.waitpid(self.pid, 0)
        for fd in (self._to_child, self._from_child):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
