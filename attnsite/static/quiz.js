/* Quick checks (attnsite/quiz.py): answer on the page, offline, with a keyboard or a screen reader.
 *
 * Each check is a <form class="attnlib-quiz">: radio buttons (or a text field for a number), a Check button
 * and a role="status" region. On Check, the chosen answer's explanation (from the check's "Answer and
 * explanations" <details>, where all of them are) is copied into the status region, which screen readers
 * announce. Enter on a radio button checks too. window.attnlibQuiz.answersAtEnd() moves every check's
 * <details> under "Answers to the checks" at the end of the page, opened: the print edition's answer key
 * (print_book calls it; a browser's own print does it on "beforeprint" and undoes it after). */
(function () {
  'use strict';

  // "0.25", "0,25", "-3", "\u22123", "98,304", "98 304" and "1e-3" are numbers; anything else is not.
  function parseNumber(text) {
    let cleaned = text.trim().replace(/\u2212/g, '-').replace(/[\s_\u00a0\u202f]+/g, '');
    cleaned = /^[-+]?\d{1,3}(,\d{3})+$/.test(cleaned) ? cleaned.replace(/,/g, '') : cleaned.replace(/,/g, '.');
    if (!/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(cleaned)) { return null; }
    return parseFloat(cleaned);
  }

  function explanations(form) {
    return Array.from(form.querySelectorAll('.attnlib-quiz-explanation'));
  }

  // The explanation that answers what the reader chose, or a message when nothing usable was given.
  function chosen(form) {
    if (form.dataset.kind === 'number') {
      const field = form.querySelector('input[type="text"]');
      const value = parseNumber(field.value);
      if (value === null) {
        return { message: field.value.trim() ? 'Type a number, like 0.25 or -3.' : 'Type a number first.' };
      }
      const hit = explanations(form).find(e => Math.abs(value - parseFloat(e.dataset.value)) <=
                                                 parseFloat(e.dataset.tolerance) * (1 + 1e-9));
      return hit ? { item: hit } : { wrong: true };
    }
    const radio = form.querySelector('input[type="radio"]:checked');
    if (!radio) { return { message: 'Choose an answer first.' }; }
    return { item: explanations(form).find(e => e.dataset.choice === radio.value), radio: radio };
  }

  function feedback(form, result) {
    const status = form.querySelector('.attnlib-quiz-feedback');
    form.querySelectorAll('.attnlib-quiz-choice').forEach(c => c.classList.remove('is-right', 'is-wrong'));
    status.classList.remove('is-right', 'is-wrong');
    status.textContent = '';
    if (result.message) { status.textContent = result.message; return; }
    const right = Boolean(result.item) && result.item.dataset.correct === 'true';
    const verdict = document.createElement('p');
    verdict.className = 'attnlib-quiz-result';
    verdict.textContent = right ? 'Right.' : 'Not quite.';
    status.appendChild(verdict);
    if (result.item) {
      const copy = result.item.cloneNode(true);
      copy.querySelectorAll('[id]').forEach(e => e.removeAttribute('id'));
      // "B. Wrong." says again what the verdict said; "If you got 3.35:" names the slip, and stays
      if (form.dataset.kind !== 'number' || right) { copy.querySelector('.attnlib-quiz-verdict').remove(); }
      copy.classList.remove('attnlib-quiz-explanation');
      copy.removeAttribute('data-correct');
      status.appendChild(copy);
    } else {
      const hint = document.createElement('p');
      hint.textContent = 'That is not the answer, nor a slip the chapter anticipates. Check your arithmetic, ' +
        'or open "Answer and explanations" below.';
      status.appendChild(hint);
    }
    status.classList.add(right ? 'is-right' : 'is-wrong');
    if (result.radio) { result.radio.closest('.attnlib-quiz-choice').classList.add(right ? 'is-right' : 'is-wrong'); }
  }

  function setUp(form) {
    const button = form.querySelector('.attnlib-quiz-check');
    button.hidden = false;
    form.addEventListener('submit', event => { event.preventDefault(); feedback(form, chosen(form)); });
    form.querySelectorAll('input[type="radio"]').forEach(radio => radio.addEventListener('keydown', event => {
      if (event.key === 'Enter') { event.preventDefault(); form.requestSubmit(button); }
    }));
  }

  let moved = [];

  function answersAtEnd() {
    const answers = Array.from(document.querySelectorAll('details.attnlib-quiz-answers'));
    const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
    if (!answers.length || document.querySelector('.attnlib-quiz-key')) { return 0; }
    const key = document.createElement('section');
    key.className = 'attnlib-quiz-key';
    const heading = document.createElement('h2');
    heading.textContent = 'Answers to the checks';
    key.appendChild(heading);
    moved = answers.map(details => {
      const place = document.createComment('attnlib-quiz-answer');
      details.replaceWith(place);
      const form = place.parentNode.closest('form.attnlib-quiz');
      const title = document.createElement('h3');
      title.textContent = form.querySelector('.attnlib-quiz-number').textContent.replace(/\.$/, '');
      details.open = true;
      key.append(title, details);
      return { details: details, place: place, title: title };
    });
    article.appendChild(key);
    return answers.length;
  }

  function answersBack() {
    moved.forEach(m => { m.place.replaceWith(m.details); m.details.open = false; m.title.remove(); });
    moved = [];
    const key = document.querySelector('.attnlib-quiz-key');
    if (key) { key.remove(); }
  }

  window.attnlibQuiz = { answersAtEnd: answersAtEnd, answersBack: answersBack };
  window.addEventListener('beforeprint', answersAtEnd);
  window.addEventListener('afterprint', answersBack);

  function start() {
    document.querySelectorAll('form.attnlib-quiz').forEach(setUp);
  }
  if (document.readyState === 'loading') { document.addEventListener('DOMContentLoaded', start); } else { start(); }
}());
