"""The memory browser in a real headless browser (Debian's chromium through Selenium, the
system chromedriver): `ctxpipe serve` in front of real Celery workers, PostgreSQL and Redis.
A commit goes through the pipeline; the browser signs in with a key, browses to the memory,
runs a find, opens the commit; another account's key sees none of it; the console stays
free of errors. Screenshots are kept in `test-artefacts/ui/` (ignored by git)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest
from api_stack import ApiStack
from celery_stack import ROOT, SAMPLE_SESSION
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from ctxpipe.client import CtxClient

ARTEFACTS = ROOT / "test-artefacts" / "ui"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
QUESTION = "Where does the user live?"


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    for path in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(path) is None:
            pytest.fail(f"{path} is missing: apt-get install chromium chromium-driver", False)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.add_argument("--window-size=1280,900")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # the system driver, named explicitly: Selenium Manager never downloads one
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.implicitly_wait(15)  # an element the click asked for may come a moment later
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: webdriver.Chrome, name: str) -> None:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTEFACTS / f"{name}.png"))


def console_errors(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def arrived(driver: webdriver.Chrome, where: str, *, exact: bool = True) -> None:
    """Wait (a loaded machine is slow) until the page the click asked for is the current one."""
    try:
        WebDriverWait(driver, 30).until(
            expected_conditions.url_to_be(where)
            if exact
            else expected_conditions.url_contains(where)
        )
    except TimeoutException:
        raise AssertionError(f"{driver.current_url} is not {where}: {driver.page_source}") from None


def sign_in(driver: webdriver.Chrome, url: str, key: str, user: str = "") -> None:
    driver.get(f"{url}/ui/")
    assert driver.current_url.endswith("/ui/login")  # no session yet
    driver.find_element(By.ID, "key").send_keys(key)
    if user:
        driver.find_element(By.ID, "user_id").send_keys(user)
    driver.find_element(By.ID, "sign-in").click()
    arrived(driver, f"{url}/ui/")
    assert key not in driver.current_url
    cookie = driver.get_cookie("ctxpipe_ui")
    assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert key not in cookie["value"]


def test_sign_in_browse_find_and_open_a_commit_in_chromium(
    api_stack: ApiStack, browser: webdriver.Chrome
) -> None:
    url = api_stack.url
    alice = api_stack.key("--account", "acme", "--user", "alice", "--scopes", "read,commit")
    stranger = api_stack.key("--account", "globex", "--user", "alice", "--scopes", "read,commit")
    with CtxClient(url, alice, agent_id="helper") as client:
        cid = client.commit(SAMPLE_SESSION["messages"], session_id="s-ui", commit_id="e2e-ui-1")
        assert client.wait(cid, timeout=120).status == "success"
        deadline = time.monotonic() + 60
        while not any("Lisbon" in h.text for h in client.find(QUESTION, 5).hits):
            assert time.monotonic() < deadline, "the memory was not indexed"
            time.sleep(0.5)

    driver = browser
    sign_in(driver, url, alice)
    shot(driver, "1-tree")
    # browse: the tree → the profile node, with its levels and history
    profile = driver.find_element(By.PARTIAL_LINK_TEXT, "profile")
    profile.click()
    arrived(driver, "/ui/node?uri=", exact=False)
    assert "Lisbon" in driver.find_element(By.ID, "level-l2").text
    assert "e2e-ui-1" in driver.find_element(By.ID, "history").text
    shot(driver, "2-node")
    # find
    driver.find_element(By.ID, "nav-find").click()
    driver.find_element(By.ID, "q").send_keys(QUESTION)
    driver.find_element(By.ID, "run-find").click()
    hits = driver.find_element(By.ID, "hits").text
    assert "Lisbon" in hits
    with CtxClient(url, alice) as same:  # the page shows what the API answers
        for hit in same.find(QUESTION, 10).hits:
            assert hit.uri in hits and all(ref in hits for ref in hit.source_refs), hits
    shot(driver, "3-find")
    # commits → the commit: phases with durations, extractors
    driver.find_element(By.ID, "nav-commits").click()
    assert "in sync" in driver.find_element(By.ID, "health").text
    driver.find_element(By.LINK_TEXT, "e2e-ui-1").click()
    assert driver.find_element(By.ID, "commit-phase").text == "registered"
    phases = driver.find_element(By.ID, "phases").text
    assert "archive" in phases and "register" in phases and " ms" in phases
    assert "profile" in driver.find_element(By.ID, "extractors").text
    shot(driver, "4-commit")
    assert console_errors(driver) == []
    driver.find_element(By.ID, "sign-out").click()
    arrived(driver, f"{url}/ui/login")

    # another account's key: none of the first account's memories or commits
    sign_in(driver, url, stranger)
    assert "ctx://acme" not in driver.page_source and "Lisbon" not in driver.page_source
    shot(driver, "5-other-account-tree")
    driver.get(f"{url}/ui/find?q={QUESTION.replace(' ', '+')}")
    assert "Lisbon" not in driver.find_element(By.ID, "hits").text
    driver.get(f"{url}/ui/commits")
    assert "e2e-ui-1" not in driver.page_source
    driver.get(f"{url}/ui/commits/e2e-ui-1")
    assert "no such commit" in driver.find_element(By.ID, "error-message").text
    shot(driver, "6-other-account-commit")
    # the console reports the 404 page's status itself, nothing else
    errors = [e for e in console_errors(driver) if "404" not in e["message"]]
    assert errors == []
