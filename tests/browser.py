"""A real headless Chromium (Debian's ``chromium``, installed by ``scripts/setup.sh dev``) driven over the Chrome
DevTools Protocol with ``websockets``: open a page, evaluate JavaScript, press keys, take screenshots."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

KEY_CODES = {"ArrowLeft": 37, "ArrowRight": 39, "Backspace": 8, "=": 187}


class HeadlessChromium:
    def __init__(self, url: str, timeout_s: float = 30.0, webgl: bool = False, size: tuple[int, int] = (1400, 900)):
        """``webgl``: render WebGL on the CPU (SwiftShader), as a WebGL page such as Rerun's viewer needs."""
        from websockets.sync.client import connect

        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if binary is None:
            raise RuntimeError("chromium is not installed: run scripts/setup.sh dev (it installs Debian's chromium)")
        self.profile = Path(tempfile.mkdtemp(prefix="embody-chromium-"))
        gl = ["--use-angle=swiftshader", "--enable-unsafe-swiftshader"] if webgl else ["--disable-gpu"]
        flags = [
            "--headless=new",
            "--no-sandbox",
            *gl,
            "--no-first-run",
            "--mute-audio",
            "--window-size={},{}".format(*size),
        ]
        self.proc = subprocess.Popen(
            [binary, *flags, f"--user-data-dir={self.profile}", "--remote-debugging-port=0", url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file, end = self.profile / "DevToolsActivePort", time.monotonic() + timeout_s
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > end or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        while True:
            pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=5))
            page = next((p for p in pages if p.get("type") == "page" and p.get("url", "").startswith(url)), None)
            if page is not None or time.monotonic() > end:
                break
            time.sleep(0.05)
        if page is None:
            self.close()
            raise RuntimeError(f"chromium opened no page at {url}")
        self._ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout_s)
        self.ws = self._ws.__enter__()  # websockets wants its connection entered as a context
        self._id = 0

    def call(self, method: str, **params) -> dict:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=30))
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 20.0):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if value := self.evaluate(expression):
                return value
            time.sleep(0.05)
        raise TimeoutError(f"never true in the page: {expression}")

    def press(self, key: str) -> None:
        code = KEY_CODES.get(key, ord(key.upper()) if len(key) == 1 else 0)
        text = {"text": key} if len(key) == 1 else {}
        self.call("Input.dispatchKeyEvent", type="keyDown", key=key, windowsVirtualKeyCode=code, **text)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key, windowsVirtualKeyCode=code)

    def screenshot(self, path: Path) -> Path:
        """The page as it is now, as a PNG at ``path``."""
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
        return path

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self._ws.__exit__(None, None, None)
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
