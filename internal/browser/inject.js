// inject.js is Berth's page-understanding script. dom.go evaluates it in
// Berth's isolated world ("berth") of a tab's main frame, where page scripts
// can neither see it nor change the built-ins it uses. It installs one
// object, globalThis.__berth, once per document (evaluating it again is a
// no-op), with these entry points:
//
//   begin({base, forget})  continue ref numbers after base; forget the refs
//                          of the latest snapshot when forget is set
//   snapshot({maxDepth, maxElements, maxBytes})
//                          the accessibility-style YAML of the page, with refs
//   locate(target)         find exactly one element, scroll it into view and
//                          describe it; take() then hands the element over
//   count(target)          how many elements match
//   boxes({max})           the boxes of the latest snapshot's refs
//
// Frames: same-origin iframes are walked through contentDocument from this
// world (Chromium gives each frame a context of the same isolated world, so
// frames' own scripts cannot interfere either). Cross-origin iframes live in
// another process and are out of reach: the snapshot shows them as
// `- iframe "title" [cross-origin]` with no content, and a target cannot
// name them. Open shadow roots are walked as children of their host (slots
// show what is assigned to them); closed shadow roots are out of reach.
//
// Failures come back as {error: {reason, count, detail, field, nth}};
// dom.go turns them into errcode errors that name the target.
(() => {
  'use strict';
  if (globalThis.__berth) return 'present';

  // Per-document state of the world.
  const state = {
    seq: 0,                 // highest element ref number issued
    frameSeq: 0,            // highest frame number issued
    refOf: new WeakMap(),   // Element -> {ref, key}: keeps refs stable
    frameOf: new WeakMap(), // iframe Element -> frame number
    latest: new Map(),      // ref -> Element, of the latest snapshot
    located: null,          // the element of the last locate, until take()
  };

  // Tags never rendered, and never searched for text.
  const SKIP = new Set(['script', 'style', 'noscript', 'template', 'head', 'title',
    'meta', 'link', 'base', 'param', 'source', 'track', 'datalist']);
  // Tags whose text is a block of its own (text query and names).
  const BLOCK = new Set(['address', 'article', 'aside', 'blockquote', 'dd', 'details', 'dialog',
    'div', 'dl', 'dt', 'fieldset', 'figcaption', 'figure', 'footer', 'form', 'h1', 'h2', 'h3',
    'h4', 'h5', 'h6', 'header', 'hr', 'li', 'main', 'nav', 'ol', 'p', 'pre', 'section', 'summary',
    'table', 'tbody', 'td', 'tfoot', 'th', 'thead', 'tr', 'ul', 'option', 'caption', 'legend']);
  // Roles that get a ref: the user can act on them.
  const INTERACTIVE = new Set(['button', 'link', 'textbox', 'searchbox', 'checkbox', 'radio',
    'combobox', 'listbox', 'option', 'slider', 'spinbutton', 'switch', 'tab', 'menuitem',
    'menuitemcheckbox', 'menuitemradio', 'treeitem', 'gridcell']);
  // Roles whose accessible name may come from their content (ARIA 1.2).
  const FROM_CONTENT = new Set(['button', 'link', 'heading', 'cell', 'gridcell', 'columnheader',
    'rowheader', 'option', 'tab', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'treeitem',
    'checkbox', 'radio', 'switch', 'row', 'tooltip', 'term']);
  // Roles with no meaning of their own: their content is spliced into the
  // parent's so that the YAML stays compact.
  const COLLAPSE = new Set(['', 'generic', 'none', 'presentation', 'rowgroup', 'caption']);
  // Roles that may show a checked state.
  const CHECKABLE = new Set(['checkbox', 'radio', 'switch', 'menuitemcheckbox', 'menuitemradio', 'option', 'treeitem']);
  // Input types edited as text.
  const TEXT_INPUTS = new Set(['text', 'search', 'email', 'tel', 'url', 'password', 'number',
    'date', 'datetime-local', 'month', 'week', 'time']);
  // Elements :disabled can match (form-associated custom elements have a
  // dash in their name).
  const MAY_DISABLE = new Set(['button', 'input', 'select', 'textarea', 'optgroup', 'option', 'fieldset', 'output', 'object']);
  const REF_RE = /^(?:f(\d+))?e(\d+)$/;
  const MAX_NAME = 150;
  const MAX_TEXT = 1000;
  const MAX_URL = 500;
  const MAX_DOM_DEPTH = 512; // recursion guard, whatever the options say

  // Computed styles. style(el) is {cs, display, visibility, cursor}: the
  // element's CSSStyleDeclaration, and the properties most callers read,
  // read once per call (styles cannot change while our synchronous code
  // runs; a read computes the value again), cursor only when cursorOf asks.
  // A CSSStyleDeclaration is live, so each element's is kept with its
  // record while the element lives (some 120 bytes an element): making
  // them anew on every call made a large page's snapshots slower, the
  // garbage collector having thousands more objects to deal with each time.
  const styles = new WeakMap(); // Element -> record
  let calls = 0; // calls so far
  let call = 0;  // the current call (the record's values are of it), 0 between calls
  function style(el) {
    let s = styles.get(el);
    if (!s) {
      s = { cs: el.ownerDocument.defaultView.getComputedStyle(el), call: -1, display: '', visibility: '', cursor: null };
      styles.set(el, s);
    }
    if (s.call !== call || call === 0) {
      const cs = s.cs;
      s.call = call;
      s.display = cs.display;
      s.visibility = cs.visibility;
      s.cursor = null;
    }
    return s;
  }
  function cursorOf(s) {
    if (s.cursor === null) s.cursor = s.cs.cursor;
    return s.cursor;
  }
  let roles = null; // table Element -> role, for the length of one call
  function withCaches(fn) {
    call = ++calls;
    roles = new Map();
    try {
      return fn();
    } finally {
      call = 0;
      roles = null;
    }
  }

  // norm collapses whitespace runs to one space and trims. Most strings
  // need no more than trimming spaces: a scan finds that, and the regular
  // expression does the rest.
  function norm(s) {
    s = String(s);
    let i = 0, j = s.length;
    while (i < j && s.charCodeAt(i) === 32) i++;
    while (j > i && s.charCodeAt(j - 1) === 32) j--;
    for (let k = i, space = false; k < j; k++) {
      const c = s.charCodeAt(k);
      if (c === 32) {
        if (space) return normSlow(s);
        space = true;
      } else if (c < 32 || (c >= 0x7f && mayBeSpace(c))) {
        return normSlow(s);
      } else {
        space = false;
      }
    }
    return i === 0 && j === s.length ? s : s.slice(i, j);
  }
  function normSlow(s) { return s.replace(/\s+/g, ' ').trim(); }
  // mayBeSpace holds for every character \s matches above U+007F (and a
  // few more, which the slow path then leaves alone).
  function mayBeSpace(c) {
    return c === 0xa0 || c === 0x1680 || c === 0x180e || (c >= 0x2000 && c <= 0x200a) ||
      c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
  }
  function cap(s, n) { return s.length > n ? s.slice(0, n - 1) + '…' : s; }
  function attr(el, name) { const v = el.getAttribute(name); return v === null ? '' : v; }

  // composedChildren are the nodes rendered inside n: a shadow host's
  // shadow tree, a slot's assigned nodes (or its fallback content), or
  // plain children.
  function composedChildren(n) {
    if (n.nodeType === 1) {
      if (n.shadowRoot) return n.shadowRoot.childNodes;
      if (n.localName === 'slot') {
        const a = n.assignedNodes();
        return a.length ? a : n.childNodes;
      }
    }
    return n.childNodes;
  }

  // The hot walks go through composedChildren without a NodeList (its
  // iterator costs a call into the DOM per step): slotted(n) is a slot's
  // assigned nodes when it has some, else null, and then the children are
  // firstComposed(n) and its nextSiblings.
  function slotted(n) {
    if (n.localName !== 'slot' || n.nodeType !== 1 || n.shadowRoot) return null;
    const a = n.assignedNodes();
    return a.length ? a : null;
  }
  function firstComposed(n) { return (n.nodeType === 1 && n.shadowRoot || n).firstChild; }

  // childByTag is el's first child element named tag.
  function childByTag(el, tag) {
    for (let c = el.firstElementChild; c; c = c.nextElementSibling) if (c.localName === tag) return c;
    return null;
  }

  // ---- Roles ----

  function inputType(el) { return (el.type || 'text').toLowerCase(); }

  function explicitRole(el) {
    const a = el.getAttribute('role');
    if (!a) return '';
    const r = a.trim().toLowerCase().split(/\s+/)[0];
    return r === 'none' ? 'presentation' : r;
  }

  // Roles implied by the tag alone.
  const TAG_ROLES = new Map([
    ['button', 'button'], ['option', 'option'], ['optgroup', 'group'], ['textarea', 'textbox'],
    ['h1', 'heading'], ['h2', 'heading'], ['h3', 'heading'], ['h4', 'heading'], ['h5', 'heading'], ['h6', 'heading'],
    ['ul', 'list'], ['ol', 'list'], ['menu', 'list'], ['li', 'listitem'], ['table', 'table'], ['tr', 'row'],
    ['thead', 'rowgroup'], ['tbody', 'rowgroup'], ['tfoot', 'rowgroup'], ['caption', 'caption'],
    ['nav', 'navigation'], ['main', 'main'], ['aside', 'complementary'], ['article', 'article'],
    ['form', 'form'], ['dialog', 'dialog'], ['search', 'search'], ['details', 'group'], ['summary', 'button'],
    ['fieldset', 'group'], ['p', 'paragraph'], ['blockquote', 'blockquote'], ['hr', 'separator'],
    ['progress', 'progressbar'], ['meter', 'meter'], ['output', 'status'], ['figure', 'figure'],
    ['iframe', 'iframe'], ['frame', 'iframe'],
  ]);

  function implicitRole(el) {
    const tag = el.localName;
    const fixed = TAG_ROLES.get(tag);
    if (fixed !== undefined) return fixed;
    switch (tag) {
      case 'a': case 'area': return el.hasAttribute('href') ? 'link' : '';
      case 'input': {
        const t = inputType(el);
        switch (t) {
          case 'button': case 'submit': case 'reset': case 'image': case 'file': case 'color': return 'button';
          case 'checkbox': return 'checkbox';
          case 'radio': return 'radio';
          case 'range': return 'slider';
          case 'number': return 'spinbutton';
          case 'hidden': return '';
          case 'search': return el.hasAttribute('list') ? 'combobox' : 'searchbox';
          default: return el.hasAttribute('list') ? 'combobox' : 'textbox';
        }
      }
      case 'select': return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
      case 'img': return el.getAttribute('alt') === '' ? 'presentation' : 'img';
      case 'td': {
        let t = el.parentElement; // el.closest('table'), without the selector
        while (t && t.localName !== 'table') t = t.parentElement;
        const tr = t ? roleOf(t) : '';
        return tr === 'grid' || tr === 'treegrid' ? 'gridcell' : 'cell';
      }
      case 'th': return headerCellRole(el);
      case 'header': case 'footer':
        if (el.parentElement && el.parentElement.closest('article,aside,main,nav,section,[role=article],[role=complementary],[role=main],[role=navigation],[role=region]')) return '';
        return tag === 'header' ? 'banner' : 'contentinfo';
      case 'section': return el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby') ? 'region' : '';
    }
    if (isEditingHost(el)) return 'textbox';
    return '';
  }

  function headerCellRole(th) {
    const scope = attr(th, 'scope').toLowerCase();
    if (scope === 'row' || scope === 'rowgroup') return 'rowheader';
    if (scope === 'col' || scope === 'colgroup') return 'columnheader';
    const tr = th.parentElement;
    if (tr && tr.parentElement && tr.parentElement.localName === 'thead') return 'columnheader';
    // A th leading a row of data cells heads that row.
    if (tr && tr.firstElementChild === th) {
      for (let c = th.nextElementSibling; c; c = c.nextElementSibling) {
        if (c.localName === 'td') return 'rowheader';
      }
    }
    return 'columnheader';
  }

  function isEditingHost(el) {
    return el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable);
  }

  // roleOf is the element's ARIA role: the role attribute, else the role
  // its tag, type and attributes imply; '' when it has none.
  function roleOf(el) {
    // Only a table's role is asked for again and again (by its cells).
    if (!roles || el.localName !== 'table') return explicitRole(el) || implicitRole(el);
    let r = roles.get(el);
    if (r === undefined) {
      r = explicitRole(el) || implicitRole(el);
      roles.set(el, r);
    }
    return r;
  }

  // ---- Accessible names ----

  // nameOf computes the accessible name: aria-labelledby, aria-label, the
  // native label (label elements, alt, legend, caption, value of input
  // buttons...), content for roles that take their name from it, then
  // title and placeholder. A simplified accname: no CSS generated content.
  // content, when a string, is contentText(el, null) already.
  function nameOf(el, role, content) {
    // Most elements have no attribute at all: skip the reads.
    const attrs = el.hasAttributes();
    const ids = attrs ? attr(el, 'aria-labelledby').trim() : '';
    if (ids) {
      const root = el.getRootNode();
      const parts = [];
      for (const id of ids.split(/\s+/)) {
        const ref = root.getElementById ? root.getElementById(id) : el.ownerDocument.getElementById(id);
        if (ref) parts.push(attr(ref, 'aria-label').trim() || contentText(ref, null));
      }
      const s = norm(parts.join(' '));
      if (s) return s;
    }
    const label = attrs ? norm(attr(el, 'aria-label')) : '';
    if (label) return label;
    const tag = el.localName;
    if (tag === 'input') {
      const t = inputType(el);
      if (t === 'button' || t === 'submit' || t === 'reset') {
        return norm(el.value) || (t === 'submit' ? 'Submit' : t === 'reset' ? 'Reset' : '');
      }
      if (t === 'image') return norm(attr(el, 'alt') || el.value || attr(el, 'title')) || 'Submit';
    }
    if (tag !== 'button' && el.labels && el.labels.length) {
      const s = norm(Array.from(el.labels, l => contentText(l, el)).join(' '));
      if (s) return s;
    }
    switch (tag) {
      case 'img': case 'area': {
        const s = norm(attr(el, 'alt'));
        if (s) return s;
        break;
      }
      case 'fieldset': {
        const lg = childByTag(el, 'legend');
        if (lg) { const s = contentText(lg, null); if (s) return s; }
        break;
      }
      case 'table': {
        const cp = childByTag(el, 'caption');
        if (cp) { const s = contentText(cp, null); if (s) return s; }
        break;
      }
      case 'figure': {
        const fc = childByTag(el, 'figcaption');
        if (fc) { const s = contentText(fc, null); if (s) return s; }
        break;
      }
      case 'optgroup': return norm(attr(el, 'label'));
      case 'option': return norm(el.label);
      case 'svg': {
        const t = childByTag(el, 'title');
        if (t) return norm(t.textContent);
        break;
      }
    }
    if (FROM_CONTENT.has(role) || (tag === 'button' && role === 'button')) {
      const s = typeof content === 'string' ? content : contentText(el, null);
      if (s) return s;
    }
    if (tag === 'button' && el.labels && el.labels.length) {
      const s = norm(Array.from(el.labels, l => contentText(l, el)).join(' '));
      if (s) return s;
    }
    if (!attrs) return '';
    const title = norm(attr(el, 'title'));
    if (title) return title;
    return norm(attr(el, 'placeholder') || attr(el, 'aria-placeholder'));
  }

  // hiddenForText reports an element whose subtree adds nothing to the
  // text of its ancestors.
  function hiddenForText(el) {
    if (attr(el, 'aria-hidden') === 'true') return true;
    const s = style(el);
    return s.display === 'none' || s.visibility === 'hidden' || s.visibility === 'collapse';
  }

  function selectedText(sel) {
    return Array.from(sel.selectedOptions || [], o => o.label).join(' ');
  }

  // contentText is the text of root's rendered content, whitespace
  // normalized, with alt text for images and values for embedded fields;
  // skip (the field being named by a label) contributes nothing.
  function contentText(root, skip) {
    return norm(textOf(root, root, skip, 0));
  }

  // textOf is what n adds to the text of root, before normalization.
  function textOf(n, root, skip, d) {
    if (d > 64) return '';
    const type = n.nodeType;
    if (type === 3) return n.data;
    if (type !== 1) return type === 11 ? childrenText(n, root, skip, d) : '';
    if (n === skip) return '';
    const tag = n.localName;
    if (SKIP.has(tag)) return '';
    if (n !== root) {
      if (hiddenForText(n)) return '';
      const al = attr(n, 'aria-label').trim();
      if (al) return ' ' + al + ' ';
    }
    switch (tag) {
      case 'br': return ' ';
      case 'img': case 'area': return ' ' + attr(n, 'alt') + ' ';
      case 'svg': {
        const t = childByTag(n, 'title');
        return t ? ' ' + t.textContent + ' ' : '';
      }
      case 'input': {
        const t = inputType(n);
        if (TEXT_INPUTS.has(t) && t !== 'password') return ' ' + (n.value ?? '') + ' ';
        if (t === 'button' || t === 'submit' || t === 'reset') return ' ' + (n.value ?? '') + ' ';
        if (t === 'image') return ' ' + attr(n, 'alt') + ' ';
        return '';
      }
      case 'textarea': return ' ' + (n.value ?? '') + ' ';
      case 'select': return ' ' + selectedText(n) + ' ';
      case 'iframe': case 'frame': return '';
    }
    const s = childrenText(n, root, skip, d);
    return BLOCK.has(tag) ? ' ' + s + ' ' : s;
  }

  function childrenText(n, root, skip, d) {
    let s = '';
    const a = slotted(n);
    if (a) {
      for (let i = 0; i < a.length; i++) s += textOf(a[i], root, skip, d + 1);
    } else {
      for (let c = firstComposed(n); c; c = c.nextSibling) s += textOf(c, root, skip, d + 1);
    }
    return s;
  }

  // ---- States ----

  // isDisabled: disabled by the attribute (or a disabled fieldset), or by
  // aria-disabled on the element or an ancestor.
  function isDisabled(el) {
    return (MAY_DISABLE.has(el.localName) || el.localName.includes('-')) && el.matches(':disabled') ||
      !!el.closest('[aria-disabled="true"]');
  }

  function checkedState(el, role) {
    if (el.localName === 'input' && (el.type === 'checkbox' || el.type === 'radio')) {
      return el.indeterminate ? 'mixed' : el.checked;
    }
    const a = attr(el, 'aria-checked');
    if (a === 'true') return true;
    if (a === 'mixed' && role !== 'radio') return 'mixed';
    return false;
  }

  function headingLevel(el) {
    const a = parseInt(attr(el, 'aria-level'), 10);
    if (a > 0) return a;
    const m = /^h([1-6])$/.exec(el.localName);
    return m ? +m[1] : 2;
  }

  // NO_STATES is the states of most nodes, shared.
  const NO_STATES = Object.freeze([]);

  function statesOf(el, role) {
    const s = [];
    if (CHECKABLE.has(role)) {
      const c = checkedState(el, role);
      if (c === true) s.push('checked');
      else if (c === 'mixed') s.push('checked=mixed');
    }
    if (isDisabled(el)) s.push('disabled');
    // Most elements have no attribute at all: skip the aria-* reads.
    const attrs = el.hasAttributes();
    if ((attrs && attr(el, 'aria-expanded') === 'true') ||
        (el.localName === 'summary' && el.parentElement && el.parentElement.localName === 'details' && el.parentElement.open)) {
      s.push('expanded');
    }
    if (role === 'heading') s.push('level=' + headingLevel(el));
    const p = attrs ? attr(el, 'aria-pressed') : '';
    if (p === 'true') s.push('pressed');
    else if (p === 'mixed') s.push('pressed=mixed');
    if ((el.localName === 'option' && el.selected) || (attrs && attr(el, 'aria-selected') === 'true')) s.push('selected');
    if (el.required || (attrs && attr(el, 'aria-required') === 'true')) s.push('required');
    if ((el.readOnly && (el.localName === 'input' || el.localName === 'textarea')) || (attrs && attr(el, 'aria-readonly') === 'true')) s.push('readonly');
    return s.length ? s : NO_STATES;
  }

  // valueOf is what a field shows, for the snapshot ('' when none or
  // secret).
  function valueOf(el, role) {
    const tag = el.localName;
    if (tag === 'textarea') return el.value;
    if (tag === 'input') {
      const t = inputType(el);
      if (t === 'password') return '';
      if (TEXT_INPUTS.has(t) || t === 'range') return el.value;
      return '';
    }
    if (role === 'slider' || role === 'spinbutton' || role === 'progressbar' || role === 'meter') {
      return attr(el, 'aria-valuetext') || attr(el, 'aria-valuenow');
    }
    return '';
  }

  function isEditable(el) {
    if (isDisabled(el)) return false;
    const tag = el.localName;
    if (tag === 'textarea') return !el.readOnly;
    if (tag === 'input') return TEXT_INPUTS.has(inputType(el)) && !el.readOnly;
    return el.isContentEditable;
  }

  // ---- Snapshot ----

  // A walk builds a tree of nodes ({role, name, el, ...}, text strings and
  // BREAK markers between blocks), bounded by depth and node count; render
  // turns it into YAML lines, bounded by bytes, and issues refs.
  const BREAK = {};

  function snapshot(o) {
    return withCaches(() => {
      const cx = {
        maxDepth: o.maxDepth, maxElements: o.maxElements, maxBytes: o.maxBytes,
        nodes: 0, visited: 0, maxVisited: Math.max(o.maxElements * 20, 200000),
        truncated: false, stop: false,
      };
      const doc = document;
      const items = [];
      walkDocument(doc, cx, items, 0, 0, '');
      const latest = new Map();
      const lines = [];
      const r = { bytes: 0, stop: false, refs: 0, latest, lines, cx };
      renderItems(merge(items, false), 0, r);
      if (cx.truncated || r.stop) lines.push('- truncated');
      state.latest = latest;
      return {
        yaml: lines.join('\n') + (lines.length ? '\n' : ''),
        refs: r.refs, truncated: cx.truncated || r.stop,
        url: String(location.href), title: String(doc.title), seq: state.seq,
      };
    });
  }

  function walkDocument(doc, cx, items, depth, domDepth, frame) {
    const root = doc.body || doc.documentElement;
    if (!root) return;
    const env = { frame, inSelect: false, inLabel: false, inInteractive: false, textOn: true, pointer: false };
    walkChildren(root, cx, items, depth, domDepth + 1, env);
  }

  function walkChildren(el, cx, items, depth, domDepth, env) {
    const a = slotted(el);
    if (a) {
      for (let i = 0; i < a.length && !cx.stop; i++) walkNode(a[i], cx, items, depth, domDepth, env);
    } else {
      for (let c = firstComposed(el); c && !cx.stop; c = c.nextSibling) walkNode(c, cx, items, depth, domDepth, env);
    }
  }

  function walkNode(c, cx, items, depth, domDepth, env) {
    const type = c.nodeType;
    if (type === 3) {
      if (env.textOn && !env.inLabel && !env.inSelect) items.push(c.data);
    } else if (type === 1) {
      walkElement(c, cx, items, depth, domDepth, env);
    }
  }

  function clips(cs) { return cs.overflowX !== 'visible' || cs.overflowY !== 'visible'; }

  function walkElement(el, cx, items, depth, domDepth, env) {
    if (++cx.visited > cx.maxVisited || domDepth > MAX_DOM_DEPTH) {
      cx.truncated = true;
      if (cx.visited > cx.maxVisited) cx.stop = true;
      return;
    }
    const tag = el.localName;
    if (SKIP.has(tag)) return;
    if (tag === 'input' && el.type === 'hidden') return;
    if (attr(el, 'aria-hidden') === 'true') return;
    const st = style(el);
    const display = st.display;
    if (display === 'none') return;
    // visibility:hidden hides the element, yet a descendant may show itself
    // again with visibility:visible, so the walk goes on below it.
    let shown = st.visibility === 'visible';
    if (!env.inSelect && display !== 'contents') {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) {
        if (clips(st.cs)) return; // an empty box that clips shows nothing
        shown = false;            // but what overflows it still shows
      }
    }
    if (tag === 'br') { items.push(' '); return; }
    let role = roleOf(el);
    if (tag === 'iframe' || tag === 'frame') {
      if (shown) walkFrame(el, cx, items, depth, domDepth, env);
      return;
    }
    if (tag === 'svg') {
      // SVG insides are drawing, not content: an svg is an img when it is
      // named or looks clickable, and a leaf.
      if (!shown) return;
      const r = role && !COLLAPSE.has(role) ? role : 'img';
      if (r !== 'img' || nameOf(el, 'img') || interactiveHint(el, st, env)) {
        addNode(el, r, cx, items, depth, domDepth, env, st, shown, true);
      }
      return;
    }
    if (tag === 'details' && !el.open && shown) {
      // A closed details shows its summary only.
      const sum = childByTag(el, 'summary');
      const node = newNode('group', cap(nameOf(el, 'group'), MAX_NAME), el, env.frame, false, NO_STATES);
      if (pushNode(cx, items, depth, node) && sum) walkElement(sum, cx, node.items, depth + 1, domDepth + 1, env);
      return;
    }
    addNode(el, role, cx, items, depth, domDepth, env, st, shown, false);
  }

  // newNode is a node of the snapshot tree; every node has the same
  // fields, so that the code reading them sees one shape.
  function newNode(role, name, el, frame, interactive, states) {
    return { role, name, el, frame, interactive, states, url: '', value: '', items: [], frameNode: false, cut: false };
  }

  // pushNode adds node to items, unless a bound says no; what is left out
  // still separates the text around it.
  function pushNode(cx, items, depth, node) {
    if (depth >= cx.maxDepth) { cx.truncated = true; items.push(BREAK); return false; }
    if (cx.nodes >= cx.maxElements) { cx.truncated = true; cx.stop = true; items.push(BREAK); return false; }
    cx.nodes++;
    items.push(node);
    return true;
  }

  // interactiveHint reports an element without an interactive role that
  // still looks clickable: focusable by tabindex, an onclick attribute, or
  // a pointer cursor of its own (not one inherited from its parent).
  function interactiveHint(el, st, env) {
    if (env.inInteractive || el.localName === 'label') return false;
    if (el.hasAttributes()) {
      const ti = el.getAttribute('tabindex');
      if (ti !== null && parseInt(ti, 10) >= 0) return true;
      if (el.hasAttribute('onclick')) return true;
    }
    return cursorOf(st) === 'pointer' && !env.pointer;
  }

  function addNode(el, role, cx, items, depth, domDepth, env, st, shown, leaf) {
    const tag = el.localName;
    let interactive = false;
    if (shown) {
      interactive = role === 'option' && env.inSelect ? false
        : INTERACTIVE.has(role) || interactiveHint(el, st, env);
    }
    // Only interactiveHint reads env.pointer, and never inside an
    // interactive element: there the cursor need not be read.
    const pointer = env.inInteractive || interactive ? env.pointer : cursorOf(st) === 'pointer';
    // A child env only when something changes: most elements share theirs.
    let cenv = env;
    // A label's, legend's or caption's text is the name of what it labels.
    const inLabel = (tag === 'label' && !!el.control) || tag === 'caption' ||
      (tag === 'legend' && !!el.parentElement && el.parentElement.localName === 'fieldset');
    if (shown !== env.textOn || (interactive && !env.inInteractive) || pointer !== env.pointer ||
        (inLabel && !env.inLabel) || tag === 'select') {
      cenv = {
        frame: env.frame,
        inSelect: env.inSelect || tag === 'select',
        inLabel: env.inLabel || inLabel,
        inInteractive: env.inInteractive || interactive,
        textOn: shown,
        pointer,
      };
    }
    if (!shown || (COLLAPSE.has(role) && !interactive) || (role === 'group' && tag !== 'details' && tag !== 'fieldset' && tag !== 'optgroup' && !nameOf(el, role))) {
      // A wrapper: its content joins the parent's, set apart when it is a
      // block of its own.
      const display = st.display;
      const block = display !== 'contents' && !display.startsWith('inline');
      if (block) items.push(BREAK);
      walkChildren(el, cx, items, depth, domDepth + 1, cenv);
      if (block) items.push(BREAK);
      return;
    }
    const node = newNode(COLLAPSE.has(role) ? 'generic' : role, '', el, env.frame, interactive, statesOf(el, role));
    if (role === 'link' && (tag === 'a' || tag === 'area')) {
      const h = typeof el.href === 'string' ? el.href : attr(el, 'href');
      node.url = cap(h, MAX_URL);
    }
    node.value = cap(valueOf(el, role), MAX_TEXT);
    if (!pushNode(cx, items, depth, node)) return;
    let content = null;
    if (leaf || tag === 'input' || tag === 'textarea') {
      // No content of its own.
    } else if (depth + 1 >= cx.maxDepth) {
      // The node's content would nest too deep: leave it out, and say so.
      if (hasContent(el)) cx.truncated = node.cut = true;
    } else {
      walkChildren(el, cx, node.items, depth + 1, domDepth + 1, cenv);
      if (FROM_CONTENT.has(node.role) || tag === 'button') content = walkedText(el, node.items, cx, cenv);
    }
    // The name comes last, to use the text the walk found. A row's name
    // would repeat its cells, which the YAML shows anyway.
    if (role !== 'row') node.name = cap(nameOf(el, node.role, content), MAX_NAME);
  }

  // walkedText is contentText(el, null), from the items the walk of el's
  // children just made, when they hold all of it: el's content is text
  // alone (the most common case by far: buttons, links, cells), and the
  // walk kept it. Else null.
  function walkedText(el, items, cx, env) {
    if (cx.stop || !env.textOn || env.inLabel || env.inSelect || OWN_TEXT.has(el.localName) ||
        el.firstElementChild || el.shadowRoot) return null;
    return norm(items.length === 1 ? items[0] : items.join(''));
  }
  // Tags whose contentText is not the text of their children.
  const OWN_TEXT = new Set(['br', 'img', 'area', 'svg', 'input', 'textarea', 'select', 'iframe', 'frame', 'slot']);

  function hasContent(el) {
    for (const c of composedChildren(el)) {
      if (c.nodeType === 1 || (c.nodeType === 3 && c.data.trim())) return true;
    }
    return false;
  }

  function walkFrame(el, cx, items, depth, domDepth, env) {
    let n = state.frameOf.get(el);
    if (!n) { n = ++state.frameSeq; state.frameOf.set(el, n); }
    const node = newNode('iframe', cap(nameOf(el, 'iframe'), MAX_NAME), el, env.frame, false, NO_STATES);
    node.frameNode = true;
    let doc = null;
    try { doc = el.contentDocument; } catch (e) { doc = null; }
    if (!doc) node.states = ['cross-origin'];
    if (!pushNode(cx, items, depth, node)) return;
    if (doc) walkDocument(doc, cx, node.items, depth + 1, domDepth + 1, 'f' + n);
  }

  // merge joins adjacent text (no BREAK between), normalizes it and drops
  // what is empty, leaving strings and nodes; with dropText, nodes only.
  function merge(items, dropText) {
    const out = [];
    if (!items.length) return out;
    let text = null;
    for (let i = 0; i < items.length; i++) {
      const it = items[i];
      if (typeof it === 'string') {
        if (!dropText) text = text === null ? it : text + it;
      } else if (it === BREAK) {
        if (text !== null) { pushText(out, text); text = null; }
      } else {
        if (text !== null) { pushText(out, text); text = null; }
        out.push(it);
      }
    }
    if (text !== null) pushText(out, text);
    return out;
  }

  function pushText(out, text) {
    const s = norm(text);
    if (s) out.push(cap(s, MAX_TEXT));
  }

  // yamlText writes s as a plain YAML scalar when that is safe, else
  // double-quoted (a JSON string is a valid YAML one).
  function yamlText(s) {
    if (/^[\s\-?:,\[\]{}#&*!|>'"%@`]|: |:$| #|[\x00-\x1f\x7f\u2028\u2029]|\s$/.test(s)) return JSON.stringify(s);
    return s;
  }

  // utf8Len is the length of s in UTF-8 bytes (maxBytes counts those).
  function utf8Len(s) {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdfff) n += 2; // half of a 4-byte pair
      else n += 3;
    }
    return n;
  }

  const TRUNC_RESERVE = '- truncated'.length + 1;
  const INDENTS = [''];

  function emit(r, indent, line) {
    if (r.stop) return false;
    while (INDENTS.length <= indent) INDENTS.push(INDENTS[INDENTS.length - 1] + '  ');
    const s = INDENTS[indent] + line;
    const n = utf8Len(s) + 1;
    if (r.bytes + n + TRUNC_RESERVE > r.cx.maxBytes) { r.stop = true; return false; }
    r.bytes += n;
    r.lines.push(s);
    return true;
  }

  function refFor(node, r) {
    const key = node.role + '\u0000' + node.name;
    let rec = state.refOf.get(node.el);
    if (!rec || rec.key !== key || rec.frame !== node.frame) {
      rec = { ref: node.frame + 'e' + (++state.seq), key, frame: node.frame };
      state.refOf.set(node.el, rec);
    }
    r.latest.set(rec.ref, node.el);
    r.refs++;
    return rec.ref;
  }

  // renderItems renders merged items (strings and nodes).
  function renderItems(items, indent, r) {
    for (let i = 0; i < items.length; i++) {
      if (r.stop) return;
      const it = items[i];
      if (typeof it === 'string') emit(r, indent, '- text: ' + yamlText(it));
      else renderNode(it, indent, r);
    }
  }

  const NO_ITEMS = Object.freeze([]);

  function renderNode(node, indent, r) {
    // Text of a node named by its content is its name already (merge
    // drops it); a row's cells say what its name would.
    let kids = node.items.length ? merge(node.items, FROM_CONTENT.has(node.role)) : NO_ITEMS;
    const showName = node.name && node.role !== 'row';
    if (!node.interactive && !showName && !kids.length && !node.value && !node.frameNode && !node.cut && node.role !== 'separator') return;
    let line = '- ' + node.role;
    if (showName) line += ' ' + JSON.stringify(node.name);
    const states = node.states;
    for (let i = 0; i < states.length; i++) line += ' [' + states[i] + ']';
    if (node.interactive) line += ' [ref=' + refFor(node, r) + ']';
    let inline = node.value;
    if (!inline && !node.url && kids.length === 1 && typeof kids[0] === 'string') {
      inline = kids[0];
      kids = NO_ITEMS;
    }
    if (inline && !node.url && !kids.length) {
      emit(r, indent, line + ': ' + yamlText(inline));
      return;
    }
    if (!node.url && !kids.length) {
      emit(r, indent, line);
      return;
    }
    if (!emit(r, indent, line + ':')) return;
    if (node.url) emit(r, indent + 1, '- /url: ' + yamlText(node.url));
    if (inline) emit(r, indent + 1, '- text: ' + yamlText(inline));
    // The content of a node is merged again, as it always was: text that
    // a BREAK set apart inside a node joins up here (at the top level it
    // stays apart). Only adjacent text needs the second merge.
    renderItems(adjacentText(kids) ? merge(kids, false) : kids, indent + 1, r);
  }

  // adjacentText reports two strings next to each other in merged items.
  function adjacentText(items) {
    for (let i = 1; i < items.length; i++) {
      if (typeof items[i] === 'string' && typeof items[i - 1] === 'string') return true;
    }
    return false;
  }

  // ---- Locating ----

  function fail(reason, extra) { return { error: Object.assign({ reason }, extra || {}) }; }

  // eachDeep calls fn on every element of root's tree and of the open
  // shadow trees inside it, in document order (a shadow tree before its
  // host's children).
  function eachDeep(root, fn) {
    const stack = [root];
    while (stack.length) {
      const n = stack.pop();
      if (n.nodeType === 1) fn(n);
      const kids = n.children;
      if (kids) for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]);
      if (n.nodeType === 1 && n.shadowRoot) stack.push(n.shadowRoot);
    }
  }

  // queryDeep is querySelectorAll through open shadow roots. A selector
  // matches within one tree: combinators do not cross a shadow boundary.
  function queryDeep(doc, selector) {
    const out = [];
    const seen = new Set();
    const roots = [doc];
    eachDeep(doc, el => { if (el.shadowRoot) roots.push(el.shadowRoot); });
    for (const root of roots) {
      for (const el of root.querySelectorAll(selector)) {
        if (!seen.has(el)) { seen.add(el); out.push(el); }
      }
    }
    if (roots.length > 1) out.sort(docOrder);
    return out;
  }

  // docOrder sorts elements of one document, shadow trees included, in
  // composed document order.
  function docOrder(a, b) {
    if (a === b) return 0;
    const pa = composedPath(a), pb = composedPath(b);
    let i = 0;
    while (i < pa.length && i < pb.length && pa[i] === pb[i]) i++;
    if (i === pa.length) return -1; // a contains b
    if (i === pb.length) return 1;
    const x = pa[i], y = pb[i];
    if (x.nodeType === 11) return -1; // a shadow tree comes before light children
    if (y.nodeType === 11) return 1;
    return x.compareDocumentPosition(y) & 4 ? -1 : 1; // DOCUMENT_POSITION_FOLLOWING
  }
  function composedPath(n) {
    const p = [];
    for (let c = n; c; c = c.parentNode || c.host || null) p.push(c);
    return p.reverse();
  }

  // eachRendered calls fn(el) in composed order on every element that is
  // in the accessibility tree (not display:none, not aria-hidden; an
  // element hidden by visibility is skipped, its visible descendants not).
  function eachRendered(doc, fn) {
    const root = doc.body || doc.documentElement;
    if (!root) return;
    const rec = (el, d, inSelect) => {
      if (d > MAX_DOM_DEPTH) return;
      const tag = el.localName;
      if (SKIP.has(tag) || attr(el, 'aria-hidden') === 'true') return;
      const cs = style(el);
      if (cs.display === 'none') return;
      if (cs.visibility === 'visible' || inSelect) fn(el);
      const sel = inSelect || tag === 'select';
      for (const c of composedChildren(el)) if (c.nodeType === 1) rec(c, d + 1, sel);
    };
    rec(root, 0, false);
  }

  function matchText(actual, want, exact) {
    if (exact) return norm(actual) === norm(want);
    return norm(actual).toLowerCase().includes(norm(want).toLowerCase());
  }

  function byRole(doc, t) {
    const want = (t.role || t.value || '').trim().toLowerCase();
    const out = [];
    eachRendered(doc, el => {
      if (roleOf(el) !== want) return;
      if (t.name && !matchText(nameOf(el, want), t.name, t.exact)) return;
      out.push(el);
    });
    return out;
  }

  function byLabel(doc, t) {
    const out = [];
    eachRendered(doc, el => {
      const names = [];
      const ids = attr(el, 'aria-labelledby').trim();
      if (ids) {
        const root = el.getRootNode();
        names.push(ids.split(/\s+/).map(id => {
          const r = root.getElementById ? root.getElementById(id) : null;
          return r ? contentText(r, null) : '';
        }).join(' '));
      }
      if (el.hasAttribute('aria-label')) names.push(attr(el, 'aria-label'));
      if (el.labels && !(el.localName === 'input' && el.type === 'hidden')) {
        for (const l of el.labels) names.push(contentText(l, el));
      }
      if (names.some(n => n && matchText(n, t.value, t.exact))) out.push(el);
    });
    return out;
  }

  // byText finds the innermost rendered elements whose text matches, an
  // input button by its value; an element inside a button or link with
  // the same text stands for that button or link.
  function byText(doc, t) {
    const root = doc.body || doc.documentElement;
    if (!root) return [];
    const found = [];
    // rec returns the text of el's rendered content and whether something
    // inside it matched already.
    const rec = (el, d) => {
      if (d > MAX_DOM_DEPTH) return ['', false];
      const tag = el.localName;
      if (SKIP.has(tag) || attr(el, 'aria-hidden') === 'true') return ['', false];
      const cs = style(el);
      if (cs.display === 'none') return ['', false];
      const shown = cs.visibility === 'visible';
      if (tag === 'input') {
        const ty = inputType(el);
        if (ty === 'button' || ty === 'submit' || ty === 'reset') {
          const v = el.value;
          const hit = shown && matchText(v, t.value, t.exact);
          if (hit) found.push(el);
          return [' ' + v + ' ', hit];
        }
        return ['', false];
      }
      if (tag === 'select' || tag === 'textarea' || tag === 'iframe' || tag === 'frame' || tag === 'svg') return ['', false];
      const parts = [];
      let inner = false;
      const block = BLOCK.has(tag);
      if (tag === 'br') return [' ', false];
      if (block) parts.push(' ');
      for (const c of composedChildren(el)) {
        if (c.nodeType === 3) {
          if (shown) parts.push(c.data);
        } else if (c.nodeType === 1) {
          const [s, hit] = rec(c, d + 1);
          parts.push(s);
          inner = inner || hit;
        }
      }
      if (block) parts.push(' ');
      const text = parts.join('');
      if (!inner && shown && el !== root && matchText(text, t.value, t.exact)) {
        found.push(el);
        return [text, true];
      }
      return [text, inner];
    };
    rec(root, 0);
    const out = [];
    const seen = new Set();
    for (let el of found) {
      const host = el.parentElement && el.parentElement.closest('a[href],button,[role=button],[role=link],[role=tab],[role=menuitem],[role=option],summary,label');
      if (host && host !== el && norm(contentText(host, null)) === norm(contentText(el, null))) el = host;
      if (!seen.has(el)) { seen.add(el); out.push(el); }
    }
    return out;
  }

  // frameDoc follows the target's iframe chain from the top document.
  function frameDoc(t) {
    let doc = document;
    for (const sel of t.frame || []) {
      let els;
      try {
        els = queryDeep(doc, sel).filter(e => e.localName === 'iframe' || e.localName === 'frame');
      } catch (e) {
        return fail('target_invalid', { field: 'frame', detail: 'frame selector ' + JSON.stringify(sel) + ' is not valid CSS: ' + e.message });
      }
      if (!els.length) return fail('frame_not_found', { detail: sel });
      if (els.length > 1) return fail('target_ambiguous', { count: els.length, detail: 'frame ' + sel });
      let d = null;
      try { d = els[0].contentDocument; } catch (e) { d = null; }
      if (!d) return fail('frame_cross_origin', { detail: sel });
      doc = d;
    }
    return { doc };
  }

  function refState(ref) {
    const m = REF_RE.exec(ref || '');
    if (!m) return fail('target_invalid', { field: 'value', detail: 'a ref looks like e12 or f1e3' });
    const el = state.latest.get(ref);
    if (el) {
      const doc = el.ownerDocument;
      if (!el.isConnected || !doc.defaultView || !frameAttached(doc)) return fail('ref_stale', { detail: 'the element is gone' });
      return { els: [el] };
    }
    if (+m[2] <= state.seq) return fail('ref_stale', {});
    return { els: [] };
  }

  // frameAttached reports whether doc is still shown by its chain of
  // iframes up to the top document.
  function frameAttached(doc) {
    for (let w = doc.defaultView; w && w !== window; w = w.parent) {
      const fe = w.frameElement;
      if (!fe || !fe.isConnected || fe.contentDocument !== w.document) return false;
      if (w.parent === w) return false;
    }
    return true;
  }

  // matches returns {els} (all matches, in order) or {error}.
  function matches(t) {
    if ((t.by || '') === 'ref') return refState(t.value);
    const f = frameDoc(t);
    if (f.error) return f;
    const doc = f.doc;
    if (t.selector) {
      try {
        return { els: queryDeep(doc, t.selector) };
      } catch (e) {
        return fail('target_invalid', { field: 'selector', detail: 'not valid CSS: ' + e.message });
      }
    }
    switch (t.by) {
      case 'role': return { els: byRole(doc, t) };
      case 'text': return { els: byText(doc, t) };
      case 'label': return { els: byLabel(doc, t) };
      case 'test_id': case 'testId': {
        const out = [];
        eachDeep(doc, el => { if (el.getAttribute('data-testid') === t.value) out.push(el); });
        return { els: out };
      }
    }
    return fail('target_invalid', { field: 'by', detail: 'unknown by' });
  }

  function pick(t, m) {
    if (m.error) return m;
    const els = m.els;
    if (t.nth !== undefined && t.nth !== null) {
      if (t.nth >= els.length) return fail('target_not_found', { count: els.length, nth: true });
      return { el: els[t.nth] };
    }
    if (!els.length) return fail('target_not_found', { count: 0 });
    if (els.length > 1) return fail('target_ambiguous', { count: els.length });
    return { el: els[0] };
  }

  function count(t) {
    return withCaches(() => {
      const m = matches(t);
      if (m.error) return m;
      if (t.nth !== undefined && t.nth !== null) return { count: t.nth < m.els.length ? 1 : 0 };
      return { count: m.els.length };
    });
  }

  // inView reports whether el, and each iframe holding it, lies wholly
  // inside the viewport of its window.
  function inView(el) {
    for (let e = el; e;) {
      const w = e.ownerDocument.defaultView;
      const r = e.getBoundingClientRect();
      if (r.top < 0 || r.left < 0 || r.bottom > w.innerHeight || r.right > w.innerWidth) return false;
      e = w === window ? null : w.frameElement;
    }
    return true;
  }

  function locate(t) {
    state.located = null;
    return withCaches(() => {
      const p = pick(t, matches(t));
      if (p.error) return p;
      const el = p.el;
      if (!inView(el)) el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      // The center, in the top viewport: add the content-box offset of
      // each iframe on the way up.
      const r = el.getBoundingClientRect();
      let x = r.left + r.width / 2, y = r.top + r.height / 2;
      let visible = r.width > 0 && r.height > 0 && el.checkVisibility({ visibilityProperty: true });
      for (let w = el.ownerDocument.defaultView; w && w !== window; w = w.parent) {
        const fe = w.frameElement;
        if (!fe) break;
        const fr = fe.getBoundingClientRect();
        const fs = style(fe).cs;
        x += fr.left + fe.clientLeft + (parseFloat(fs.paddingLeft) || 0);
        y += fr.top + fe.clientTop + (parseFloat(fs.paddingTop) || 0);
        visible = visible && fr.width > 0 && fr.height > 0 && fe.checkVisibility({ visibilityProperty: true });
      }
      if (el.localName === 'option') {
        // Options of a closed select have no box: the select stands in.
        const sel = el.closest('select');
        if (sel) visible = sel.checkVisibility({ visibilityProperty: true });
      }
      const role = roleOf(el);
      state.located = el;
      return {
        x, y, visible, enabled: !isDisabled(el), editable: isEditable(el),
        tag: el.localName,
        type: el.localName === 'input' ? inputType(el) : el.localName === 'button' ? el.type : '',
        role, name: cap(nameOf(el, role), MAX_NAME),
      };
    });
  }

  function take() {
    const el = state.located;
    state.located = null;
    return el;
  }

  // boxes answers the box of each ref of the latest snapshot (the first
  // o.max), in top-viewport CSS pixels (iframe offsets added) without
  // scrolling: [x, y, width, height], rounded.
  function boxes(o) {
    const out = {};
    let n = 0, truncated = false;
    for (const [ref, el] of state.latest) {
      if (n >= o.max) { truncated = true; break; }
      if (!el.isConnected) continue;
      const r = el.getBoundingClientRect();
      let x = r.left, y = r.top;
      for (let w = el.ownerDocument.defaultView; w && w !== window; w = w.parent) {
        const fe = w.frameElement;
        if (!fe) break;
        const fr = fe.getBoundingClientRect();
        const fs = style(fe).cs;
        x += fr.left + fe.clientLeft + (parseFloat(fs.paddingLeft) || 0);
        y += fr.top + fe.clientTop + (parseFloat(fs.paddingTop) || 0);
      }
      out[ref] = [Math.round(x), Math.round(y), Math.round(r.width), Math.round(r.height)];
      n++;
    }
    return { boxes: out, truncated };
  }

  function begin(o) {
    if (o.base > state.seq) state.seq = o.base;
    if (o.forget) state.latest = new Map();
    return state.seq;
  }

  Object.defineProperty(globalThis, '__berth', {
    value: Object.freeze({ begin, snapshot, locate, take, count, boxes }),
    configurable: false, enumerable: false, writable: false,
  });
  return 'installed';
})()
