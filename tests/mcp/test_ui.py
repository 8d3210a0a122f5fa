"""The memory dashboard (/ui) in a real headless browser: Debian's Chromium
driven by its own chromedriver through Selenium (nothing downloads a
browser). One browser and one engram-mcp serve the whole module; each test
logs in afresh, with data of owners of its own made through MCP and /v1.

What it covers: deep links (a view's address shown after logging in, and
again after a reload), Back, the memory list's filters (kind, tags, status,
entity, namespace, valid at, written from/to) and pages, a memory's detail
panel in view, editing content and tags, flag, forget, reopening a
superseded memory, an entity's page with the spellings it merges, owners
and stats for a platform token, workspaces, states, sessions and their
captured events, and resources.

The screenshots it takes are the ones docs/UI.md shows: written to docs/ui/
on every run, and checked (size, not blank, the element they are about
drawn inside the viewport)."""

import os
import re
import time

import httpx
import pytest
from PIL import Image
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import call, mcp_session, new_database, psql, serving

pytestmark = pytest.mark.anyio

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHOTS = os.path.join(ROOT, "docs", "ui")
WIDTH, HEIGHT = 1280, 900


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={WIDTH},{HEIGHT}",
                "--force-device-scale-factor=1", "--hide-scrollbars", "--lang=en-US"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    # the viewport, not the window, is what the screenshots show
    inner = driver.execute_script("return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight]")
    driver.set_window_size(WIDTH + inner[0], HEIGHT + inner[1])
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site():
    db = new_database()
    token = lambda owner, platform="false": psql(
        db, f"SELECT engram.create_token(owner => '{owner}', label => 'ui {owner}', platform => {platform})")
    tokens = {"platform": token("ops", "true"), "vera": token("vera"), "maria": token("maria"),
              "tom": token("tom"), "kai": token("kai")}
    with serving(db, "--tools", "all") as base:
        yield {"db": db, "base": base, **tokens}


def wait(driver, condition, seconds=15):
    return WebDriverWait(driver, seconds, poll_frequency=0.05,
                         ignored_exceptions=[StaleElementReferenceException]).until(condition)


def v1(site, token):
    return httpx.Client(base_url=site["base"], headers={"Authorization": f"Bearer {token}"}, timeout=30)


def remember(c, content, **kw):
    r = c.post("/v1/memories", json={"content": content, "force": True, **kw})
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def login(d, site, token, act_as=None, at=""):
    """Opens the dashboard at address `at` ('#/...') logged out, and logs in."""
    d.get(site["base"] + "/ui" + at)
    d.execute_script("sessionStorage.clear()")
    d.refresh()
    wait(d, EC.visibility_of_element_located((By.ID, "token"))).send_keys(token)
    if act_as:
        d.find_element(By.ID, "act-as").send_keys(act_as)
    d.find_element(By.ID, "login-button").click()
    wait(d, EC.visibility_of_element_located((By.ID, "app")))


def go(d, address):
    """Follows an address as a link does (a new history entry)."""
    d.execute_script("location.hash = arguments[0]", address)


def texts(d, css):
    return [e.text for e in d.find_elements(By.CSS_SELECTOR, css)]


def click(d, css, index=0):
    """Clicks the index-th element of `css`, found again if the list
    re-renders between finding and clicking (a stale element: retried)."""
    def attempt(d):
        found = d.find_elements(By.CSS_SELECTOR, css)
        if len(found) <= index:
            return False
        found[index].click()
        return True
    wait(d, attempt)


def listed(d):
    """The memory list once it is shown for the current address."""
    wait(d, lambda d: d.execute_script(
        "return !!document.querySelector('#results li') && document.getElementById('page-number').textContent !== ''"))
    return texts(d, "#results .memory-link")


def shown_for(d, address, css):
    """Navigates to `address` and waits for its view to replace what `css` showed before."""
    before = d.find_elements(By.CSS_SELECTOR, css)
    go(d, address)
    if before:
        wait(d, EC.staleness_of(before[0]))
    return wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, css))


def in_viewport(d, element):
    r = element.rect
    w, h = d.execute_script("return [window.innerWidth, window.innerHeight]")
    box = d.execute_script("const b = arguments[0].getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]",
                           element)
    assert r["width"] > 0 and r["height"] > 0, r
    assert r["x"] >= 0 and r["y"] >= 0 and r["x"] + r["width"] <= w and r["y"] + r["height"] <= h, (r, w, h)
    assert box[0] >= 0 and box[1] >= 0 and box[2] <= w and box[3] <= h, (box, w, h)
    return r


def console_clean(d):
    """Nothing the page did broke its policy or threw: no Content-Security-
    Policy report, no uncaught error (a refused API call, logged as a failed
    load, is an answer the page shows)."""
    bad = [e["message"] for e in d.get_log("browser")
           if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]]
    assert not bad, bad


def screenshot(d, name, *about):
    """Saves the viewport as docs/ui/<name> and checks the picture: the
    fixed size, not blank, and each element of `about` drawn inside it."""
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, name)
    # the view has settled: no request in flight changes it after the shot
    time.sleep(0.2)
    assert d.save_screenshot(path)
    img = Image.open(path).convert("RGB")
    assert img.size == (WIDTH, HEIGHT), img.size
    colors = img.getcolors(maxcolors=1 << 20)
    assert colors and len(colors) >= 32, f"{name} looks blank: {len(colors or [])} colours"
    assert max(n for n, _ in colors) < 0.9 * WIDTH * HEIGHT, f"{name} is one colour"
    for element in about:
        r = in_viewport(d, element)
        part = img.crop((int(r["x"]), int(r["y"]), int(r["x"] + r["width"]), int(r["y"] + r["height"])))
        assert len(part.getcolors(maxcolors=1 << 20) or []) >= 8, f"{name}: nothing drawn where {element.tag_name} is"
    return path


async def test_memories_filters_pages_detail_and_edits(browser, site):
    d, db = browser, site["db"]
    with v1(site, site["vera"]) as c:
        for i in range(12):
            remember(c, f"Garden note {i + 1}: the {['roses', 'tomatoes', 'basil', 'lavender'][i % 4]} "
                        f"bed needs {['water', 'compost', 'pruning'][i % 3]} in week {i + 10}", tags=["garden"])
        remember(c, "Vera visited the Lisbon office with Tom Baker", kind="episodic", occurred_at="2025-01-10")
        remember(c, "Vera presented the roadmap in Lisbon", kind="episodic", occurred_at="2026-03-02")
        remember(c, "To deploy the website, run make release and tag the commit", kind="procedural",
                 tags=["deploy"])
        r = c.put("/v1/items", json={"namespace": ["prefs", "vera"], "key": "theme",
                                     "content": "Vera prefers the dark theme"})
        assert r.status_code in (200, 201), r.text
        phone = remember(c, "Vera's old phone number is 555-0100")
        assert c.delete(f"/v1/memories/{phone}").json()["forgotten"] is True
        nine = remember(c, "Vera's team meeting is on Mondays at 9am", valid_from="2026-01-05")
        remember(c, "Vera's team meeting is on Mondays at 10am", valid_from="2026-04-06", supersedes=[nine])
    async with mcp_session(site["base"], site["vera"]) as s:
        r, _ = await call(s, "memory_remember", content="Vera's favourite tea is sencha", tags=["drinks"])
        tea = r["id"]
        await call(s, "memory_update", id=tea, content="Vera's favourite tea is gyokuro")

    # A deep link opened logged out is the view shown once logged in: a
    # platform token acting for vera.
    login(d, site, site["platform"], act_as="vera", at="#/memories?kind=episodic")
    assert " ".join(d.find_element(By.ID, "who").text.split()).endswith("acting as vera")
    assert sorted(listed(d)) == ["Vera presented the roadmap in Lisbon",
                                 "Vera visited the Lisbon office with Tom Baker"]
    assert d.find_element(By.ID, "f-kind").get_attribute("value") == "episodic"
    # the timeline orders the page by when things happened
    assert [t[:10] for t in texts(d, "#timeline li")] == ["2025-01-10", "2026-03-02"]

    # pages: ten memories a page, Next and Back
    d.find_element(By.ID, "clear-filters").click()
    wait(d, lambda d: d.current_url.endswith("#/memories") and len(listed(d)) == 10)
    first = listed(d)
    d.find_element(By.ID, "next-page").click()
    wait(d, lambda d: "page=2" in d.current_url and listed(d) != first)
    second = listed(d)
    assert second and not set(first) & set(second), (first, second)
    assert "disabled" not in d.find_element(By.ID, "prev-page").get_attribute("class")
    d.back()
    wait(d, lambda d: d.current_url.endswith("#/memories") and listed(d) == first)
    # the newest first: the tea (written last) leads
    assert first[0] == "Vera's favourite tea is gyokuro", first

    # filters, typed into the form: tags
    d.find_element(By.ID, "f-tags").send_keys("garden")
    d.find_element(By.ID, "search-button").click()
    wait(d, lambda d: "tags=garden" in d.current_url and all(t.startswith("Garden note") for t in listed(d)))
    assert len(listed(d)) == 10 and "Next" in d.find_element(By.ID, "next-page").text
    # status, namespace, entity (a search), validity in the past, written from/to: by address
    shown_for(d, "#/memories?status=archived", "#results li")
    assert listed(d) == ["Vera's old phone number is 555-0100"]
    assert d.find_element(By.ID, "f-status").get_attribute("value") == "archived"
    shown_for(d, "#/memories?ns=prefs", "#results li")
    assert listed(d) == ["Vera prefers the dark theme"]
    assert "prefs.vera / theme" in d.find_element(By.CSS_SELECTOR, "#results .meta").text
    shown_for(d, "#/memories?entity=Lisbon", "#results li")
    assert sorted(listed(d)) == ["Vera presented the roadmap in Lisbon",
                                 "Vera visited the Lisbon office with Tom Baker"]
    shown_for(d, "#/memories?valid_at=2026-02-01&q=team%20meeting", "#results li")
    assert "Vera's team meeting is on Mondays at 9am" in listed(d)
    assert "Vera's team meeting is on Mondays at 10am" not in listed(d)
    today = time.strftime("%Y-%m-%d", time.gmtime())
    shown_for(d, f"#/memories?kind=procedural&from={today}&to={today}", "#results li")
    assert listed(d) == ["To deploy the website, run make release and tag the commit"]
    shown_for(d, "#/memories?kind=procedural&to=2020-01-01", "#results li")
    assert texts(d, "#results li") == ["No memories here."]

    # search, and open the best hit: its detail comes into view beside the list
    q = d.find_element(By.ID, "query")
    q.clear()
    for field in ["f-kind", "f-to"]:
        d.execute_script("document.getElementById(arguments[0]).value = ''", field)
    q.send_keys("Vera favourite tea gyokuro")
    d.find_element(By.ID, "search-button").click()
    wait(d, lambda d: "q=Vera" in d.current_url and listed(d) and listed(d)[0] == "Vera's favourite tea is gyokuro")
    screenshot(d, "memories.png", d.find_element(By.ID, "search-form"), d.find_element(By.CSS_SELECTOR, "#results li"))
    d.find_element(By.CSS_SELECTOR, f"#results .memory-link[data-id='{tea}']").click()
    wait(d, lambda d: d.current_url.endswith(f"#/memory/{tea}"))
    detail = wait(d, EC.visibility_of_element_located((By.ID, "detail")))
    wait(d, lambda d: d.find_element(By.ID, "detail-content").text == "Vera's favourite tea is gyokuro")
    revisions = texts(d, "#revisions li")
    assert any("sencha" in r for r in revisions) and "(current)" in revisions[-1], revisions
    audit = texts(d, "#audit tr")
    assert any("remember" in a for a in audit) and any("update" in a for a in audit), audit
    assert listed(d)[0] == "Vera's favourite tea is gyokuro", "the list stays beside the detail"
    screenshot(d, "memory-detail.png", detail)

    # edit its content and tags: a new revision
    d.find_element(By.ID, "edit-toggle").click()
    content = wait(d, EC.visibility_of_element_located((By.ID, "edit-content")))
    content.clear()
    content.send_keys("Vera's favourite tea is genmaicha")
    tag_field = d.find_element(By.ID, "edit-tags")
    tag_field.clear()
    tag_field.send_keys("drinks, tea")
    d.find_element(By.ID, "edit-reason").send_keys("she switched")
    d.find_element(By.ID, "edit-save").click()
    wait(d, lambda d: "Saved as revision 3" in d.find_element(By.ID, "status").text)
    wait(d, lambda d: d.find_element(By.ID, "detail-content").text == "Vera's favourite tea is genmaicha")
    assert d.find_element(By.CSS_SELECTOR, "#fields .field-tags").text == "drinks, tea"
    assert psql(db, f"SELECT content || ' ' || array_to_string(tags, ',') FROM engram.memories WHERE id = '{tea}'") \
        == "Vera's favourite tea is genmaicha drinks,tea"
    assert any("she switched" in r for r in texts(d, "#revisions li"))

    # a reload shows the same memory (the token is kept in the tab)
    d.refresh()
    wait(d, lambda d: d.find_element(By.ID, "detail-content").text == "Vera's favourite tea is genmaicha")
    in_viewport(d, d.find_element(By.ID, "detail"))
    # Back: the search it was opened from, without the panel
    d.back()
    wait(d, lambda d: "q=Vera" in d.current_url and not d.find_element(By.ID, "detail").is_displayed())
    assert d.find_element(By.ID, "query").get_attribute("value") == "Vera favourite tea gyokuro"

    # a superseded memory: it says so, and reopens
    go(d, f"#/memory/{nine}")
    wait(d, lambda d: d.find_element(By.ID, "detail-content").text == "Vera's team meeting is on Mondays at 9am")
    assert d.find_element(By.ID, "detail-validity").text.startswith("No longer holds")
    d.find_element(By.ID, "reopen").click()
    wait(d, lambda d: "Reopened" in d.find_element(By.ID, "status").text)
    wait(d, lambda d: not d.find_element(By.ID, "reopen").is_displayed())
    assert psql(db, f"SELECT valid_to IS NULL FROM engram.memories WHERE id = '{nine}'") == "t"

    # flag, then forget the memory that is open
    go(d, f"#/memory/{tea}")
    wait(d, lambda d: d.find_element(By.ID, "detail-content").text == "Vera's favourite tea is genmaicha")
    d.find_element(By.ID, "flag").click()
    wait(d, lambda d: "Flagged" in d.find_element(By.ID, "status").text)
    wait(d, lambda d: d.find_element(By.CSS_SELECTOR, "#fields .field-flag_count").text == "1")
    d.find_element(By.ID, "forget").click()
    wait(d, lambda d: "Forgotten" in d.find_element(By.ID, "status").text)
    assert psql(db, f"SELECT status FROM engram.memories WHERE id = '{tea}'") == "archived"
    wait(d, lambda d: "Vera's favourite tea is genmaicha" not in listed(d) and not d.find_element(By.ID, "detail").is_displayed())
    console_clean(d)


async def test_entities_owners_stats_and_resources(browser, site):
    d, db = browser, site["db"]
    with v1(site, site["maria"]) as c:
        remember(c, "José Díaz leads the Lisbon office")
        remember(c, "Jose Diaz reviews the Lisbon budget every Friday")
        old = remember(c, "José Díaz's standup is at 9am", valid_from="2026-01-05")
        remember(c, "José Díaz's standup is at 10am", valid_from="2026-04-06", supersedes=[old])
        remember(c, "Maria met José Díaz and Tom Baker in Porto", kind="episodic", occurred_at="2026-02-10")
        # searches that found nothing: the misses stats shows
        for query in ["Maria's passport number", "the wifi password"]:
            r = c.post("/v1/search", json={"query": query, "tags": ["no-memory-has-this-tag"]})
            assert r.status_code == 200 and r.json()["results"] == [], r.text
    with v1(site, site["tom"]) as c:
        for text in ["Tom prefers window seats", "Tom is allergic to peanuts", "Tom's bike is a grey gravel bike"]:
            remember(c, text)

    login(d, site, site["platform"], act_as="maria", at="#/entities")
    # the entity list, and José Díaz's page: one entity whatever the accents
    wait(d, lambda d: "José Díaz" in texts(d, "#entity-list .entity-link"))
    row = [r.text for r in d.find_elements(By.CSS_SELECTOR, "#entity-list tr") if r.text.startswith("José Díaz")][0]
    assert "person" in row and " 5 " in f" {row} ", row
    [e for e in d.find_elements(By.CSS_SELECTOR, "#entity-list .entity-link") if e.text == "José Díaz"][0].click()
    wait(d, lambda d: d.find_element(By.ID, "entity-name").text == "José Díaz")
    assert "#/entity/Jos%C3%A9%20D%C3%ADaz" in d.current_url
    aliases = texts(d, "#entity-aliases .alias")
    assert {a.split(" ×")[0] for a in aliases} == {"José Díaz", "Jose Diaz"}, aliases
    facts = texts(d, "#entity-facts li")
    assert any("10am" in f for f in facts) and not any("9am" in f for f in facts), facts
    changes = texts(d, "#entity-history li")
    assert len(changes) == 1 and "9am" in changes[0] and "2026-04-06" in changes[0], changes
    assert "replaced by: José Díaz's standup is at 10am" in changes[0], changes
    related = texts(d, "#entity-related .entity-link")
    assert "Lisbon" in related and "Tom Baker" in related, related
    screenshot(d, "entity.png", d.find_element(By.ID, "view-entity"))
    # undo a supersession: the old fact holds again
    d.find_element(By.CSS_SELECTOR, "#entity-history li button.undo").click()
    wait(d, lambda d: not d.find_elements(By.CSS_SELECTOR, "#entity-history li"))
    assert "Reopened" in d.find_element(By.ID, "status").text
    facts = texts(d, "#entity-facts li")
    assert any("9am" in f for f in facts) and any("10am" in f for f in facts), facts
    assert psql(db, f"SELECT valid_to IS NULL FROM engram.memories WHERE id = '{old}'") == "t"
    # its memories, through the list's entity filter; a related entity's page; Back
    d.find_element(By.ID, "entity-memories").click()
    wait(d, lambda d: "entity=Jos" in d.current_url and len(listed(d)) == 5)
    d.back()
    wait(d, lambda d: d.find_element(By.ID, "entity-name").text == "José Díaz")
    # (the related list may render again after the name: found and clicked
    # in one retried step)
    def click_tom(d):
        links = [e for e in d.find_elements(By.CSS_SELECTOR, "#entity-related .entity-link") if e.text == "Tom Baker"]
        if not links:
            return False
        links[0].click()
        return True
    wait(d, click_tom)
    wait(d, lambda d: d.find_element(By.ID, "entity-name").text == "Tom Baker")

    # owners: every owner the database holds something for (engram.owners),
    # with what each holds; a name prefix narrows the list
    go(d, "#/owners")
    wait(d, lambda d: {"maria", "tom"} <= {r.text.split()[0] for r in d.find_elements(By.CSS_SELECTOR, "#owner-list tr")})
    rows = {r.text.split()[0]: r.text.split() for r in d.find_elements(By.CSS_SELECTOR, "#owner-list tr")}
    assert rows["maria"][1] == "5" and rows["tom"][1] == "3", rows  # memories
    assert "acting" in rows["maria"] and "acting" not in rows["tom"], rows
    d.find_element(By.ID, "owner-prefix").send_keys("to")
    d.find_element(By.ID, "owner-filter").click()
    wait(d, lambda d: "prefix=to" in d.current_url
         and [r.text.split()[0] for r in d.find_elements(By.CSS_SELECTOR, "#owner-list tr")] == ["tom"])
    d.back()
    wait(d, lambda d: "maria" in [r.text.split()[0] for r in d.find_elements(By.CSS_SELECTOR, "#owner-list tr")])
    screenshot(d, "owners.png", d.find_element(By.ID, "view-owners"))

    # stats for maria: totals, growth, misses, quotas and writes per day
    go(d, "#/stats")
    wait(d, lambda d: d.find_element(By.ID, "stats-title").text == "Stats — maria")
    cards = texts(d, "#stat-cards .stat")
    assert cards[0].startswith("5\nmemories"), cards
    assert cards[1].startswith("5\nnew in 7 days"), cards
    assert cards[2].startswith("2\nsearches that found nothing"), cards
    assert sorted(texts(d, "#stat-misses .miss a")) == ["Maria's passport number", "the wifi password"]
    quotas = {r.text.split()[0]: r for r in d.find_elements(By.CSS_SELECTOR, "#stat-quotas tr")}
    assert "5 / 1,000,000" in quotas["memories"].text, quotas["memories"].text
    assert quotas["memories"].find_element(By.TAG_NAME, "meter").get_attribute("value") == "5"
    writes = d.find_elements(By.CSS_SELECTOR, "#stat-writes tr")
    assert len(writes) == 7 and writes[-1].text.startswith(time.strftime("%Y-%m-%d", time.gmtime())), \
        [w.text for w in writes]
    screenshot(d, "stats.png", d.find_element(By.ID, "stat-cards"))
    # a miss opens the search it was
    [a for a in d.find_elements(By.CSS_SELECTOR, "#stat-misses .miss a") if a.text == "the wifi password"][0].click()
    wait(d, lambda d: d.find_element(By.ID, "query").get_attribute("value") == "the wifi password")

    # act for tom: the memories are his
    go(d, "#/owners")
    button = wait(d, lambda d: [r for r in d.find_elements(By.CSS_SELECTOR, "#owner-list tr")
                                if r.text.startswith("tom")][0].find_element(By.CSS_SELECTOR, "button.act-as"))
    button.click()
    wait(d, lambda d: d.current_url.endswith("#/memories") and sorted(listed(d)) == [
        "Tom is allergic to peanuts", "Tom prefers window seats", "Tom's bike is a grey gravel bike"])
    assert " ".join(d.find_element(By.ID, "who").text.split()).endswith("acting as tom")

    # resources: a platform's, added and deleted here, read by agents through MCP
    go(d, "#/resources")
    wait(d, EC.visibility_of_element_located((By.ID, "resource-form")))
    d.find_element(By.ID, "resource-name").send_keys("Tea guide")
    d.find_element(By.ID, "resource-content").send_keys("Gyokuro is brewed at 50 degrees for two minutes")
    d.find_element(By.ID, "resource-tags").send_keys("drinks, guide")
    d.find_element(By.ID, "resource-add").click()
    wait(d, lambda d: "Tea guide" in d.find_element(By.ID, "resource-list").text)
    assert "Resource added" in d.find_element(By.ID, "status").text
    async with mcp_session(site["base"], site["tom"]) as s:
        listed_resources = (await s.list_resources()).resources
        assert [x.name for x in listed_resources] == ["Tea guide"]
        text = (await s.read_resource(listed_resources[0].uri)).contents[0].text
        assert text == "Gyokuro is brewed at 50 degrees for two minutes"
    d.find_element(By.CSS_SELECTOR, "#resource-list li.resource button.danger").click()
    wait(d, lambda d: "Tea guide" not in d.find_element(By.ID, "resource-list").text)
    console_clean(d)


async def test_workspaces_sessions_and_captured_events(browser, site):
    d = browser
    with v1(site, site["kai"]) as c:
        r = c.post("/v1/workspaces", json={"name": "website-redesign", "description": "The new marketing site",
                                           "purpose": "Launch the redesign before the spring campaign",
                                           "root_folder": "/src/site", "key_files": ["site/index.html",
                                                                                     "site/style.css"]})
        assert r.status_code == 201, r.text
        r = c.post("/v1/workspaces/website-redesign/states", json={
            "name": "before-launch", "description": "Pages done, checks left",
            "active_task": "Fix the broken contact form", "conversation_context": "We moved the form to Formspree",
            "next_steps": ["run the link checker", "ask Dana for the copy review"], "active_files": ["site/contact.html"]})
        assert r.status_code == 201, r.text
        assert c.put("/v1/slots/style", json={"content": "Short sentences; no jargon", "pinned": True,
                                              "workspace": "website-redesign"}).status_code == 200
        for event in [
            {"event_type": "conversation", "content": "Kai asked to fix the contact form before the launch"},
            {"event_type": "tool_invocation", "tool_name": "run_tests", "success": False,
             "error": "contact form test failed: 500 from the endpoint"},
            {"event_type": "file_write", "file_path": "site/contact.html", "content": "Point the form at Formspree"},
            {"event_type": "observation", "content": "The contact form works again"},
        ]:
            r = c.post("/v1/events", json={"session_id": "launch-prep", "workspace": "website-redesign", **event})
            assert r.status_code == 201 and r.json()["status"] == "captured", r.text
        r = c.post("/v1/events", json={"session_id": "other-chat", "event_type": "conversation",
                                       "content": "Kai asked about lunch options"})
        assert r.status_code == 201, r.text

    # a user token: its own owner only
    login(d, site, site["kai"], at="#/workspaces")
    link = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#workspace-list .workspace-link"))
    assert [e.text for e in link] == ["website-redesign"]
    assert "The new marketing site" in d.find_element(By.ID, "workspace-list").text
    link[0].click()
    wait(d, lambda d: d.find_element(By.ID, "workspace-name").text == "website-redesign")
    assert d.current_url.endswith("#/workspace/website-redesign")
    fields = d.find_element(By.ID, "workspace-fields").text
    assert "Launch the redesign" in fields and "site/style.css" in fields and "/src/site" in fields, fields
    assert "Short sentences; no jargon" in d.find_element(By.ID, "workspace-slots").text
    state = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#workspace-states details.state"))[0]
    assert "before-launch" in state.text and "Fix the broken contact form" in state.text
    state.find_element(By.TAG_NAME, "summary").click()
    wait(d, lambda d: "We moved the form to Formspree" in state.text)
    assert "ask Dana for the copy review" in state.text and "site/contact.html" in state.text
    sessions = texts(d, "#workspace-sessions .session-link")
    assert sessions == ["launch-prep"], sessions
    screenshot(d, "workspaces.png", d.find_element(By.ID, "workspace-name"), state)

    # the session's captured events, oldest first
    click(d, "#workspace-sessions .session-link")
    wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#session-events li")) == 4)
    assert d.current_url.endswith("#/session/launch-prep")
    events = wait(d, lambda d: texts(d, "#session-events li"))
    assert "conversation" in events[0].lower() and "Kai asked to fix the contact form" in events[0], events
    assert "run_tests" in events[1] and "failed" in events[1].lower(), events
    assert "The contact form works again" in events[3], events
    # (read again if the list re-renders between the two reads)
    wait(d, lambda d: "failed" in (d.find_elements(By.CSS_SELECTOR, "#session-events li")[1].get_attribute("class") or ""))
    assert "workspace website-redesign" in d.find_element(By.ID, "session-summary").text
    screenshot(d, "session.png", d.find_element(By.ID, "session-events"))
    # a reload shows the session again; Back returns to the workspace
    d.refresh()
    wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#session-events li")) == 4)
    d.back()
    wait(d, lambda d: d.find_element(By.ID, "workspace-name").text == "website-redesign"
         and d.find_element(By.ID, "view-workspace").is_displayed())
    d.forward()
    wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#session-events li a.open")) == 4)
    # an event is a memory: its detail links back to its session
    click(d, "#session-events li a.open", 3)
    wait(d, lambda d: d.find_element(By.ID, "detail-content").text == "The contact form works again")
    d.find_element(By.CSS_SELECTOR, "#fields .field-session_id a").click()
    wait(d, lambda d: d.current_url.endswith("#/session/launch-prep")
         and len(d.find_elements(By.CSS_SELECTOR, "#session-events li")) == 4)

    # every session, with its workspace
    go(d, "#/sessions")
    wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#session-list .session-link")) == 2)
    rows = {r.text.split()[0]: r.text for r in d.find_elements(By.CSS_SELECTOR, "#session-list tr")}
    assert "website-redesign" in rows["launch-prep"] and "website-redesign" not in rows["other-chat"], rows
    go(d, "#/sessions?workspace=website-redesign")
    wait(d, lambda d: texts(d, "#session-list .session-link") == ["launch-prep"])

    # owners and resources for a user token: its own owner, and read-only resources
    go(d, "#/owners")
    wait(d, lambda d: [r.text.split()[0] for r in d.find_elements(By.CSS_SELECTOR, "#owner-list tr")] == ["kai"])
    assert not d.find_element(By.ID, "owner-form").is_displayed()
    assert "acts only for its own owner" in d.find_element(By.ID, "owners-note").text
    go(d, "#/resources")
    wait(d, lambda d: "platform token" in d.find_element(By.ID, "resource-list").text)
    assert not d.find_element(By.ID, "resource-form").is_displayed()
    console_clean(d)


def test_ui_page_forbids_scripts_from_elsewhere_and_framing(site):
    base = site["base"]
    r = httpx.get(base + "/ui")
    assert r.status_code == 200 and "engram" in r.text
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "style-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp and "'unsafe-inline'" not in csp
    assert r.headers["x-frame-options"] == "DENY"
    html = r.text.lower()
    # no inline script, style or handler: the policy would refuse them anyway
    assert "<style" not in html and not re.search(r"<[^>]*\s(style|on[a-z]+)\s*=", html)
    assert html.count("<script") == html.count("<script src=\"/ui/app.js\"></script>") == 1
    for asset in ["/ui/app.js", "/ui/style.css"]:
        a = httpx.get(base + asset)
        assert a.status_code == 200 and a.headers["content-security-policy"] == csp, asset
    js = httpx.get(base + "/ui/app.js").text
    for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"]:
        assert sink not in js, f"stored text is inserted as text only: {sink}"
    # the dashboard's own routes answer only with a token
    assert httpx.get(base + "/api/stats").status_code == 401
    assert httpx.get(base + "/api/browse").status_code == 401
