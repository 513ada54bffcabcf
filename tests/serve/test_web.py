"""The search page in headless Chromium (Debian's chromium driven by playwright): type a query, see the hits."""

from __future__ import annotations

import os
import shutil

import pytest

playwright_api = pytest.importorskip("playwright.sync_api", reason="needs playwright: pip install 'care-retrieval[browser]'")

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMIUM = os.environ.get("CARE_CHROMIUM") or next((p for p in CHROMIUM_CANDIDATES if os.path.exists(p)), None) or shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: apt-get install -y chromium (or set CARE_CHROMIUM)")
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def page_url(engine):
    from care.serve.app import create_app
    from care.serve.server import serve_in_thread

    with serve_in_thread(create_app(engine)) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        yield browser
        browser.close()


def test_search_page_shows_hits_and_errors(page_url, browser, engine):
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(page_url + "/")
    playwright_api.expect(page.locator("#status")).to_contain_text(f"{engine.bundle.manifest.n_docs} documents")
    page.fill("#query", "高血压吃什么药")
    page.fill("#k", "3")
    page.click("#go")
    playwright_api.expect(page.locator("li.hit")).to_have_count(3)
    (found,) = engine.search_vectors(["高血压吃什么药"], [3], instruction=None)
    top = engine.hits(found, 3, None)[0]
    assert top["text"] in page.locator("li.hit").first.inner_text()
    assert "3 hits" in page.locator("#took").inner_text()
    page.fill("#k", "1000")  # over the server's max_k: the page shows the service's message
    page.click("#go")
    playwright_api.expect(page.locator("#error")).to_contain_text("larger than the maximum")
    playwright_api.expect(page.locator("li.hit")).to_have_count(0)
    page.close()
