        // Added by attnlib.views.neuron inside BertViz's neuron_view.js, before its final render():
        // a visible, keyboard-operable expand control, focusable query tokens, titles on the score cells.
        // `config`, `showExpanded`, `showCollapsed` and `d3` are BertViz's own names in that function.
        // The layout that fits the column: BertViz's constants MATRIX_WIDTH and BOXWIDTH come from these two, and
        // attnlibFit scales the drawing down where even the narrowest layout is wider (a phone).
        // (functions, not variables: BertViz's constants call them before this code's statements run)
        function attnlibScoreRoom() { return 24; }  // px more for the score column, headed "q · k / √d"
        function attnlibMinText() { return 9; }  // px: the drawing is never scaled below this size of its text
        function attnlibRoot() { return document.getElementById(config.rootDivId); }
        function attnlibAvailable() {
            var box = attnlibRoot().querySelector('.attnlib-neuron-scroll') || attnlibRoot();
            return Math.max(box.clientWidth, 240);
        }
        function attnlibBoxWidth() {  // the token columns: the longest token, its margin and the ± icon
            var context = document.createElement('canvas').getContext('2d');
            context.font = '15px ' + getComputedStyle(attnlibRoot()).fontFamily;
            var tokens = config.attention[config.filter].left_text, widest = 0;
            tokens.forEach(function (t) { widest = Math.max(widest, context.measureText(t).width); });
            return Math.min(120, Math.ceil(widest) + 36);
        }
        function attnlibFixedWidth(boxWidth) {  // everything of the expanded layout but the three vector columns
            return 2 * boxWidth + 5 * 25 + 12.5 + 26 + attnlibScoreRoom();
        }
        function attnlibMatrixWidth() {
            var free = attnlibAvailable() - attnlibFixedWidth(attnlibBoxWidth()) - 4;
            return Math.max(48, Math.min(200, Math.floor(free / 3)));
        }
        function attnlibFit(svg, height) {
            var width = Math.ceil(attnlibFixedWidth(BOXWIDTH) + 3 * MATRIX_WIDTH) + 4;
            var scale = Math.max(Math.min(1, attnlibAvailable() / width), attnlibMinText() / TEXT_SIZE);
            svg.attr('viewBox', '0 0 ' + width + ' ' + height)
               .attr('width', Math.floor(width * scale)).attr('height', Math.ceil(height * scale));
        }
        function attnlibSync(expanded) {
            var button = attnlibRoot().querySelector('.attnlib-expand');
            button.setAttribute('aria-pressed', expanded ? 'true' : 'false');
            button.textContent = expanded ? '\u2212 Hide q, k and the scores' : '+ Show q, k and the scores';
            // one Tab stop per token: those of the panel shown (the other panel's copies are hidden)
            ['#expanded', '#collapsed'].forEach(function (panel) {
                var shown = (panel === '#expanded') === expanded;
                attnlibRoot().querySelectorAll(panel + ' #leftText > g').forEach(function (g) {
                    g.setAttribute('tabindex', shown ? '0' : '-1');
                    if (shown) { g.removeAttribute('aria-hidden'); } else { g.setAttribute('aria-hidden', 'true'); }
                });
            });
        }
        function attnlibToggle() {
            var index = config.index;
            config.expanded = !config.expanded;
            if (config.expanded) { showExpanded(); } else { showCollapsed(); }
            if (index != null) {  // the focused token's twin in the panel now shown keeps the selection
                var panel = config.expanded ? '#expanded' : '#collapsed';
                var twin = attnlibRoot().querySelectorAll(panel + ' #leftText > g')[index];
                if (twin) { twin.focus(); }
            }
        }
        function attnlibKeyboard() {
            var groups = attnlibRoot().querySelectorAll('#leftText > g');
            groups.forEach(function (g) {
                var token = g.querySelector('text').textContent;
                g.setAttribute('tabindex', g.closest('#expanded') && !config.expanded ? '-1' : '0');
                g.setAttribute('role', 'button');
                g.setAttribute('aria-label', 'query ' + token + ': show its scores (Enter: expand or collapse)');
                g.addEventListener('focus', function () { g.dispatchEvent(new MouseEvent('mouseover')); });
                g.addEventListener('blur', function () { g.dispatchEvent(new MouseEvent('mouseleave')); });
                g.addEventListener('keydown', function (e) {
                    if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); attnlibToggle(); }
                });
            });
        }
        function attnlibTitles(svg, scores, att) {
            var keys = config.attention[config.filter].right_text;
            svg.select('#dotproducts').selectAll('.dotproduct').each(function (d, i) {
                var title = d3.select(this).select('title');
                if (title.empty()) { title = d3.select(this).append('title'); }
                title.text(keys[i] + ': q \u00B7 k / \u221Ad = ' + scores[i].toFixed(3)
                           + ', softmax weight ' + att[i].toFixed(3));
            });
        }
        attnlibRoot().querySelector('.attnlib-expand').addEventListener('click', attnlibToggle);
