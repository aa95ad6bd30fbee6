"""Fixtures of the browser tests: Debian's Chromium driven by Playwright (through
`executable_path`; `playwright install` is never used) against the platform API running
as a real HTTP process on the real control plane and PostgreSQL, with the operator.

Chromium comes from `humanwork_dev/scripts/install-chromium.sh` (`make browser-binaries`,
a prerequisite of `make test`); `HUMANWORK_CHROMIUM` may name another binary. When
Chromium cannot be had, the tests FAIL with the reason; they never skip. Screenshots go to
tests/artifacts/.
"""

from __future__ import annotations

import inspect
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Error, Page, expect, sync_playwright
from playwright.sync_api._context_manager import PlaywrightContextManager

from humanwork_dev.processes import PlatformProcess
from tests.browser.support import Org, org_fixture
from tests.conftest import Cluster

# every `expect` waits as long as a page action may (Playwright's own default is 5 s, too
# short for a loaded two-core machine); a condition that holds returns at once
expect.set_options(timeout=20_000)

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def chromium_executable() -> str:
    """The Chromium binary to drive; fails the test with the reason when there is none."""
    named = os.environ.get("HUMANWORK_CHROMIUM")
    candidates = [named] if named else []
    candidates += [shutil.which("chromium") or "", "/usr/bin/chromium"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        "no Chromium for the browser tests: install Debian's chromium with "
        "`make browser-binaries` (humanwork_dev/scripts/install-chromium.sh), or name a binary in "
        "HUMANWORK_CHROMIUM",
        pytrace=False,
    )


class SharedChromium:
    """Playwright's driver and one Chromium, launched when a test first needs them and
    kept for the next test modules of the package. Playwright's sync API keeps an event
    loop running on this thread while it is open, so they are closed before any asyncio
    test (see `_no_chromium_under_asyncio`) and launched again after it."""

    def __init__(self) -> None:
        self._playwright: PlaywrightContextManager | None = None
        self._browser: Browser | None = None

    def get(self) -> Browser:
        if self._browser is None:
            executable = chromium_executable()
            self._playwright = sync_playwright()
            playwright = self._playwright.start()
            try:
                self._browser = playwright.chromium.launch(
                    executable_path=executable, headless=True
                )
            except Error as exc:
                self.close()
                pytest.fail(f"Chromium ({executable}) did not start: {exc}", pytrace=False)
        return self._browser

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._browser = None
        if self._playwright is not None:
            self._playwright.__exit__(None, None, None)
            self._playwright = None


@pytest.fixture(scope="package")
def chromium() -> Iterator[SharedChromium]:
    """The package's Chromium (launched on first use): one launch for many modules."""
    shared = SharedChromium()
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture(autouse=True)
def _no_chromium_under_asyncio(request: pytest.FixtureRequest, chromium: SharedChromium) -> None:
    """Chromium is closed before an asyncio test of the package (an autouse fixture is
    set up before the test's own, async ones included)."""
    if inspect.iscoroutinefunction(request.function):
        chromium.close()


@pytest.fixture
def browser(platform_server: PlatformProcess, chromium: SharedChromium) -> Browser:
    """The shared Chromium; the session fixtures it needs (the platform, which runs
    asyncio in a thread of its own) are set up before it is launched."""
    return chromium.get()


@pytest.fixture
def org(platform_server: PlatformProcess, cluster: Cluster) -> Iterator[Org]:
    yield from org_fixture(platform_server, cluster)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (its own sessionStorage) at 1280x800. Script errors and
    Content-Security-Policy violations fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-GB")
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    problems: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type == "error" and "status of 4" not in message.text:
            problems.append(message.text)

    tab.on("console", console)
    tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    yield tab
    context.close()
    assert not problems, f"the page reported errors: {problems}"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
