        // Added by attnlib.views.neuron inside BertViz's neuron_view.js, before its final render():
        // a visible, keyboard-operable expand control, focusable query tokens, titles on the score cells.
        // `config`, `showExpanded`, `showCollapsed` and `d3` are BertViz's own names in that function.
        function attnlibRoot() { return document.getElementById(config.rootDivId); }
        function attnlibSync(expanded) {
            var button = attnlibRoot().querySelector('.attnlib-expand');
            button.setAttribute('aria-pressed', expanded ? 'true' : 'false');
            button.textContent = expanded ? '\u2212 Hide q, k and the scores' : '+ Show q, k and the scores';
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
                g.setAttribute('tabindex', '0');
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
