// Runs a BertViz view's drawing function once d3 and jQuery exist (attnlib.views.html.runner).
// The libraries come with the notebook's first view (window.attnlibBertviz); a notebook front end may run
// that output after this one, so this polls (every 50 ms, after 2 s every 250 ms, for up to 5 minutes)
// and, while they are missing, says why in the view. Once drawn, attnlibAccess (access.js) adds
// keyboard operation, names and the fit to the column.
function attnlibRun(rootId, kind, render) {
  var note = null;
  function attempt(tries) {
    var libs = window.attnlibBertviz;
    if (libs) {
      if (note) { note.remove(); }
      render(libs.$, libs.d3);
      attnlibAccess(document.getElementById(rootId), kind);
      return;
    }
    var root = document.getElementById(rootId);
    if (tries === 40 && root) {
      note = document.createElement('p');
      note.textContent = 'This BertViz view needs d3 and jQuery, which the first view of the notebook carries. '
        + 'Run that cell, or this one with include_libraries=True.';
      root.appendChild(note);
    }
    if (tries < 1200) { setTimeout(function () { attempt(tries + 1); }, tries < 40 ? 50 : 250); }
  }
  attempt(0);
}
