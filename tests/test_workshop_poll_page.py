"""The class's poll in Chromium: a teacher and two students, each in a browser context of
their own. The teacher asks "what comes next?", the students guess (one in Chinese, shown as
text), the teacher sees the counts beside the model's top tokens and reveals the model's
token, which both students then see beside the class's counts."""

from __future__ import annotations

import pytest

from glassformer.workshop.server import create_app
from tests.class_browsers import PHONE_VIEW, Person, join, teach
from tests.test_workshop_page import char_lm
from tests.workshop_server import serving, wait_until

TEXT = "the cat sat"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    app = create_app({"tiny": char_lm()}, runs_root=tmp_path_factory.mktemp("runs"), classroom=True)
    with serving(app) as url:
        yield url


def send_guess(student: Person, text: str) -> None:
    """The keyboard only: the guess typed into the card's field, Enter sends it."""
    wait_until(student.page, "document.querySelector('.poll-student')?.dataset.open === 'true'")
    student.page.focus(".poll-input")
    student.page.keyboard.insert_text(text)
    student.page.keyboard.press("Enter")
    wait_until(student.page, "document.querySelector('.poll-status')?.textContent.startsWith('your guess')")


def test_the_class_guesses_the_next_token_and_the_teacher_reveals_it(browser, server, tmp_path):
    teacher, link = teach(browser, server, "model=tiny&text=the+cat+sat&level=beginner&lock=1")
    students = [join(browser, link), join(browser, link, PHONE_VIEW)]
    wait_until(teacher.page, "document.querySelector('.class-people')?.dataset.following === '2'")

    teacher.page.click(".poll-ask")
    wait_until(teacher.page, "document.querySelector('.poll-teacher')?.dataset.open === 'true'")
    assert teacher.page.locator(".poll-model .poll-bar").count() == 10
    send_guess(students[0], "mat")
    send_guess(students[1], "猫")
    for student in students:
        assert student.page.inner_text(".poll-question") == f"What comes next after \u201c{TEXT}\u201d?"
        assert student.page.locator(".poll-model").count() == 0  # no distribution before the reveal
    assert "猫" in students[1].page.inner_text(".poll-status")

    wait_until(teacher.page, "document.querySelector('.poll-teacher')?.dataset.answers === '2'")
    wait_until(teacher.page, "document.querySelectorAll('.poll-guesses .poll-bar').length === 2")
    labels = teacher.page.locator(".poll-guesses .poll-label").all_inner_texts()
    assert sorted(labels) == ["mat", "猫"]
    assert "no token" in teacher.page.inner_text(".poll-guesses")  # 猫: not in its alphabet
    teacher.shot(tmp_path, "poll_teacher_guesses_1280", ".poll-teacher")

    teacher.page.click(".poll-reveal")
    wait_until(teacher.page, "document.querySelector('.poll-teacher')?.dataset.revealed !== ''")
    drawn = teacher.page.get_attribute(".poll-teacher", "data-revealed")
    for student in students:
        wait_until(student.page, "document.querySelector('.poll-student')?.dataset.revealed !== ''")
        assert student.page.get_attribute(".poll-student", "data-revealed") == drawn
        assert student.page.locator(".poll-model .poll-bar").count() == 10
        assert student.page.locator(".poll-guesses .poll-bar").count() == 2
        assert student.page.is_hidden(".poll-form")
    assert "You did not guess" not in students[1].page.inner_text(".poll-answer")

    teacher.shot(tmp_path, "poll_teacher_revealed_1280", ".poll-teacher")
    students[1].shot(tmp_path, "poll_student_revealed_390", ".poll-student")
    for person in (*students, teacher):
        person.close()
