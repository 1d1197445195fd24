"""A class in Chromium: one teacher and three students, each in a browser context of their own
(their own cookies, as on their own machines).

The students open the students' link the teacher's page shows; their pages follow the
teacher's keys in teaching mode; one explores on their own (the form theirs, the teacher's
count of followers one less) and comes back to the teacher's current step; a student who
joins late lands on the current step; a student's page asking a teacher's route gets 403.
"""

from __future__ import annotations

import pytest

from glassformer.workshop.server import create_app
from tests.class_browsers import PHONE_VIEW, Person, join, teach
from tests.test_workshop_page import char_lm
from tests.workshop_server import serving, wait_until


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    app = create_app({"tiny": char_lm()}, runs_root=tmp_path_factory.mktemp("runs"), classroom=True)
    with serving(app) as url:
        yield url


def test_three_students_follow_branch_come_back_and_a_late_one_lands_on_the_step(browser, server, tmp_path):
    teacher, link = teach(browser, server, "model=tiny&text=the+cat+sat&level=intermediate&lock=1")

    students = [join(browser, link) for _ in range(3)]
    people = teacher.page.locator(".class-people")
    wait_until(teacher.page, "document.querySelector('.class-people')?.dataset.following === '3'")
    assert people.get_attribute("data-connected") == "3"
    for student in students:  # the teacher's prompt, in teaching mode, the form locked
        assert student.page.inner_text("#prompt-shown") == "the cat sat"
        assert student.page.is_disabled("#text")

    for _ in range(3):  # the teacher's keys: each student's page moves with them
        teacher.page.keyboard.press("ArrowRight")
    teacher.wait_step(4)
    for student in students:
        student.wait_step(4)
        assert student.page.is_disabled(".reveal-next")  # the teacher's keys move it, not theirs

    explorer = students[0]  # branches: the form is theirs, the teacher counts one follower less
    explorer.page.click(".class-switch")
    wait_until(explorer.page, "document.body.dataset.class === 'exploring'")
    # the switch closes one stream and opens another: between the two the counts read 2 and 2
    settled = "(p => p?.dataset.following === '2' && p?.dataset.connected === '3')"
    wait_until(teacher.page, f"{settled}(document.querySelector('.class-people'))")
    explorer.page.fill("#text", "a dog ran")
    explorer.page.click("#run")
    wait_until(explorer.page, "new URLSearchParams(location.search).get('text') === 'a dog ran'")

    teacher.page.keyboard.press("ArrowRight")
    for student in students[1:]:
        student.wait_step(5)
    assert new_text(explorer) == "a dog ran"  # the teacher's step moved no one exploring

    explorer.page.click(".class-switch")  # back to the teacher: the teacher's text and step
    explorer.wait_step(5)
    wait_until(explorer.page, "document.querySelector('#prompt-shown').textContent === 'the cat sat'")
    wait_until(teacher.page, "document.querySelector('.class-people')?.dataset.following === '3'")

    late = join(browser, link, PHONE_VIEW)  # lands where the class is
    late.wait_step(5)
    wait_until(teacher.page, "document.querySelector('.class-people')?.dataset.connected === '4'")

    refused = late.page.evaluate(
        """async () => {
          const body = JSON.stringify({preset: 'induction', fields: {}});
          const headers = {'content-type': 'application/json'};
          const r = await fetch('api/lab/start', {method: 'POST', headers, body});
          return [r.status, (await r.json()).error];
        }"""
    )
    assert refused == [403, "this needs the teacher's link"]
    late.errors = [e for e in late.errors if "403" not in e]  # the refusal the page asked for

    teacher.shot(tmp_path, "class_teacher_1280")
    students[1].shot(tmp_path, "class_student_following_1280")
    late.shot(tmp_path, "class_student_following_390")
    for person in (late, *students, teacher):
        person.close()


def new_text(person: Person) -> str:
    return person.page.evaluate("new URLSearchParams(location.search).get('text')")
