"""The website's build side: what turns ``book/`` into the published site, kept out of ``attnlib`` on purpose.

``attnlib`` is what chapters and students import; this package is what ``make book`` and ``make pdf`` run.
It imports ``attnlib`` and ``attncourse`` for their contracts (the PNG text keys, the views' vendored-script
marker, the induction head's settings; the nbgrader markers) and copies none of them.

Sphinx extensions (``_config.yml`` lists them under ``sphinx: extra_extensions`` by module name):

``attnsite.vendor_assets``   the npm libraries served by the site itself (``site_assets`` lists them), Font
                             Awesome cut to the icons in use (``fontawesome_subset``), the views' inlined d3
                             and jQuery swapped for those copies
``attnsite.nbgrader_site``   the student and instructor editions of the exercises
``attnsite.live_model``      chapter 6's model in the reader's browser (``live_export``: the ONNX export;
                             ``live_views``: BertViz's views for the page)
``attnsite.live_induction``  chapter 9's induction head in the reader's browser
``attnsite.a11y``            figures' text alternatives, ARIA fixes, phone reflow and print CSS
``attnsite.quiz``            quick checks (the ``{quiz}`` fence, read by ``attncourse.quick_checks``) on the page
``attnsite.typeset_math``    the formulas typeset by MathJax (in node: ``typeset_math.js``) when the site is built

``python -m attnsite.print_book`` prints the built site into the PDF editions (``make pdf``). ``sources``
derives the build caches' keys from the code they depend on. ``static/`` holds the site's own CSS and
JavaScript (package data), copied into the built site's ``_static/``. A new part of the build (a
visual check of every page) is a new module here, registered in ``_config.yml`` the same way.
"""
