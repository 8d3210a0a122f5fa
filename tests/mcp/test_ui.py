"""The memory browser (/ui) in a real headless browser: Debian's Chromium
driven by its own chromedriver through Selenium (nothing downloads a
browser). Log in with a token, search, open a memory (revisions, audit
trail), forget it, add a resource and find it through MCP; an entity's
page (what holds now, what changed, related entities) and a search's
timeline. The screenshots it takes are kept under .engram/artifacts/."""

import os

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import call, mcp_session, new_database, psql, serving

pytestmark = pytest.mark.anyio

ARTIFACTS = os.path.join(os.environ.get("ENGRAM_HOME", "."), "artifacts")


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1400"]:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    yield driver
    driver.quit()


def wait(driver, condition, seconds=30):
    return WebDriverWait(driver, seconds, ignored_exceptions=[StaleElementReferenceException]).until(condition)


async def test_browse_search_open_forget_and_add_a_resource(browser):
    db = new_database()
    platform = psql(db, "SELECT engram.create_token(owner => 'ops', label => 'browser', platform => true)")
    agent = psql(db, "SELECT engram.create_token(owner => 'vera', label => 'agent')")
    with serving(db, "--tools", "all") as base:
        async with mcp_session(base, agent) as s:
            r, _ = await call(s, "memory_remember", content="Vera's favourite tea is sencha", tags=["drinks"])
            tea = r["id"]
            await call(s, "memory_update", id=tea, content="Vera's favourite tea is gyokuro")
            await call(s, "memory_remember", content="Vera rides a blue bicycle to work")
            # The corrected memory ranks first for its own words: a correction
            # by the owner does not make it less trusted than one never checked,
            # and relevance keeps the gap between a full and a partial match.
            hits, _ = await call(s, "memory_search", query="Vera favourite tea gyokuro")
            assert [h["id"] for h in hits["results"]][0] == tea, hits

        d = browser
        d.get(base + "/ui")
        # log in as the platform token acting for vera (resources need a platform token)
        d.find_element(By.ID, "token").send_keys(platform)
        d.find_element(By.ID, "act-as").send_keys("vera")
        d.find_element(By.ID, "login-button").click()
        wait(d, EC.visibility_of_element_located((By.ID, "app")))
        wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .memory-link")) == 2)

        # search, open the best hit
        before = d.find_element(By.CSS_SELECTOR, "#results .memory-link")
        q = d.find_element(By.ID, "query")
        q.clear()
        q.send_keys("Vera favourite tea gyokuro")
        d.find_element(By.ID, "search-button").click()
        wait(d, EC.staleness_of(before))  # the search's results replaced the first list
        tea_link = lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, "#results .memory-link") if "gyokuro" in e.text]
        wait(d, tea_link)
        first = d.find_elements(By.CSS_SELECTOR, "#results .memory-link")[0]
        assert "gyokuro" in first.text, first.text
        tea_link(d)[0].click()
        wait(d, EC.visibility_of_element_located((By.ID, "detail")))
        wait(d, lambda d: d.find_element(By.CSS_SELECTOR, "#fields .field-content").text.endswith("gyokuro"))
        revisions = [li.text for li in d.find_elements(By.CSS_SELECTOR, "#revisions li")]
        assert any("sencha" in r for r in revisions), revisions
        audit = [tr.text for tr in d.find_elements(By.CSS_SELECTOR, "#audit tr")]
        assert any("remember" in a for a in audit) and any("update" in a for a in audit), audit

        # add a resource
        d.find_element(By.ID, "resource-name").send_keys("Tea guide")
        d.find_element(By.ID, "resource-content").send_keys("Gyokuro is brewed at 50 degrees for two minutes")
        d.find_element(By.ID, "resource-tags").send_keys("drinks, guide")
        d.find_element(By.ID, "resource-add").click()
        wait(d, lambda d: "Tea guide" in d.find_element(By.ID, "resource-list").text)

        os.makedirs(ARTIFACTS, exist_ok=True)
        shot = os.path.join(ARTIFACTS, "ui-browser.png")
        assert d.save_screenshot(shot) and os.path.getsize(shot) > 10_000

        # forget the memory that is open
        d.find_element(By.ID, "forget").click()
        try:
            wait(d, lambda d: "Forgotten" in d.find_element(By.ID, "status").text)
        except Exception:
            raise AssertionError(d.find_element(By.ID, "status").text)
        assert psql(db, f"SELECT status FROM engram.memories WHERE id = '{tea}'") == "archived"
        wait(d, lambda d: all("gyokuro" not in e.text for e in d.find_elements(By.CSS_SELECTOR, "#results .memory-link")))

        # the agent finds the resource through MCP, as a resource and in search
        async with mcp_session(base, agent) as s:
            listed = (await s.list_resources()).resources
            assert [x.name for x in listed] == ["Tea guide"]
            text = (await s.read_resource(listed[0].uri)).contents[0].text
            assert text == "Gyokuro is brewed at 50 degrees for two minutes"
            hits, err = await call(s, "memory_search", query="how do I brew gyokuro?")
            assert not err and hits["results"][0]["content"] == text, hits


async def test_entity_pages_and_the_timeline(browser):
    db = new_database()
    agent = psql(db, "SELECT engram.create_token(owner => 'vera', label => 'agent')")
    with serving(db) as base:
        async with mcp_session(base, agent) as s:
            r, _ = await call(s, "memory_remember", content="Vera's team meeting is on Mondays at 9am",
                              valid_from="2026-01-05")
            old = r["id"]
            r, _ = await call(s, "memory_remember", content="Vera's team meeting is on Mondays at 10am",
                              valid_from="2026-04-06", supersedes=[old], force=True)
            assert r["status"] == "created" and r["conflicts"], r
            await call(s, "memory_remember", kind="episodic", occurred_at="2025-01-10",
                       content="Vera visited the Lisbon office with Tom Baker")
            await call(s, "memory_remember", kind="episodic", occurred_at="2026-03-02",
                       content="Vera presented the roadmap in Lisbon")
        d = browser
        d.get(base + "/ui")
        d.find_element(By.ID, "token").send_keys(agent)
        d.find_element(By.ID, "login-button").click()
        wait(d, EC.visibility_of_element_located((By.ID, "app")))
        # the entity list, and Vera's page: what holds now, what changed, related
        wait(d, lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, "#entity-list .entity-link") if e.text == "Vera"])
        [e for e in d.find_elements(By.CSS_SELECTOR, "#entity-list .entity-link") if e.text == "Vera"][0].click()
        wait(d, EC.visibility_of_element_located((By.ID, "entity")))
        wait(d, lambda d: d.find_element(By.ID, "entity-name").text == "Vera")
        facts = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#entity-facts li")]
        assert any("10am" in f for f in facts) and not any("9am" in f for f in facts), facts
        changes = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#entity-history li")]
        assert len(changes) == 1 and "9am" in changes[0] and "2026-04-06" in changes[0], changes
        assert "replaced by: Vera's team meeting is on Mondays at 10am" in changes[0], changes
        related = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#entity-related .entity-link")]
        assert "Lisbon" in related and "Tom Baker" in related, related
        # undo: the superseded fact holds again (engram.reopen), and says so
        d.find_element(By.CSS_SELECTOR, "#entity-history li button.undo").click()
        wait(d, lambda d: not d.find_elements(By.CSS_SELECTOR, "#entity-history li"))
        facts = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#entity-facts li")]
        assert any("9am" in f for f in facts) and any("10am" in f for f in facts), facts
        assert "Reopened" in d.find_element(By.ID, "status").text
        assert psql(db, f"SELECT valid_to IS NULL FROM engram.memories WHERE id = '{old}'") == "t"
        # a related entity opens its own page
        [e for e in d.find_elements(By.CSS_SELECTOR, "#entity-related .entity-link") if e.text == "Tom Baker"][0].click()
        wait(d, lambda d: d.find_element(By.ID, "entity-name").text == "Tom Baker")
        # a search's timeline lists its results by when they happened
        # (the first page's timeline, of the newest memories, is replaced)
        before = d.find_element(By.CSS_SELECTOR, "#timeline li")
        q = d.find_element(By.ID, "query")
        q.clear()
        q.send_keys("Vera Lisbon")
        d.find_element(By.ID, "search-button").click()
        wait(d, EC.staleness_of(before))
        items = wait(d, lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, "#timeline li")] or None)
        lisbon = [i for i in items if "Lisbon" in i]
        assert lisbon[0].startswith("2025-01-10") and "visited" in lisbon[0], items
        assert lisbon[1].startswith("2026-03-02"), items
        os.makedirs(ARTIFACTS, exist_ok=True)
        assert d.save_screenshot(os.path.join(ARTIFACTS, "ui-entity.png"))
    assert old


def test_ui_page_forbids_scripts_from_elsewhere_and_framing():
    import httpx
    db = new_database()
    with serving(db) as base:
        r = httpx.get(base + "/ui")
        assert r.status_code == 200 and "engram" in r.text
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert r.headers["x-frame-options"] == "DENY"
        js = httpx.get(base + "/ui/app.js").text
        assert "innerHTML" not in js, "stored text is inserted as text only"
