"""People in a class, for Chromium tests: each a browser context of its own (its own cookies,
as on its own machine), one page, the console errors it logged.

    teacher, students_link = teach(browser, url, "model=tiny&text=the+cat&lock=1")
    student = join(browser, students_link)    # follows the teacher once its page has a walk
"""

from __future__ import annotations

from pathlib import Path

from tests.screenshots import keep_screenshot
from tests.workshop_server import log_in, wait_until

TEACHER_VIEW = {"width": 1280, "height": 720}
PHONE_VIEW = {"width": 390, "height": 844}
STEP = "document.querySelector('.reveal-count')?.textContent ?? ''"  # teaching mode's "step n of N"


class Person:
    """One person's browser: a context of its own, one page, the console errors it logged."""

    def __init__(self, browser, viewport=TEACHER_VIEW) -> None:
        self.context = browser.new_context(viewport=viewport)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def step(self) -> str:
        return self.page.evaluate(f"() => {STEP}")

    def wait_step(self, n: int) -> None:
        wait_until(self.page, f"() => ({STEP}).startsWith('step {n} of')")

    def shot(self, tmp_path: Path, name: str, selector: str | None = None) -> None:
        """The window as the person sees it (``selector`` scrolled into the middle first)."""
        if selector:
            self.page.locator(selector).evaluate("node => node.scrollIntoView({block: 'center'})")
        path = tmp_path / f"{name}.png"
        self.page.screenshot(path=str(path))
        assert path.stat().st_size > 1000
        keep_screenshot(path)

    def close(self) -> None:
        self.context.close()
        assert self.errors == [], self.errors


def join(browser, link: str, viewport=TEACHER_VIEW) -> Person:
    """A student opening the students' link: the page follows the teacher once it has a walk."""
    student = Person(browser, viewport)
    student.page.goto(link)
    following = "document.body.dataset.class === 'following' && document.body.dataset.walks >= 1"
    wait_until(student.page, following)
    return student


def teach(browser, url: str, query: str) -> tuple[Person, str]:
    """The teacher's browser on the class at ``url`` (``query``: the page's settings, e.g.
    "model=tiny&text=the+cat&lock=1"), and the students' link its class panel shows."""
    teacher = Person(browser)
    log_in(teacher.page, url)
    teacher.page.goto(f"{url}?{query}")
    wait_until(teacher.page, "document.querySelector('.class-link')?.value.includes('token=')")
    link = teacher.page.input_value(".class-link")
    assert "token=" in link and link.startswith(url)
    return teacher, link
