"""``agentloop web``: the offline demo in a real headless Chromium, and the server's 403s."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from page_server import chromium, page_server

from agentloop._cli._demo import CALC_PY, FIXED_CALC_PY

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _first_frame(url: str) -> bytes:
    """The SSE stream's first frame (the reset, with the state)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        data = b""
        while b"\n\ndata: " not in data or not data.endswith(b"\n\n"):
            data += response.read1(65536)
        return data


def test_a_request_without_the_token_or_from_another_origin_is_refused(tmp_path: Path) -> None:
    secret = "sk-ant-secret-0123456789"
    with page_server(tmp_path, "--model", "demo", env={"ANTHROPIC_API_KEY": secret}) as url:
        base, _, token = url.partition("/?token=")
        port = base.rpartition(":")[2]
        for path in ("/", "/static/page.js", "/api/state", "/api/sessions", "/api/events"):
            assert _get(base + path) == (403, b"forbidden"), path
            assert _get(f"{base}{path}?token=not-{token}") == (403, b"forbidden"), path
        evil = {"Origin": "http://evil.example"}
        assert _get(url, evil) == (403, b"forbidden")
        assert _get(base + "/api/state", {"X-Agentloop-Token": token, **evil}) == (
            403,
            b"forbidden",
        )
        # DNS rebinding: a foreign name for this address.
        assert _get(url, {"Host": f"evil.example:{port}"}) == (403, b"forbidden")
        request = urllib.request.Request(
            base + "/api/prompt",
            data=b'{"text": "hi"}',
            headers={"Origin": "http://evil.example", "X-Agentloop-Token": token},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403
        refused.value.close()
        # The page's own origin, with the token: served; and no key in anything it gets.
        same = {"Origin": f"http://127.0.0.1:{port}"}
        status, page = _get(url, same)
        assert status == 200
        assert b"<title>agentloop</title>" in page
        status, state = _get(base + "/api/state", {"X-Agentloop-Token": token, **same})
        assert status == 200
        assert json.loads(state)["model"] == "demo"
        script = _get(f"{base}/static/page.js?token={token}")[1]
        frame = _first_frame(f"{base}/api/events?token={token}")
        assert frame.startswith(b": agentloop\n\ndata: {")
        for body in (page, state, script, frame):
            assert secret.encode() not in body
        # The key was in the server's environment (the demo ignores it): hidden from tools.


def _wait_for_end(page: Any, runs: int) -> None:
    """Approve each call that asks, until the page has said the end of ``runs`` runs."""
    while True:
        page.wait_for_selector(
            f"button.approve:not([disabled]), #chat .note >> nth={runs - 1}", timeout=30_000
        )
        ended = page.locator("#chat .note", has_text="Run ended").count()
        if ended >= runs:
            return
        button = page.locator("button.approve:not([disabled])")
        if button.count():
            button.first.click()


def test_the_demo_in_chromium_streams_approves_shows_the_timeline_and_aborts(
    tmp_path: Path,
) -> None:
    browser_path = chromium()
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with page_server(tmp_path, "--model", "demo") as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_selector("#model:has-text('model: demo')")
        directory = Path(page.locator("#directory").inner_text())
        assert (directory / "calc.py").read_text() == CALC_PY
        page.fill("#input", "Fix the failing test")
        page.press("#input", "Enter")

        # Streamed: the first answer grows delta by delta.
        page.wait_for_function(
            "() => Number(document.querySelector('.msg.assistant')?.dataset.deltas) > 5"
        )
        page.wait_for_selector("button.approve:not([disabled])")
        page.screenshot(path=str(tmp_path / "asking.png"))
        # Steering while the run waits: the model reads it at its next turn.
        assert page.locator("#send").inner_text() == "Steer"
        page.fill("#input", "please hurry")
        page.press("#input", "Enter")
        page.wait_for_selector("#chat .note:has-text('Steering: please hurry')")
        _wait_for_end(page, 1)
        heard = '(You wrote "please hurry": a scripted model cannot act on it, so I go on.)'
        assert page.locator(".msg.assistant", has_text=heard).count() == 1
        assert page.locator("#status").get_attribute("data-stop") == "completed"
        # The approve buttons let the edit happen.
        assert (directory / "calc.py").read_text() == FIXED_CALC_PY
        page.screenshot(path=str(tmp_path / "done.png"), full_page=True)

        # The timeline: the run's calls, in order, each with its start and end.
        bars = page.eval_on_selector_all(
            "#timeline .bar",
            "bars => bars.map(b => [b.dataset.tool, b.dataset.state,"
            " Number(b.dataset.start), Number(b.dataset.end)])",
        )
        assert [(tool, state) for tool, state, *_ in bars] == [
            ("list_files", "done"),
            ("read_file", "done"),
            ("read_file", "done"),
            ("bash", "done"),  # the check: it fails (exit status 1) before the fix
            ("edit_file", "done"),
            ("bash", "done"),
        ]
        for _, _, start, end in bars:
            assert 0 <= start <= end
        # The demo reads its two files in one reply: the two bars overlap in time.
        (*_, start1, end1), (*_, start2, end2) = bars[1:3]
        assert start1 <= start2 < min(end1, end2), bars
        # Every other call starts after the one before it ended.
        steps = [bars[0], bars[2], *bars[3:]]
        ends = [end for *_, end in steps]
        starts = [start for _, _, start, _ in steps]
        assert all(end < start for end, start in zip(ends, starts[1:], strict=False)), bars
        usage = page.locator("#usage tbody tr").count()
        assert usage == 6  # a row per turn

        # Abort: a run waiting for an approval ends, its call answered.
        page.fill("#input", "Check it again")
        page.press("#input", "Enter")
        page.wait_for_selector("button.approve:not([disabled])")
        page.click("#abort")
        page.wait_for_selector("#status[data-stop='aborted']")
        page.wait_for_selector("#status[data-running='false']")
        assert page.locator("button.approve").count() == 0
        last = page.eval_on_selector_all(
            "#timeline .bar", "bars => bars.map(b => [b.dataset.tool, b.dataset.outcome])"
        )[-1]
        assert last == ["bash", "cancelled"]
        page.screenshot(path=str(tmp_path / "aborted.png"), full_page=True)
        browser.close()
    assert errors == []


def test_the_timeline_shows_the_calls_of_one_turn_side_by_side(tmp_path: Path) -> None:
    browser_path = chromium()
    from playwright.sync_api import sync_playwright

    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "b.txt").write_text("two\n")
    script = tmp_path / "script.json"
    reads = [{"name": "read_file", "args": {"path": name}} for name in ("a.txt", "b.txt")]
    script.write_text(json.dumps([{"text": "Both at once.", "calls": reads}, {"text": "Done."}]))
    errors: list[str] = []
    args = ("--model", f"scripted:{script}", "-C", str(tmp_path))
    with page_server(tmp_path, *args) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, headless=True)
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_selector("#model:has-text('model: scripted')")
        page.fill("#input", "Read them")
        page.press("#input", "Enter")
        page.wait_for_selector("#status[data-stop='completed']")
        bars = page.eval_on_selector_all(
            "#timeline .bar",
            "bars => bars.map(b => [b.dataset.tool, b.dataset.callId, b.dataset.state,"
            " Number(b.dataset.start), Number(b.dataset.end)])",
        )
        assert [bar[:3] for bar in bars] == [
            ["read_file", "call_1", "done"],
            ["read_file", "call_2", "done"],
        ]
        (*_, start1, end1), (*_, start2, end2) = bars
        assert 0 <= start1 < start2 < min(end1, end2), bars  # both ran at once

        # A new conversation, then the first one again, from the directory's sessions.
        page.click("#new")
        page.wait_for_selector("#session:has-text('new session')")
        assert page.locator("#chat .msg").count() == 0
        page.wait_for_selector("#sessions button.resume:not([disabled])")
        assert page.locator("#sessions li .title").all_inner_texts() == ["Read them"]
        page.click("#sessions button.resume")
        page.wait_for_selector("#chat .msg.user:has-text('Read them')")
        shown = page.locator("#chat .msg").all_inner_texts()
        assert shown == ["Read them", "Both at once.", "Done."]
        assert page.locator("#chat .tool").count() == 2
        assert page.locator("#session").inner_text().startswith("session ")
        browser.close()
    assert errors == []
