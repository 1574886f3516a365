/*
 * induction-live.js: chapter 9's live induction head. The chapter's trained 2-layer attention-only
 * transformer (attnlib.induction.AttentionOnlyTransformer) runs in plain JavaScript on a token sequence
 * the reader types; every head's attention weights are drawn as a table.
 *
 * The weights (float32, exported by attnsite/live_induction.py) are downloaded from this site when Run
 * is first pressed; the arithmetic is float64. Entry point for tests and readers:
 *
 *   window.attnlibInduction.attend(text) -> Promise of {tokens, ids, attentions, logits, predictions}
 *
 * with attentions[layer][head][query][key] (0 where the causal mask forbids) and logits[position][token].
 * Symbols reach the page only through textContent.
 */
(function () {
  'use strict';

  const manifest = window.attnlibInductionManifest || null;
  const here = document.currentScript ? document.currentScript.src : document.baseURI;
  const siteRoot = new URL('../../', here); // this file is <site>/_static/_live/induction-live.js
  const memory = { model: null };

  class InputError extends Error {}

  function decode(entry) {
    // base64 little-endian float32 -> {shape, data: Float64Array}
    const bytes = Uint8Array.from(atob(entry.data), (c) => c.charCodeAt(0));
    const view = new DataView(bytes.buffer);
    const data = new Float64Array(bytes.length / 4);
    for (let i = 0; i < data.length; i += 1) data[i] = view.getFloat32(4 * i, true);
    return { shape: entry.shape, data };
  }

  async function loadModel() {
    if (memory.model) return memory.model;
    if (location.protocol === 'file:') {
      throw new Error('this page was opened as a file (file://), and browsers do not fetch the weights from ' +
        'files. Serve the book instead: run `make serve` in the repository and open http://127.0.0.1:8000/.');
    }
    if (!manifest) throw new Error('The page has no model manifest: build the book with attnsite/live_induction.py.');
    const response = await fetch(new URL(manifest.model, siteRoot), { credentials: 'same-origin' });
    if (!response.ok) throw new Error(`Could not download ${manifest.model} (HTTP ${response.status}).`);
    const raw = await response.json();
    const w = raw.weights;
    memory.model = {
      ...raw,
      embed: decode(w.embed), position: decode(w.position), unembed: decode(w.unembed),
      layers: w.layers.map((layer) => Object.fromEntries(Object.entries(layer).map(([k, v]) => [k, decode(v)]))),
    };
    return memory.model;
  }

  function parse(text, model) {
    // "ABCAB", "A B C" or "A, B, C": letters in either case and the digits 0-5, one character per symbol (spaces
    // and commas only separate them: "hello world" is H E L L O W O R L D); returns the token ids
    const trimmed = text.trim().toUpperCase();
    if (!trimmed) throw new InputError('The box is empty: type a sequence of symbols, e.g. W O R K W O R K.');
    const symbols = Array.from(trimmed.replace(/[\s,]+/g, ''));
    const bad = symbols.findIndex((s) => !model.symbols.includes(s));
    if (bad >= 0) {
      throw new InputError(`Expected symbols from A–Z and 0–5 (the model's ${model.symbols.length} tokens, one ` +
        `character each; spaces and commas only separate them), got “${symbols[bad]}” as symbol ${bad + 1}.`);
    }
    if (symbols.length > model.max_length) {
      throw new InputError(`Expected at most ${model.max_length} symbols (the model's positions), ` +
        `got ${symbols.length}.`);
    }
    return { tokens: symbols, ids: symbols.map((s) => model.symbols.indexOf(s)) };
  }

  function linear(x, weight) {
    // x: rows of length in; weight (out, in) as torch's Linear stores it -> rows of length out
    const [out, inner] = weight.shape;
    return x.map((row) => {
      const y = new Float64Array(out);
      for (let o = 0; o < out; o += 1) {
        let sum = 0;
        for (let i = 0; i < inner; i += 1) sum += row[i] * weight.data[o * inner + i];
        y[o] = sum;
      }
      return y;
    });
  }

  function headAttention(q, k, v, head, width) {
    // one head's causal softmax(q k^T / sqrt(width)) and its weighted sum of values, on features head*width..
    const length = q.length;
    const offset = head * width;
    const weights = [];
    const output = [];
    for (let t = 0; t < length; t += 1) {
      const scores = new Float64Array(length).fill(-Infinity);
      for (let j = 0; j <= t; j += 1) {
        let dot = 0;
        for (let d = 0; d < width; d += 1) dot += q[t][offset + d] * k[j][offset + d];
        scores[j] = dot / Math.sqrt(width);
      }
      const top = Math.max(...scores.slice(0, t + 1));
      const exps = scores.map((s) => (Number.isFinite(s) ? Math.exp(s - top) : 0));
      const total = exps.reduce((a, b) => a + b, 0);
      const row = exps.map((e) => e / total);
      const out = new Float64Array(width);
      for (let j = 0; j <= t; j += 1) for (let d = 0; d < width; d += 1) out[d] += row[j] * v[j][offset + d];
      weights.push(Array.from(row));
      output.push(out);
    }
    return { weights, output };
  }

  function forward(model, ids) {
    // tokens (L,) -> {attentions (layers, H, L, L), logits (L, vocab)}, as AttentionOnlyTransformer.forward
    const d = model.d_model;
    const width = d / model.num_heads;
    let x = ids.map((id, p) => {
      const row = new Float64Array(d);
      for (let i = 0; i < d; i += 1) row[i] = model.embed.data[id * d + i] + model.position.data[p * d + i];
      return row;
    });
    const attentions = [];
    for (const layer of model.layers) {
      const [q, k, v] = ['q_proj', 'k_proj', 'v_proj'].map((name) => linear(x, layer[name]));
      const heads = Array.from({ length: model.num_heads }, (_, h) => headAttention(q, k, v, h, width));
      const merged = x.map((_, t) => {
        const row = new Float64Array(d);
        heads.forEach((head, h) => row.set(head.output[t], h * width));
        return row;
      });
      const out = linear(merged, layer.out_proj);
      x = x.map((row, t) => row.map((value, i) => value + out[t][i])); // the residual stream
      attentions.push(heads.map((head) => head.weights));
    }
    return { attentions, logits: linear(x, model.unembed).map((row) => Array.from(row)) };
  }

  async function attend(text) {
    const model = await loadModel();
    const { tokens, ids } = parse(text, model);
    const { attentions, logits } = forward(model, ids);
    const predictions = logits.map((row) => model.symbols[row.indexOf(Math.max(...row))]);
    return { tokens, ids, attentions, logits, predictions, roles: model.roles };
  }

  // --- drawing ---------------------------------------------------------------------------------------

  function luminance(rgb) {
    const [r, g, b] = rgb.map((c) => { const s = c / 255; return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  }

  function cellColours(weight) {
    // white -> dark blue (one hue: readable with colour-vision deficiencies); text black or white, the higher contrast
    const rgb = [255, 255, 255].map((c, i) => Math.round(c + ([8, 48, 107][i] - c) * weight));
    const light = luminance(rgb);
    const text = (light + 0.05) / 0.05 >= 1.05 / (light + 0.05) ? '#000' : '#fff';
    return { background: `rgb(${rgb.join(',')})`, text };
  }

  function el(tag, text) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function headName(role) {
    return `Layer ${role.layer}, head ${role.head}` + (role.role ? `: the ${role.role}` : '');
  }

  function table(result, layer, head, role) {
    const grid = el('table');
    grid.className = 'attnlib-induction-grid';
    grid.append(el('caption', `${headName(role)} (chapter scores: previous-token ${role.previous.toFixed(2)}, ` +
      `induction ${role.induction.toFixed(2)} against a positional floor of ${role.floor.toFixed(2)}). ` +
      'Row: query position; column: key; weight in hundredths.'));
    const header = el('tr');
    header.append(el('th', 'query \\ key'));
    result.tokens.forEach((s, j) => { const th = el('th', `${j + 1} ${s}`); th.scope = 'col'; header.append(th); });
    grid.append(header);
    result.attentions[layer][head].forEach((row, t) => {
      const tr = el('tr');
      const th = el('th', `${t + 1} ${result.tokens[t]}`);
      th.scope = 'row';
      tr.append(th);
      row.forEach((weight, j) => {
        const td = el('td', j <= t ? String(Math.round(100 * weight)) : '');
        if (j <= t) { const c = cellColours(weight); td.style.background = c.background; td.style.color = c.text; }
        tr.append(td);
      });
      grid.append(tr);
    });
    return grid;
  }

  function draw(parts, result) {
    parts.output.replaceChildren();
    const predicted = el('p', 'After each position the model predicts: ' +
      result.predictions.map((s, t) => `${result.tokens[t]}→${s}`).join('  '));
    parts.output.append(predicted);
    result.roles.forEach((role) => {
      const heading = el('h4', headName(role));
      const region = el('div');
      region.className = 'attnlib-induction-scroll';
      region.setAttribute('role', 'region');
      region.setAttribute('aria-label', `${headName(role)}: attention weights`);
      region.tabIndex = 0;
      region.append(table(result, role.layer - 1, role.head, role));
      parts.output.append(heading, region);
    });
    parts.output.hidden = false;
  }

  async function run(parts) {
    parts.root.dataset.state = 'running';
    parts.status.textContent = 'Running…';
    try {
      const result = await attend(parts.text.value);
      draw(parts, result);
      parts.status.textContent = `Done: ${result.tokens.length} tokens, ${result.roles.length} heads drawn below.`;
      parts.root.dataset.state = 'drawn';
    } catch (error) {
      parts.status.textContent = error instanceof InputError ? error.message : `Could not run the model: ${error.message}`;
      parts.root.dataset.state = 'error';
    }
  }

  function init() {
    const get = (name) => document.getElementById(`attnlib-induction-${name}`);
    const root = document.getElementById('attnlib-induction');
    if (!root) return;
    const parts = { root, text: get('text'), run: get('run'), status: get('status'), output: get('output') };
    parts.run.addEventListener('click', () => run(parts));
    parts.text.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') { event.preventDefault(); run(parts); }
    });
    const size = manifest && manifest.bytes ? ` The first run downloads the weights (${Math.round(manifest.bytes / 1e3)} kB) ` +
      'from this site.' : '';
    parts.status.textContent = `Ready: type a sequence and press Run (or Enter in the box).${size}`;
    root.dataset.state = 'ready';
  }

  window.attnlibInduction = { attend, parse, forward };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
}());
