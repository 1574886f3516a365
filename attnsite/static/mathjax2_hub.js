// The ipywidgets html-manager typesets widget labels with MathJax 2's API,
// MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); the site loads MathJax 3, which has no Hub,
// so every widget with a description threw "Cannot read properties of undefined (reading 'Queue')".
// This maps that one call onto MathJax 3's typesetPromise. Loaded (deferred) after MathJax 3 on pages
// that have widgets; attnsite/vendor_assets.py adds it.
(function () {
  "use strict";
  var mathjax = window.MathJax;
  if (!mathjax || mathjax.Hub || !mathjax.startup) {
    return;
  }
  function typeset(element) {
    return mathjax.startup.promise
      .then(function () { return mathjax.typesetPromise([element]); })
      .catch(function (error) { console.warn("MathJax could not typeset a widget label:", error); });
  }
  mathjax.Hub = {
    Queue: function () {
      Array.prototype.forEach.call(arguments, function (job) {
        if (Array.isArray(job) && job[0] === "Typeset" && job[2]) {
          typeset(job[2]);
        }
      });
    },
  };
})();
