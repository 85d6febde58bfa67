"""Headless Chromium for the browser tests: Debian's `chromium` driven by Selenium through its `chromedriver`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# a proxy nobody listens on: any request that tries to leave the machine fails, and says so in the console
NO_NETWORK = "http://127.0.0.1:9"


def _installed() -> bool:
    return Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()


needs_chromium = pytest.mark.skipif(not _installed(), reason="chromium and chromium-driver (Debian) are not installed; "
                                                               ".ci/run installs them")


@contextmanager
def chromium(profile: Path, *, offline: bool = False, width: int = 1300, height: int = 1600) -> Iterator[Any]:
    """A headless browser with its own profile directory; with `offline`, no network at all."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", f"--user-data-dir={profile}", "--no-first-run"):
        options.add_argument(argument)
    if offline:
        options.add_argument(f"--proxy-server={NO_NETWORK}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        if offline:
            driver.execute_cdp_cmd("Network.enable", {})
            driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
                "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def text(driver: Any, element_id: str) -> str:
    return str(driver.execute_script(f"const e = document.getElementById('{element_id}'); return e ? e.innerText : ''"))


def screenshot(driver: Any, path: Path) -> Path:
    """The whole page, not only the window."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1300, min(max(height, 800), 12000))
    driver.save_screenshot(str(path))
    return path


def chart_axes(driver: Any) -> list[dict[str, Any]]:
    """Per drawn chart: its title, axis titles and how many tick labels each axis shows."""
    return list(driver.execute_script("""
        return [...document.querySelectorAll('.chart')].map(c => ({
          id: c.id,
          drawn: c.querySelector('.main-svg') !== null,
          title: (c.querySelector('.gtitle') || {}).textContent || '',
          x: (c.querySelector('.g-xtitle') || {}).textContent || '',
          y: (c.querySelector('.g-ytitle') || {}).textContent || '',
          xticks: c.querySelectorAll('.xtick text').length,
          yticks: c.querySelectorAll('.ytick text').length,
          labels: [...c.querySelectorAll('.textpoint text')].map(t => t.textContent),
        }));"""))


def clipped_titles(driver: Any) -> list[str]:
    """Every chart's title or axis title that leaves its figure, and every axis title drawn over its axis's tick
    labels or the legend: what a reader sees cut off or unreadable."""
    return list(driver.execute_script("""
        const box = e => e.getBoundingClientRect();
        const meets = (a, b) => a.left < b.right - 1 && b.left < a.right - 1
                                && a.top < b.bottom - 1 && b.top < a.bottom - 1;
        const inside = (t, f) => t.left >= f.left - 1 && t.right <= f.right + 1
                                 && t.top >= f.top - 1 && t.bottom <= f.bottom + 1;
        const problems = [];
        for (const c of document.querySelectorAll('.chart')) {
          const svg = c.querySelector('.main-svg');
          if (!svg || !c.offsetParent) continue;
          const frame = box(svg);
          for (const [name, ticks] of [['gtitle', null], ['g-xtitle', '.xtick text'], ['g-ytitle', '.ytick text'],
                                       ['g-y2title', '.y2tick text']]) {
            const title = c.querySelector('.' + name);
            if (!title || !title.textContent) continue;
            const t = box(title);
            if (!inside(t, frame)) problems.push(c.id + ': ' + name + ' leaves the figure');
            if (ticks && [...c.querySelectorAll(ticks)].some(k => meets(box(k), t)))
              problems.push(c.id + ': ' + name + ' over its tick labels');
            const legend = c.querySelector('.legend');
            if (name !== 'gtitle' && legend && meets(box(legend), t))
              problems.push(c.id + ': ' + name + ' under the legend');
          }
        }
        return problems;"""))


def click_tab(driver: Any, name: str) -> None:
    driver.find_element("css selector", f".tabs button[data-tab='{name}']").click()


def shown(driver: Any, element_id: str) -> bool:
    """Whether the element is on screen (not inside a hidden tab)."""
    script = f"const e = document.getElementById('{element_id}'); return !!(e && e.offsetParent)"
    return bool(driver.execute_script(script))
