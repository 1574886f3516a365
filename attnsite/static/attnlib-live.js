/*
 * attnlib-live.js: chapter 6's "your own sentence" section. all-MiniLM-L6-v2 runs in the reader's
 * browser (ONNX Runtime Web, single-threaded WebAssembly), tokenized by the model's own tokenizer files
 * (@huggingface/tokenizers), and is drawn with BertViz's head and model views and a table.
 *
 * Nothing is downloaded until Run is pressed; then the runtime, the tokenizer and the model come from
 * this site (never another host) and stay in memory for later runs. The model takes word embeddings, not
 * token ids: the table's rows are in files of manifest.embeddings.rows rows each, and a run fetches only
 * the files its tokens need that no earlier run fetched. Entry point for tests and readers:
 *
 *   window.attnlibLive.attend(text) -> Promise of {tokens, attentions, positions, truncated}
 *
 * with attentions[layer][head][query][key] (output_attentions' layout, batch dropped). Tokens are data:
 * they reach the page only through textContent and d3's .text(). Built by attnsite/live_model.py.
 */
(function () {
  'use strict';

  const manifest = window.attnlibLiveManifest || null;
  const here = document.currentScript ? document.currentScript.src : document.baseURI;
  const siteRoot = new URL('../../', here); // this file is <site>/_static/_live/attnlib-live.js
  const ROOT_PLACEHOLDER = 'attnlib-live-root';
  const MB = 1e6;
  // BertViz draws L * L lines per head: 12 heads of one layer in the head view, all 72 in the model view
  const VIEW_LIMITS = { head: 128, model: 40 };
  const memory = { runtime: null, loading: null, shards: new Map() }; // shard number -> Float32Array of rows
  const timings = {};
  let viewCount = 0;

  class LiveError extends Error {
    constructor(kind, message) {
      super(message);
      this.kind = kind;
    }
  }

  const siteUrl = (path) => new URL(path, siteRoot).href;

  function checkServed() {
    if (location.protocol === 'file:') {
      throw new LiveError('file', 'This page was opened as a file (file://), and browsers do not load ' +
        'WebAssembly from files. Serve the book instead: run `make serve` in the repository and open ' +
        'http://127.0.0.1:8000/ (any static web server works).');
    }
    if (!manifest) {
      throw new LiveError('manifest', 'This page was built without the live model (attnsite/live_model.py).');
    }
  }

  // --- downloading, with progress ----------------------------------------------------------------

  function progressCounter(onProgress) {
    const total = Object.values(manifest.files).reduce((sum, file) => sum + file.bytes, 0);
    let done = 0;
    return (bytes) => {
      done = Math.min(total, done + bytes);
      if (onProgress) { onProgress(done, total); }
    };
  }

  /** ``url`` (from the site root) fetched from this site; a failed request is a LiveError that names it. */
  async function fetchOk(url) {
    let response;
    try {
      response = await fetch(siteUrl(url), { credentials: 'same-origin' });
    } catch (error) {
      throw new LiveError('fetch', `Could not download ${url} (${error.message || error}).`);
    }
    if (!response.ok) {
      throw new LiveError('fetch', `Could not download ${url} (HTTP ${response.status}).`);
    }
    return response;
  }

  async function download(name, count) {
    const file = manifest.files[name];
    const response = await fetchOk(file.url);
    const reader = response.body.getReader();
    const chunks = [];
    let length = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) { break; }
      chunks.push(value);
      length += value.length;
      count(value.length);
    }
    const bytes = new Uint8Array(length);
    let offset = 0;
    for (const chunk of chunks) {
      bytes.set(chunk, offset);
      offset += chunk.length;
    }
    return file.gzip ? gunzip(bytes) : bytes;
  }

  /** ``bytes`` inflated when they are gzip data (a host that sent them with Content-Encoding already did). */
  async function gunzip(bytes) {
    if (bytes.length < 2 || bytes[0] !== 0x1f || bytes[1] !== 0x8b) { return bytes; }
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  const asJson = (bytes) => JSON.parse(new TextDecoder().decode(bytes));

  async function importModule(name, count) {
    const module = await import(siteUrl(manifest.files[name].url));
    count(manifest.files[name].bytes);
    return module;
  }

  function loadScript(name, count) {
    return new Promise((resolve, reject) => {
      const element = document.createElement('script');
      element.src = siteUrl(manifest.files[name].url);
      element.onload = () => { count(manifest.files[name].bytes); resolve(); };
      element.onerror = () => reject(new LiveError('fetch', `Could not load ${manifest.files[name].url}.`));
      document.head.appendChild(element);
    });
  }

  async function loadRuntime(onProgress) {
    checkServed();
    const count = progressCounter(onProgress);
    const started = performance.now();
    const [ort, tokenizers, wasm, tokenizerJson, tokenizerConfig, model] = await Promise.all([
      importModule('runtime', count), importModule('tokenizers', count), download('wasm', count),
      download('tokenizer', count).then(asJson), download('tokenizer_config', count).then(asJson),
      download('model', count), window.attnlibLiveBertviz ? null : loadScript('views', count),
    ]);
    ort.env.wasm.numThreads = 1; // single-threaded: no cross-origin isolation or special headers needed
    ort.env.wasm.proxy = false;
    ort.env.wasm.wasmBinary = wasm; // downloaded above from this site; the bundle carries its own glue code
    const session = await ort.InferenceSession.create(model, { executionProviders: ['wasm'] });
    const tokenizer = new tokenizers.Tokenizer(tokenizerJson, tokenizerConfig);
    timings.loadMs = performance.now() - started;
    return { ort, session, tokenizer };
  }

  /** The runtime, tokenizer and model session; downloaded on the first call only. */
  function load(onProgress) {
    if (memory.runtime) { return Promise.resolve(memory.runtime); }
    if (!memory.loading) {
      memory.loading = loadRuntime(onProgress).then((runtime) => {
        memory.runtime = runtime;
        return runtime;
      }, (error) => {
        memory.loading = null;
        throw error;
      });
    }
    return memory.loading;
  }

  // --- the model --------------------------------------------------------------------------------

  /** Token ids of ``text`` with [CLS] and [SEP], cut to the model's 512 positions (as Python's truncation). */
  function encode(tokenizer, text) {
    const encoded = tokenizer.encode(text);
    let ids = Array.from(encoded.ids, Number);
    let tokens = Array.from(encoded.tokens, String);
    const positions = ids.length;
    const limit = manifest.max_positions;
    if (positions > limit) { // keep [CLS] and the first limit - 2 tokens, end with [SEP]
      ids = ids.slice(0, limit - 1).concat(ids.slice(-1));
      tokens = tokens.slice(0, limit - 1).concat(tokens.slice(-1));
    }
    return { ids, tokens, positions, truncated: positions > limit };
  }

  /** (1, H, L, L) tensor data -> nested arrays [head][query][key] of numbers. */
  function nested(tensor) {
    const [, heads, rows, cols] = tensor.dims;
    const data = tensor.data;
    const out = [];
    for (let h = 0; h < heads; h++) {
      const head = [];
      for (let i = 0; i < rows; i++) {
        const start = (h * rows + i) * cols;
        head.push(Array.from(data.subarray(start, start + cols)));
      }
      out.push(head);
    }
    return out;
  }

  async function fetchShard(number) {
    const response = await fetchOk(`${manifest.embeddings.url}${number}.bin`);
    return new Float32Array(await response.arrayBuffer()); // little-endian float32, as every browser's
  }

  /** The word-embedding rows of ``ids`` (L ids) as one Float32Array of L * D values, row after row. */
  async function embed(ids, onProgress) {
    const { rows, width, bytes } = manifest.embeddings;
    const missing = Array.from(new Set(ids.map((id) => Math.floor(id / rows))))
      .filter((number) => !memory.shards.has(number));
    let done = 0;
    await Promise.all(missing.map(async (number) => {
      const shard = await fetchShard(number);
      memory.shards.set(number, shard);
      done += shard.byteLength;
      if (onProgress) { onProgress(done, missing.length * bytes, 'words'); }
    }));
    const out = new Float32Array(ids.length * width);
    ids.forEach((id, i) => {
      const start = (id % rows) * width;
      out.set(memory.shards.get(Math.floor(id / rows)).subarray(start, start + width), i * width);
    });
    return out;
  }

  /** Every layer's attention for ``text``: {tokens, attentions[layer][head][query][key], positions, truncated}. */
  async function attend(text, onProgress) {
    if (typeof text !== 'string' || text.trim() === '') {
      throw new LiveError('empty', 'Type a sentence first: the text box is empty.');
    }
    const { ort, session, tokenizer } = await load(onProgress);
    const { ids, tokens, positions, truncated } = encode(tokenizer, text);
    const rows = await embed(ids, onProgress);
    const started = performance.now();
    const input = new ort.Tensor('float32', rows, [1, ids.length, manifest.embeddings.width]);
    const outputs = await session.run({ [manifest.input]: input });
    const attentions = session.outputNames.map((name) => nested(outputs[name]));
    timings.runMs = performance.now() - started;
    return { tokens, attentions, positions, truncated };
  }

  // --- drawing ------------------------------------------------------------------------------------

  /** BertViz's d3 and jQuery: the chapter's own views put them in window.attnlibBertviz; else the site's copies. */
  async function bertvizLibraries() {
    if (window.attnlibBertviz) { return window.attnlibBertviz; }
    const hadD3 = 'd3' in window;
    const pageD3 = window.d3;
    for (const path of ['_static/_vendor/d3.min.js', '_static/_vendor/jquery.min.js']) {
      const source = await (await fetch(siteUrl(path), { credentials: 'same-origin' })).text();
      // hide an AMD loader (require.js) so that the UMD bundles set their globals
      new Function('define', 'module', 'exports', source).call(window); // eslint-disable-line no-new-func
    }
    const libraries = { d3: window.d3, $: window.jQuery.noConflict(true) };
    if (hadD3) { window.d3 = pageD3; } else { delete window.d3; }
    window.attnlibBertviz = libraries;
    return libraries;
  }

  const range = (n) => Array.from({ length: n }, (_, i) => i);

  function drawBertviz(kind, container, tokens, attentions, libraries) {
    const template = window.attnlibLiveBertviz[kind];
    const id = `attnlib-live-${kind}-${++viewCount}`;
    container.innerHTML = template.markup.replace(ROOT_PLACEHOLDER, id); // BertViz's fixed markup, no data
    const params = Object.assign({}, template.params, {
      attention: [{ name: null, attn: attentions, left_text: tokens, right_text: tokens }],
      root_div_id: id,
      include_layers: range(attentions.length),
    });
    if (kind === 'model') {
      Object.assign(params, { display_mode: 'light', include_heads: range(attentions[0].length),
        total_heads: attentions[0].length });
    } else {
      Object.assign(params, staticChoice(attentions.length, attentions[0].length));
    }
    template.draw(libraries.$, libraries.d3, params);
    const select = container.querySelector('select');
    if (select) { select.setAttribute('aria-label', 'Layer shown in the head view'); }
    // the chapter's own views' keyboard use, names, and the model view scaled to the column (viewBox)
    window.attnlibLiveBertviz.access(document.getElementById(id), kind);
  }

  /**
   * The layer and head the chapter's own (static) head view opens on, read from its controls, so the live view
   * opens on the same head: BertViz's default (layer 0, all heads overlaid) is a tangle of 12 colours.
   */
  function staticChoice(layers, heads) {
    const root = document.querySelector('[id^="attnlib-head-"]');
    const select = root && root.querySelector('select#layer');
    const layer = select ? Number(select.value) : NaN;
    const shown = root ? Array.from(root.querySelectorAll('[role="switch"][aria-checked="true"]'))
      .map((s) => Number((s.getAttribute('aria-label') || '').split(' ')[1])) : [];
    const choice = {};
    if (Number.isInteger(layer) && layer >= 0 && layer < layers) { choice.layer = layer; }
    const valid = shown.filter((h) => Number.isInteger(h) && h >= 0 && h < heads);
    if (valid.length) { choice.heads = valid; }
    return choice;
  }

  function option(text, value) {
    const element = document.createElement('option');
    element.textContent = text;
    element.value = String(value);
    return element;
  }

  function cell(tag, text, attributes) {
    const element = document.createElement(tag);
    element.textContent = text;
    for (const [name, value] of Object.entries(attributes || {})) { element.setAttribute(name, value); }
    return element;
  }

  /** WCAG relative luminance of an [r, g, b] colour with channels in 0..1. */
  function luminance(rgb) {
    const linear = rgb.map((c) => (c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2];
  }

  /**
   * [background, text colour] of a cell at ``share`` (0..1) of the scale: opaque white to blue, so the
   * contrast does not depend on the page behind it (dark mode), with black or white text, whichever
   * contrasts more (attnlib.views.plots._shade, the chapters' tables).
   */
  function shade(share) {
    const rgb = [31, 119, 180].map((c) => 1 - share * (1 - c / 255));
    const light = luminance(rgb);
    const white = 1.05 / (light + 0.05) > (light + 0.05) / 0.05;
    const hex = rgb.map((c) => Math.round(c * 255).toString(16).padStart(2, '0')).join('');
    return [`#${hex}`, white ? '#fff' : '#000'];
  }

  /** "Who attends to whom": for one layer and one query token, a row per head, a column per key token. */
  function drawTable(parts, result) {
    const layer = Number(parts.layer.value);
    const query = Number(parts.query.value);
    const weights = result.attentions[layer]; // (H, L, L)
    const table = document.createElement('table');
    table.className = 'attnlib-live-grid';
    table.appendChild(cell('caption', `Layer ${layer}: how the token \u201c${result.tokens[query]}\u201d ` +
      `(position ${query}) spreads its attention, one row per head`));
    const header = document.createElement('tr');
    header.appendChild(cell('th', 'head', { scope: 'col' }));
    result.tokens.forEach((token) => header.appendChild(cell('th', token, { scope: 'col' })));
    table.appendChild(header);
    weights.forEach((head, h) => {
      const row = document.createElement('tr');
      row.appendChild(cell('th', `head ${h}`, { scope: 'row' }));
      head[query].forEach((value) => {
        const td = cell('td', value.toFixed(2));
        const [background, text] = shade(Math.min(Math.max(value, 0), 1));
        td.style.background = background;
        td.style.color = text;
        row.appendChild(td);
      });
      table.appendChild(row);
    });
    parts.grid.replaceChildren(table);
  }

  function setUpTable(parts, result) {
    parts.layer.replaceChildren(...result.attentions.map((_, i) => option(`layer ${i}`, i)));
    parts.query.replaceChildren(...result.tokens.map((token, i) => option(`${i}: ${token}`, i)));
    parts.query.value = String(Math.min(1, result.tokens.length - 1));
    parts.layer.onchange = () => drawTable(parts, result);
    parts.query.onchange = () => drawTable(parts, result);
    drawTable(parts, result);
  }

  /**
   * Run ``step`` with the theme's Font Awesome mutation observer paused. It looks for icons in every node
   * added to the page, once per d3 append: 2 s of a 3 s redraw before this. It watches again afterwards.
   */
  function withoutIconWatch(step) {
    const icons = window.FontAwesome;
    const pausable = icons && typeof icons.noAuto === 'function' && icons.dom && typeof icons.dom.watch === 'function' &&
      icons.config && icons.config.observeMutations;
    if (!pausable) { step(); return; }
    icons.noAuto();
    try {
      step();
    } finally {
      icons.dom.watch();
    }
  }

  async function draw(parts, result) {
    const started = performance.now();
    const libraries = await bertvizLibraries();
    timings.librariesMs = performance.now() - started;
    parts.tokens.textContent = result.tokens.join('  ');
    parts.output.hidden = false; // BertViz measures its text: draw into a shown element
    const timed = (name, step) => {
      const begun = performance.now();
      step();
      timings[name] = performance.now() - begun;
    };
    const view = (kind) => {
      const container = parts[kind];
      if (result.tokens.length > VIEW_LIMITS[kind]) { // one SVG line per (head, query, key): too many to draw
        container.replaceChildren(cell('p', `The ${kind} view is drawn for up to ${VIEW_LIMITS[kind]} tokens ` +
          `(it draws a line for every pair of tokens in every head shown); this text has ` +
          `${result.tokens.length}. The table below shows the weights.`));
        return;
      }
      drawBertviz(kind, container, result.tokens, result.attentions, libraries);
    };
    withoutIconWatch(() => {
      timed('headViewMs', () => view('head'));
      timed('modelViewMs', () => view('model'));
      timed('tableMs', () => setUpTable(parts, result));
    });
  }

  // --- the section on the page --------------------------------------------------------------------

  function say(parts, text, isError) {
    parts.status.textContent = text;
    parts.status.classList.toggle('attnlib-live-error', Boolean(isError));
  }

  function showProgress(parts, done, total, what) {
    parts.progress.hidden = false;
    parts.progress.max = total;
    parts.progress.value = done;
    parts.progress.setAttribute('aria-valuetext', `${(done / MB).toFixed(1)} of ${(total / MB).toFixed(1)} MB`);
    const loading = what === 'words' ? 'the word vectors of your sentence' : 'the runtime and the model';
    say(parts, `Loading ${loading}: ${(done / MB).toFixed(1)} of ${(total / MB).toFixed(1)} MB.`);
  }

  async function run(parts) {
    const clicked = performance.now();
    const text = parts.text.value;
    parts.root.dataset.state = 'running';
    parts.button.disabled = true;
    parts.note.textContent = '';
    try {
      const wasLoaded = Boolean(memory.runtime);
      say(parts, wasLoaded ? 'Computing…' : 'Loading the runtime and the model…');
      const result = await attend(text, (done, total, what) => showProgress(parts, done, total, what));
      parts.progress.hidden = true;
      if (result.truncated) {
        parts.note.textContent = `Your text has ${result.positions} tokens with [CLS] and [SEP]; the model ` +
          `reads at most ${manifest.max_positions} positions, so only the first ${manifest.max_positions - 2} ` +
          'tokens were used.';
      }
      const drawing = performance.now();
      await draw(parts, result);
      timings.drawMs = performance.now() - drawing;
      timings.runToDrawnMs = performance.now() - clicked;
      timings.loadedBefore = wasLoaded;
      say(parts, `Computed in your browser: ${result.attentions.length} layers × ` +
        `${result.attentions[0].length} heads over ${result.tokens.length} tokens ` +
        `(${Math.round(timings.runMs)} ms for the model` +
        (wasLoaded ? ').' : `, after ${(timings.loadMs / 1000).toFixed(1)} s to load it).`));
      parts.root.dataset.state = 'drawn';
    } catch (error) {
      parts.progress.hidden = true;
      say(parts, error instanceof LiveError ? error.message : `Something went wrong: ${error.message || error}`, true);
      parts.root.dataset.state = 'error';
    } finally {
      parts.button.disabled = false;
    }
  }

  function describe(parts) {
    if (location.protocol === 'file:') {
      say(parts, 'This page was opened as a file (file://), and browsers do not load WebAssembly from ' +
        'files. Serve the book instead: run `make serve` in the repository and open http://127.0.0.1:8000/.', true);
      return;
    }
    if (manifest) {
      const total = Object.values(manifest.files).reduce((sum, file) => sum + file.bytes, 0);
      const words = manifest.embeddings;
      say(parts, `Nothing has been downloaded yet. Run loads the model and its runtime from this site ` +
        `(${(total / MB).toFixed(0)} MB, once per visit) and the word vectors your sentence needs ` +
        `(${Math.round(words.bytes / 1e3)} kB for each block of ${words.rows} vocabulary entries its tokens ` +
        'fall in), then computes in your browser.');
    }
  }

  function setUp() {
    const root = document.getElementById('attnlib-live');
    if (!root) { return; }
    const get = (name) => document.getElementById(`attnlib-live-${name}`);
    const parts = {
      root, text: get('text'), button: get('run'), progress: get('progress'), status: get('status'),
      note: get('note'), output: get('output'), tokens: get('tokens'), head: get('head'), model: get('model'),
      layer: get('layer'), query: get('query'), grid: get('grid'),
    };
    parts.button.addEventListener('click', () => run(parts));
    parts.text.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        run(parts);
      }
    });
    root.dataset.state = 'ready';
    describe(parts);
  }

  window.attnlibLive = { attend, load, timings, LiveError };
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', setUp);
  } else {
    setUp();
  }
})();
