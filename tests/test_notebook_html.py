"""A trace's HTML for notebooks (tracer/html.py), parsed: every step drawn has its `<details>`, its
link in the step list, its title and formula, its numbers as the worksheet gives them (fractions
under by-hand) and each cell's explanation on hover; no script anywhere; a big trace names what it
leaves out. Then drawn in a real headless Chromium, light and dark."""
from __future__ import annotations

import io
import shutil
from fractions import Fraction
from html.parser import HTMLParser

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracer
from test_by_hand import A, FLOOR, S

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


class Page(HTMLParser):
    """What a reader of the HTML meets: details by id (open or not), the step list's links, each
    table's cells (text and title) by the id of the details around it, and every tag seen."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.details, self.links, self.cells, self.tags, self.text = {}, [], {}, set(), []
        self._in, self._nav, self._cell, self._row = None, False, None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        if tag == "details":
            self._in = a["data-step"]
            self.details[self._in] = "open" in a
            self.cells[self._in] = []
        elif tag == "nav":
            self._nav = True
        elif tag == "a" and self._nav and a.get("href", "").startswith("#"):
            self.links.append(a["href"].split("-", 2)[2])
        elif tag == "tr" and self._in:
            self._row = []
            self.cells[self._in].append(self._row)
        elif tag == "td" and self._in:
            self._cell = [a.get("title"), ""]
            self._row.append(self._cell)

    def handle_endtag(self, tag):
        if tag == "nav":
            self._nav = False
        elif tag == "td":
            self._cell = None
        elif tag == "details":
            self._in = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell[1] += data

    def numbers(self, sid: str) -> list[list[str]]:
        return [[text for _, text in row] for row in self.cells[sid] if row]

    def titles(self, sid: str) -> list[list[str]]:
        return [[title for title, _ in row] for row in self.cells[sid] if row]


@pytest.fixture(scope="module")
def by_hand():
    trace = tracer.run("by_hand", arithmetic="by-hand")
    return trace, trace._repr_html_()


def _fraction(text: str) -> Fraction:
    return Fraction(text.replace("−", "-"))


def test_every_step_is_drawn_with_its_link_title_and_formula(by_hand):
    trace, text = by_hand
    page = Page(text)
    ids = [s.id for s in trace.steps]
    assert list(page.details) == ids and page.links == ids
    joined = "".join(page.text)
    for step in trace.steps:
        assert step.title in joined and step.formula in joined
    assert "<script" not in text.lower() and "script" not in page.tags
    assert page.details["h0.weights"], "the weights are open from the start"
    assert "by-hand" in joined and all(t in joined for t in trace.scenario.tokens)


def test_the_numbers_are_the_worksheets_fractions(by_hand):
    """The weights, scores and floored scores as the classroom sheet has them (tests/test_by_hand.py)."""
    _, text = by_hand
    page = Page(text)
    assert [[_fraction(t) for t in row] for row in page.numbers("h0.weights")] == A
    assert [[_fraction(t) for t in row] for row in page.numbers("h0.scores")] == S
    assert [[_fraction(t) for t in row] for row in page.numbers("h0.scaled")] == FLOOR
    assert "27/46" in page.numbers("h0.weights")[1]


def test_each_cell_tells_its_story_on_hover(by_hand):
    trace, text = by_hand
    page = Page(text)
    for step in trace.steps:
        titles = page.titles(step.id)
        assert np.shape(titles) == step.shape
        for i, row in enumerate(titles):
            assert row == [trace.explain(step.id, i, j) for j in range(step.shape[1])]
    assert page.titles("h0.weights")[1][0].endswith("= 9 ÷ (46/3) = 27/46 ≈ 0.5870   (how much x1 attends to x2)")


def test_hostile_tokens_are_text_not_markup():
    rng = np.random.default_rng(0)
    tokens = ["<script>alert(1)</script>", 'a"b', "<b>&amp;", "x' onmouseover='y"]
    trace = tracer.run(tracer.from_arrays(x=rng.normal(size=(4, 6)), q=[rng.normal(size=(6, 3))],
                                          k=[rng.normal(size=(6, 3))], v=[rng.normal(size=(6, 3))], tokens=tokens))
    text = trace._repr_html_()
    assert "<script" not in text.lower() and "<b>&amp;" not in text
    page = Page(text)
    assert page.tags <= {"div", "style", "b", "br", "span", "code", "nav", "a", "details", "summary", "table", "tr",
                         "th", "td"}
    assert all(t[:20] in "".join(page.text) for t in tokens)   # whole up to 24 characters (test_long_labels)


@pytest.fixture(scope="module")
def big():
    """Many tokens and heads: the page draws a corner of the first head's steps only."""
    rng = np.random.default_rng(1)
    heads, n, d, dk = 8, 40, 32, 8
    scenario = tracer.from_arrays(x=rng.normal(size=(n, d)), q=list(rng.normal(size=(heads, d, dk))),
                                  k=list(rng.normal(size=(heads, d, dk))), v=list(rng.normal(size=(heads, d, dk))),
                                  o=rng.normal(size=(heads * dk, d)), mask="causal", name="big")
    trace = tracer.run(scenario)
    return trace, trace._repr_html_()


def test_a_big_trace_draws_a_corner_and_says_what_is_left_out(big):
    from tracer.html import MAX_SIDE
    trace, text = big
    page = Page(text)
    drawn = set(page.details)
    assert {"x", "h0.weights", "out"} <= drawn and "h7.weights" not in drawn
    assert page.links == [s.id for s in trace.steps if s.id in drawn]
    left = [s.id for s in trace.steps if s.id not in drawn]
    joined = "".join(page.text)
    assert f"{len(left)} steps" in joined and f'trace.show("{left[0]}")' in joined
    assert np.shape(page.numbers("h0.weights")) == (MAX_SIDE, MAX_SIDE)
    assert 'Showing rows 0–15 of 40 and columns 0–15 of 40; the whole step: trace.show("h0.weights")' in joined
    want = trace["h0.weights"][:MAX_SIDE, :MAX_SIDE]   # four significant digits, as the TUI writes them
    got = np.array([[float(t.replace("−", "-")) for t in row] for row in page.numbers("h0.weights")])
    np.testing.assert_allclose(got, want, rtol=5e-4, atol=0)
    assert len(text) < 2_000_000


def test_repr_is_one_line_and_show_draws_svg(by_hand):
    trace, _ = by_hand
    assert repr(trace) == "<Trace by_hand: 4 tokens, 1 head, 10 steps, arithmetic by-hand, layout columns>"
    assert repr(trace.scenario) == "<Scenario by_hand: 4 tokens, d_model 6, 1 head of d_k 3, mask none>"
    pytest.importorskip("matplotlib")
    picture = trace.show("h0.weights")
    svg = picture._repr_svg_()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "27/46" in svg
    assert "worksheet" in repr(trace.show("h0.q", figure="worksheet"))
    with pytest.raises(tracer.ScenarioError, match="unknown step 'h9.weights'"):
        trace.show("h9.weights")
    with pytest.raises(tracer.ScenarioError, match="--figure: expected one of heatmap, worksheet, lines"):
        trace.show("h0.weights", figure="pie")


def test_show_of_a_step_too_large_to_draw_is_refused_from_its_size(tmp_path, monkeypatch):
    """A heatmap costs matplotlib ~70 bytes a cell: a step too large for memory was a MemoryError
    from inside the drawing; it is refused from the steps' sizes, before computing or drawing."""
    from tracer import figures, memory
    path = tmp_path / "wide.toml"
    path.write_text("[random]\nseed = 1\ntokens = 2000\nd_model = 4\nheads = 2\nd_k = 2\n")
    trace = tracer.run(path, lazy=True)
    monkeypatch.setattr(memory, "physical_memory", lambda: 2**30)
    monkeypatch.setattr(memory, "available_memory", lambda: 2**27)   # 128 MiB free: 4M cells will not draw
    monkeypatch.setattr(figures, "figure_svg", lambda *a, **k: pytest.fail("drew before refusing"))
    for steps in ("h0.weights", None, ["h0.scores", "h1.scores"]):
        with pytest.raises(tracer.ScenarioError, match=r"^step: drawing h[01]\.\w+(, h1\.\w+)? \((4|8),000,000 cells\) "
                                                       r"needs about [\d.]+ GiB, more than this machine can hold"):
            trace.show(steps)


# ---------------------------------------------------------------- a real browser
@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None or DRIVER is None:
        pytest.skip("no chromium/chromedriver (CI installs Debian's chromium and chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1000,900"):
        options.add_argument(arg)
    b = webdriver.Chrome(options=options, service=Service(DRIVER))
    yield b
    b.quit()


# a notebook front end's page: its own colours for each theme, the trace's HTML inside
FRONT = ("<!doctype html><meta charset=utf-8><style>body{background:#fff;color:#222}"
         "@media (prefers-color-scheme:dark){body{background:#1e1e1e;color:#ddd}}</style><body>%s</body>")
# JupyterLab's dark theme: a dark page whatever the system's preference, its own link colour
DARK_LAB = ("<!doctype html><meta charset=utf-8><style>body{background:#111;color:#ddd;"
            "--jp-content-link-color:#64b5f6}</style><body>%s</body>")


def _pixels(png: bytes) -> np.ndarray:
    import matplotlib.image
    return matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]


def _luminance(css: str) -> float:
    r, g, b = (float(v) / 255 for v in css[css.index("(") + 1:css.index(")")].split(",")[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.mark.parametrize("theme, front", [("light", FRONT), ("dark", FRONT), ("light", DARK_LAB)],
                         ids=["light", "dark", "jupyterlab-dark"])
def test_chromium_draws_it_readable_in_both_themes(browser, by_hand, tmp_path, theme, front):
    pytest.importorskip("matplotlib")
    _, text = by_hand
    page = tmp_path / "page.html"
    page.write_text(front % text, encoding="utf-8")
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme",
                                                                         "value": theme}]})
    browser.get(page.as_uri())
    assert browser.execute_script("return matchMedia('(prefers-color-scheme: dark)').matches") == (theme == "dark")
    pixels = _pixels(browser.get_screenshot_as_png())
    colours = np.unique((pixels.reshape(-1, 3) * 255).round().astype(np.int64) @ [1 << 16, 1 << 8, 1])
    assert pixels.std() > 0.05 and len(colours) > 50, "a blank page"
    background = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
    inks = browser.execute_script("return [...document.querySelectorAll('.attnsim summary, .attnsim nav a')]"
                                  ".map(e => [e.textContent, getComputedStyle(e).color])")
    assert len(inks) == 2 * 10
    for text, ink in inks:
        assert abs(_luminance(ink) - _luminance(background)) > 0.4, (theme, text, ink, background)
    cells = browser.execute_script("return [...document.querySelectorAll('details[open] td')].map(e => [e.textContent,"
                                   " getComputedStyle(e).color, getComputedStyle(e).backgroundColor, e.offsetWidth])")
    assert len(cells) == 6 * 4 + 4 * 4   # x and the weights, open from the start
    for text, ink, fill, width in cells:   # drawn, and each cell's ink stands out from its own colour
        assert width > 10 and abs(_luminance(ink) - _luminance(fill)) > 0.3, text


def test_the_step_list_opens_the_step_it_names(browser, by_hand, tmp_path):
    """No script: a link to a closed step's `<details>` opens it (the browser does, on the fragment)."""
    from selenium.webdriver.common.by import By
    _, text = by_hand
    page = tmp_path / "page.html"
    page.write_text(FRONT % text, encoding="utf-8")
    browser.get(page.as_uri())
    scores = browser.find_element(By.CSS_SELECTOR, "details[data-step='h0.scores']")
    assert scores.get_attribute("open") is None
    browser.find_element(By.LINK_TEXT, "h0.scores").click()
    assert scores.get_attribute("open") is not None
    assert scores.find_element(By.CSS_SELECTOR, "td").is_displayed()


# ---------------------------------------------------------------- generated scenarios
def _value(text: str) -> float:
    text = text.replace("−", "-")
    return -np.inf if text == "-∞" else float(Fraction(text)) if "/" in text else float(text)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(2, 5), st.integers(2, 4), st.sampled_from(["rows", "columns"]), st.sampled_from(["none", "causal"]),
       st.sampled_from(["by-hand", "exact"]), st.integers(0, 2**32 - 1))
def test_every_cell_drawn_is_the_references(n, d, layout, mask, preset, seed):
    """Small integer scenarios: each drawn number (a fraction where by-hand makes one, else four
    significant digits) is the independent reference's value (tests/reference.py)."""
    import reference
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, size=(n, d))
    w = [rng.integers(-1, 2, size=(d, 2)) for _ in range(3)]
    orient = (lambda m: m.T) if layout == "columns" else (lambda m: m)
    scenario = tracer.from_arrays(x=orient(x), q=[orient(w[0])], k=[orient(w[1])], v=[orient(w[2])],
                                  layout=layout, mask=mask)
    trace = tracer.run(scenario, arithmetic=preset)
    want = reference.attention(orient(x), [orient(w[0])], [orient(w[1])], [orient(w[2])], layout=layout, mask=mask,
                               **reference.PRESETS[preset])
    page = Page(trace._repr_html_())
    assert list(page.details) == [s.id for s in trace.steps]
    checked = 0
    for sid, expected in want.items():
        if sid in page.details:
            got = np.array([[_value(t) for t in row] for row in page.numbers(sid)])
            np.testing.assert_allclose(got, expected, rtol=5e-4, atol=1e-12, err_msg=sid)
            checked += 1
    assert checked >= 8
    if preset == "by-hand":   # a fraction written is the reference's value, exactly
        texts = [t for row in page.numbers("h0.weights") for t in row]
        for t, r in zip(texts, want["h0.weights"].ravel()):
            if "/" in t:
                assert float(Fraction(t)) == pytest.approx(r, rel=1e-12, abs=0), t
