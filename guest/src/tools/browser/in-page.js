// The snapshot computed in the page, in an isolated world of its own (page
// scripts cannot see or change it), so only the finished lines cross CDP:
// Chromium's full accessibility tree of an 8,000-element page is 9.4 MB of
// JSON, its lines about 0.25 MB (scripts/bench/README.md). Roles and names
// follow the HTML-AAM mappings and accname rules for what pages use most;
// what this does not know is lifted into its parent, never invented.
//
// This file is one expression, embedded as text and evaluated in the page;
// it is plain JavaScript because it runs there, not in the guest. Refs live in the world's `__hutch`:
// element → ref (weakly) and ref → element (a WeakRef), numbered from what
// the guest says is the tab's next number, so a ref is never given twice.
({
  /** `(start, maxLines) => {text, next}`: the lines, and the next ref number. */
  snapshot(start, maxLines) {
    const g = globalThis;
    const st = g.__hutch ?? { byRef: new Map(), refOf: new WeakMap(), next: start };
    g.__hutch = st;
    st.next = Math.max(st.next, start);
    // Frames from another origin met by this snapshot, by the number its marker line names.
    st.frames = [];
    const NAME_MAX = 300;
    const ACTIONABLE = new Set([
      "button",
      "link",
      "textbox",
      "searchbox",
      "checkbox",
      "radio",
      "combobox",
      "listbox",
      "option",
      "menuitem",
      "menuitemcheckbox",
      "menuitemradio",
      "tab",
      "switch",
      "slider",
      "spinbutton",
      "treeitem",
      "iframe",
    ]);
    const FROM_CONTENT = new Set([
      "button",
      "link",
      "heading",
      "option",
      "tab",
      "menuitem",
      "menuitemcheckbox",
      "menuitemradio",
      "treeitem",
      "cell",
      "columnheader",
      "rowheader",
      "switch",
      "tooltip",
      "checkbox",
      "radio",
    ]);
    const FIELDS = new Set(["textbox", "searchbox", "spinbutton", "slider"]);
    const SKIP = new Set(["script", "style", "template", "noscript", "head", "link", "meta", "title"]);
    const INPUT_ROLES = {
      checkbox: "checkbox",
      radio: "radio",
      button: "button",
      submit: "button",
      reset: "button",
      image: "button",
      file: "button",
      range: "slider",
      number: "spinbutton",
      search: "searchbox",
      hidden: null,
    };
    const squash = (s) => s.replace(/\s+/g, " ").trim();
    const cut = (s) => {
      const one = squash(s);
      return one.length > NAME_MAX ? `${one.slice(0, NAME_MAX)}…` : one;
    };

    function roleOf(el) {
      const explicit = el.getAttribute("role");
      if (explicit?.trim()) return explicit.trim().split(/\s+/)[0] ?? null;
      const t = el.localName;
      switch (t) {
        case "a":
        case "area":
          return el.hasAttribute("href") ? "link" : null;
        case "button":
        case "summary":
          return "button";
        case "input": {
          const type = (el.getAttribute("type") ?? "text").toLowerCase();
          if (type in INPUT_ROLES) return INPUT_ROLES[type] ?? null;
          return el.hasAttribute("list") ? "combobox" : "textbox";
        }
        case "textarea":
          return "textbox";
        case "select":
          return el.multiple || el.size > 1 ? "listbox" : "combobox";
        case "option":
          return "option";
        case "h1":
        case "h2":
        case "h3":
        case "h4":
        case "h5":
        case "h6":
          return "heading";
        case "img":
          return el.getAttribute("alt") === "" ? null : "img";
        case "ul":
        case "ol":
        case "menu":
          return "list";
        case "li":
          return "listitem";
        case "nav":
          return "navigation";
        case "main":
          return "main";
        case "aside":
          return "complementary";
        case "form":
          return "form";
        case "dialog":
          return "dialog";
        case "table":
          return "table";
        case "tr":
          return "row";
        case "td":
          return "cell";
        case "th":
          return "columnheader";
        case "p":
          return "paragraph";
        case "iframe":
          return "iframe";
        case "fieldset":
          return "group";
        case "article":
          return "article";
        case "hr":
          return "separator";
        case "progress":
          return "progressbar";
        case "blockquote":
          return "blockquote";
        case "strong":
        case "b":
          return "strong";
        case "em":
        case "i":
          return "emphasis";
        case "code":
          return "code";
        default:
          return null;
      }
    }

    /** Text of a subtree for a name: form fields' own content (a select's options) left out. */
    function textOf(node, skip) {
      let out = "";
      const walk = (n) => {
        if (n.nodeType === 3) out += n.nodeValue ?? "";
        else if (n.nodeType === 1) {
          const e = n;
          if (e === skip || SKIP.has(e.localName) || e.localName === "select" || e.localName === "textarea") return;
          if (e.localName === "input") return;
          if (e.localName === "img") out += ` ${e.getAttribute("alt") ?? ""} `;
          for (const c of e.childNodes) walk(c);
        }
      };
      walk(node);
      return out;
    }

    function nameOf(el, role) {
      const label = el.getAttribute("aria-label");
      if (label?.trim()) return cut(label);
      const by = el.getAttribute("aria-labelledby");
      if (by) {
        const parts = by.split(/\s+/).map((id) => el.ownerDocument.getElementById(id));
        const text = parts.map((p) => (p ? textOf(p) : "")).join(" ");
        if (squash(text)) return cut(text);
      }
      const labels = labelsOf.get(el);
      if (labels && labels.length > 0) {
        const text = [...labels].map((l) => textOf(l, el)).join(" ");
        if (squash(text)) return cut(text);
      }
      const t = el.localName;
      if (t === "img" || (t === "input" && el.getAttribute("type") === "image")) return cut(el.getAttribute("alt") ?? "");
      if (t === "input") {
        const type = (el.getAttribute("type") ?? "").toLowerCase();
        if (type === "submit" || type === "reset" || type === "button")
          return cut(el.value || (type === "reset" ? "Reset" : type === "submit" ? "Submit" : ""));
      }
      if (t === "fieldset") {
        const legend = el.querySelector(":scope > legend");
        if (legend) return cut(textOf(legend));
      }
      if (t === "table") {
        const caption = el.querySelector(":scope > caption");
        if (caption) return cut(textOf(caption));
      }
      if (FROM_CONTENT.has(role)) {
        const text = textOf(el);
        if (squash(text)) return cut(text);
      }
      const title = el.getAttribute("title");
      if (title?.trim()) return cut(title);
      const placeholder = el.getAttribute("placeholder");
      if (placeholder?.trim() && FIELDS.has(role)) return cut(placeholder);
      if (t === "dialog" || role === "dialog") {
        const h = el.querySelector("h1,h2,h3,h4,h5,h6");
        if (h) return cut(textOf(h));
      }
      return "";
    }

    // Labels by their control, built once: Element.labels builds a live list per element, ~0.15 ms each on first use.
    const labelsOf = new Map();
    const labelRoots = [document];
    for (const f of document.querySelectorAll("iframe")) {
      try {
        if (f.contentDocument) labelRoots.push(f.contentDocument);
      } catch {}
    }
    for (const root of labelRoots)
      for (const l of root.querySelectorAll("label")) {
        const control = l.control;
        if (!control) continue;
        const list = labelsOf.get(control) ?? [];
        list.push(l);
        labelsOf.set(control, list);
      }

    function refOf(el) {
      const known = st.refOf.get(el);
      if (known) return known;
      const ref = `e${st.next++}`;
      st.refOf.set(el, ref);
      st.byRef.set(ref, new WeakRef(el));
      return ref;
    }

    function hidden(el, inSelect) {
      if (el.getAttribute("aria-hidden") === "true" || el.hidden) return true;
      if (inSelect) return false;
      return !el.checkVisibility({ visibilityProperty: true });
    }

    const lines = [];
    const pad = (d) => "  ".repeat(d);
    const quote = (s) => JSON.stringify(s);

    function children(el) {
      return [...(el.shadowRoot ? el.shadowRoot.childNodes : []), ...el.childNodes];
    }

    /** `parentName`: text equal to it is not repeated; null: a label's text, already its control's name. */
    function walk(node, depth, parentName, inSelect, frames) {
      if (lines.length >= maxLines) return;
      if (node.nodeType === 3) {
        const text = cut(node.nodeValue ?? "");
        if (text && parentName !== null && text !== parentName) lines.push(`${pad(depth)}- text: ${quote(text)}`);
        return;
      }
      if (node.nodeType !== 1) return;
      const el = node;
      if (SKIP.has(el.localName) || hidden(el, inSelect)) return;
      const role = roleOf(el);
      const select = inSelect || el.localName === "select";
      if (
        !role ||
        role === "none" ||
        role === "presentation" ||
        role === "generic" ||
        (role === "group" && !el.hasAttribute("aria-label"))
      ) {
        const labelled = el.localName === "label" && el.control !== null;
        for (const c of children(el)) walk(c, depth, labelled ? null : parentName, select, frames);
        return;
      }
      const name = nameOf(el, role);
      let line = `${pad(depth)}- ${role}${name ? ` ${quote(name)}` : ""}`;
      if (role === "heading") line += ` [level=${el.getAttribute("aria-level") ?? el.localName.slice(1)}]`;
      const input = el;
      if (role === "checkbox" || role === "radio" || role === "switch") {
        const checked = el.getAttribute("aria-checked") ?? (input.indeterminate ? "mixed" : String(input.checked === true));
        if (checked === "true") line += " [checked]";
        else if (checked === "mixed") line += " [checked=mixed]";
      }
      if (role === "option" && (el.selected || el.getAttribute("aria-selected") === "true")) line += " [selected]";
      if (el.getAttribute("aria-pressed") === "true") line += " [pressed]";
      const expanded = el.getAttribute("aria-expanded");
      if (expanded === "true") line += " [expanded]";
      if (input.disabled === true || el.getAttribute("aria-disabled") === "true") line += " [disabled]";
      const tabindex = el.getAttribute("tabindex");
      const focusable = (tabindex !== null && Number(tabindex) >= 0) || el.isContentEditable;
      if (ACTIONABLE.has(role) || focusable) line += ` [ref=${refOf(el)}]`;
      const at = lines.length;
      lines.push(line);
      if (FIELDS.has(role)) {
        const value = cut(input.value ?? el.textContent ?? "");
        if (value) lines[at] += `: ${quote(value)}`;
        return;
      }
      if (role === "iframe") {
        let doc = null;
        try {
          doc = el.contentDocument;
        } catch {
          doc = null;
        }
        if (doc?.body && frames < 8) walk(doc.body, depth + 1, "", false, frames + 1);
        else if (!doc && frames < 8) {
          // Another origin's frame: the guest snapshots it in a world of its own and puts its lines here.
          st.frames.push(el);
          lines.push(`${pad(depth + 1)}\u0000frame ${st.frames.length - 1}`);
        } else lines.push(`${pad(depth + 1)}- text: "(a frame nested too deep; not shown)"`);
      } else if (!(FROM_CONTENT.has(role) && name) || role === "checkbox" || role === "radio") {
        for (const c of children(el)) walk(c, depth + 1, name, select, frames);
      }
      // One text child goes on its parent's line, as Playwright writes it.
      if (lines.length === at + 2 && lines[at + 1]?.startsWith(`${pad(depth + 1)}- text: `)) {
        lines[at] += `: ${lines[at + 1]?.slice(pad(depth + 1).length + 8)}`;
        lines.pop();
      } else if (lines.length > at + 1) lines[at] += ":";
    }

    const body = document.body ?? document.documentElement;
    if (body) for (const c of children(body)) walk(c, 0, "", false, 0);
    if (lines.length >= maxLines) lines.push(`- text: "(cut at ${maxLines} lines)"`);
    return { text: lines.join("\n"), next: st.next };
  },

  /** The iframe element behind the last snapshot's marker `i`, if it is still in the document; null otherwise. */
  frameElement(i) {
    const el = globalThis.__hutch?.frames?.[i];
    return el?.isConnected ? el : null;
  },

  /** The element a ref names, if it is still in a document; null otherwise. */
  element(ref) {
    const el = globalThis.__hutch?.byRef.get(ref)?.deref();
    return el?.isConnected ? el : null;
  },
});
